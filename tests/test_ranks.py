"""storyeval.score_by_rank: each rank of an accelerate or torchrun job scores its own stories; two CPU processes give
the scores of one, in input order, with the last step's repeated samples dropped."""
import json
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("accelerate", reason="the [train] extra")

from conftest import CHECKOUT, subprocess_env  # noqa: E402
from test_readme import python_blocks  # noqa: E402

from storyeval.analysis.ranks import score_by_rank  # noqa: E402

EXAMPLE = CHECKOUT / "examples" / "score_by_rank.py"
DOC = CHECKOUT / "docs" / "distributed.md"
STORIES = [
    "Ken went to the bar with his friends. He noticed a phone on the floor. He gave it to the bartender.",
    "Amy wanted a dog. Her parents said no. She saved her money for a year. They let her buy a puppy.",
    "The storm knocked out the power. We lit candles. We played cards until morning.",
]
# 13 stories, 4 a step on each of 2 ranks: the last step has 5 stories for 8 places, so the sampler repeats 3
LINES = [f"{STORIES[i % 3]} It was day {i}." if i != 6 else "..." for i in range(13)]

# docs/distributed.md's score_by_rank block first (it makes the job's Accelerator, so a wrong one would show), then
# both ways of the example, in one launch, so that the two processes start once
BOTH_WAYS = """
import json, os, runpy, sys
example, stories, out, doc_block = sys.argv[1:5]
namespace = {"stories": json.loads(sys.argv[5])}
exec(compile(doc_block, "docs/distributed.md", "exec"), namespace)
with open(f"{out}/doc_{os.environ['RANK']}.json", "w") as mine:
    json.dump({"mine": namespace["mine"], "scores": namespace["scores"]}, mine)
example = runpy.run_path(example)
example["main"]([stories, "-o", out + "/loader.json", "--on-invalid", "nan"])
example["main"]([stories, "-o", out + "/split.json", "--on-invalid", "nan", "--split"])
"""


class Rank:
    """The accelerator of a one-process job, as score_by_rank uses it (accelerate's own gathers return their input)."""

    process_index, num_processes, is_main_process, device = 0, 1, True, "cpu"

    @staticmethod
    def gather_for_metrics(rows, use_gather_object=False):
        return rows


@pytest.fixture(scope="module")
def union_scorer():
    from storyeval import download_model, load_from_checkpoint

    return load_from_checkpoint(download_model("union/roc"), device="cpu")


def test_two_processes_give_one_process_scores_in_input_order(union_scorer, tmp_path):
    stories = tmp_path / "stories.txt"
    stories.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    driver = tmp_path / "both_ways.py"
    driver.write_text(BOTH_WAYS)
    env = subprocess_env({**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))})
    (doc_block,) = [code for _, code in python_blocks(DOC.read_text(encoding="utf-8")) if "score_by_rank(" in code]
    scorable = [line for line in LINES if line != "..."]
    # torchrun: `accelerate launch --cpu --num_processes 2` starts one process in accelerate 1.15 unless mpirun is set up
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(driver), str(EXAMPLE), str(stories), str(tmp_path), doc_block, json.dumps(scorable[:5])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # the doc's block split the stories between the two processes, and each got all five scores
    doc = [json.loads((tmp_path / f"doc_{rank}.json").read_text()) for rank in (0, 1)]
    assert [part["mine"] for part in doc] == [scorable[:3], scorable[3:5]], doc
    for part in doc:
        assert part["scores"] == pytest.approx(union_scorer.score(scorable[:5]), abs=1e-6)
    alone = iter(union_scorer.score(scorable))
    expected = [math.nan if line == "..." else next(alone) for line in LINES]
    for way in ("loader", "split"):
        result = json.loads((tmp_path / f"{way}.json").read_text())
        assert result["processes"] == 2 and len(result["scores"]) == len(LINES), (way, result)
        for got, want in zip(result["scores"], expected):
            assert (math.isnan(got) and math.isnan(want)) or abs(got - want) <= 1e-6, (way, result["scores"], expected)
    assert "rows [6] of the 13 gathered" in done.stderr  # the split way gathers all 13 in one call


def test_one_process_where_the_launcher_started_two_is_refused_before_any_scoring(union_scorer, monkeypatch):
    """Accelerator() without cpu=True on a machine without CUDA: under torchrun each process is rank 0 of 1."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"the launcher started 2 processes but the accelerator runs 1, .*Accelerator\(cpu=True\)"):
        score_by_rank(union_scorer, LINES[:2], Rank())
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert len(score_by_rank(union_scorer, LINES[:2], Rank())) == 2


def test_an_unscorable_story_raises_naming_its_gathered_row_or_scores_nan(union_scorer, caplog):
    with pytest.raises(ValueError, match=r"predictions is empty or has no letters: '' \(row 1 of the 3 gathered"):
        score_by_rank(union_scorer, [LINES[0], "", LINES[1]], Rank())
    scores = score_by_rank(union_scorer, [LINES[0], "", LINES[1]], Rank(), on_invalid="nan")
    assert math.isnan(scores[1]) and abs(scores[0] - union_scorer.score([LINES[0]])[0]) <= 1e-6  # batched with another
    assert "rows [1] of the 3 gathered" in caplog.text


def test_a_story_past_the_window_limit_raises_naming_its_gathered_row_or_scores_nan(union_scorer, monkeypatch):
    """As an empty story does: a corpus job is not stopped by one story too long to score (limit lowered here to 2
    windows, 766 tokens of union-roc)."""
    from storyeval.scoring import windows

    monkeypatch.setattr(windows, "MAX_WINDOWS", 2)
    stories = [LINES[0], "word " * 800, LINES[1]]
    with pytest.raises(ValueError, match=r"predictions is 800 tokens long and needs 3 windows .* \(row 1 of the 3 gathered"):
        score_by_rank(union_scorer, stories, Rank())
    scores = score_by_rank(union_scorer, stories, Rank(), on_invalid="nan")
    assert math.isnan(scores[1]) and scores[::2] == pytest.approx(union_scorer.score(stories[::2]), abs=1e-6)


def test_a_rank_that_fails_makes_every_rank_raise(union_scorer, monkeypatch):
    """A rank that raised alone would leave the others waiting in the gather for ever: the failure is gathered first."""
    import accelerate.utils

    monkeypatch.setattr(accelerate.utils, "gather_object", lambda failures: failures + ["rank 1: StoryTooLongError: too long"])
    with pytest.raises(RuntimeError, match="another rank could not score its stories: rank 1: StoryTooLongError"):
        score_by_rank(union_scorer, LINES[:2], Rank())
    monkeypatch.setattr(accelerate.utils, "gather_object", lambda failures: failures)
    with pytest.raises(TypeError, match="predictions must be a list of strings"):
        score_by_rank(union_scorer, "one story", Rank())  # the failing rank raises its own error


def test_continuation_quality_and_the_suite_keep_their_result_shapes(monkeypatch):
    import accelerate.utils

    from storyeval.analysis.suite import StoryQuality
    from storyeval.checkpoints.resolution import resolve_checkpoint
    from storyeval.scoring.sequence import load_scorer

    monkeypatch.setattr(accelerate.utils, "gather_object", lambda failures: failures)
    contexts, endings = ["Ken went to the bar.", "Amy wanted a dog."], ["He found a phone.", "Her parents said yes."]
    continuation = load_scorer("continuation_quality", resolve_checkpoint("continuation_quality", "deltascore"))
    assert score_by_rank(continuation, endings, Rank(), contexts=contexts) == continuation.score(contexts, endings)
    suite = StoryQuality("roc")
    assert score_by_rank(suite, endings, Rank(), contexts=contexts) == suite.score(endings, contexts=contexts)
