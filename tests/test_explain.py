"""Leave-one-out sentence blame: the library call, the demo's use of it and `storyeval score --explain`.

How often the blame finds a planted contradiction or repetition is measured over hundreds of
generated cases by ``python -m benchmarks.agreement.explain_hit_rate``, not by one example here.
"""
import json

import pytest

from storyeval.analysis.explain import explain, explain_many
from storyeval.cli import demo
from storyeval.cli import main as cli


class CountingScorer:
    """Scores a story by how few times it says "not": a stand-in whose blame is known."""

    def __init__(self):
        self.calls = []

    def score(self, stories, batch_size=16, dtype=None):
        self.calls.append(list(stories))
        return [1.0 / (1 + story.count(" not ")) for story in stories]


def test_the_sentence_whose_removal_helps_most_is_blamed_first():
    scorer = CountingScorer()
    result = explain("Ken went home. He was tired. He was not tired at all. He slept.", scorer)
    assert result.ranking()[0] == 2
    assert result.sentences[2].change == pytest.approx(0.5) and result.sentences[0].change == 0
    assert result.score == pytest.approx(0.5)
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 5  # the story and 4 variants, in one call


def test_many_stories_are_scored_in_one_call_and_a_context_is_never_blamed():
    scorer = CountingScorer()
    results = explain_many(["He did not go. He stayed.", "One sentence only."], scorer, contexts=["It was not late.", "Hi there."])
    assert len(scorer.calls) == 1
    assert [b.sentence for b in results[0].sentences] == ["He did not go.", "He stayed."]
    assert all(" not late" in variant for variant in scorer.calls[0][:3])
    assert results[1].sentences == [] and results[1].ranking() == []


@pytest.mark.parametrize("story, error", [("", ValueError), ("...", ValueError), (None, TypeError), (["a story ."], TypeError)])
def test_bad_stories_are_refused(story, error):
    with pytest.raises(error):
        explain(story, CountingScorer())


def test_a_continuation_scorer_is_refused():
    from storyeval.scoring.continuation import ContinuationScorer

    with pytest.raises(TypeError, match="story scorer"):
        explain("A tale. Its end.", ContinuationScorer.__new__(ContinuationScorer))
    with pytest.raises(TypeError, match="score"):
        explain("A tale. Its end.", object())


def test_the_demo_blame_comes_from_explain(monkeypatch):
    scorer = CountingScorer()
    monkeypatch.setattr(demo, "_scorer", lambda metric, tier="fast", corpus="roc": scorer)
    rows, attribution = demo.score_story("Ken went home. He was not tired. He slept.", metrics=("union",))
    assert rows[0][1] == 0.5
    assert [row[0] for row in attribution] == [1, 2, 3] and attribution[1][3] == 0.5


def test_score_explain_writes_each_records_blame(tiny_checkpoint, tmp_path, capsys):
    stories = tmp_path / "stories.jsonl"
    stories.write_text(json.dumps({"id": 1, "story": "Ken went home. He was tired. He slept."}) + "\n"
                       + json.dumps({"id": 2, "story": "A single sentence."}) + "\n")
    out = tmp_path / "scored.jsonl"
    code = cli.main(["score", str(stories), "-o", str(out), "--config", str(tiny_checkpoint), "--quiet", "--explain"])
    assert code == 0, capsys.readouterr().err
    first, second = [json.loads(line) for line in out.read_text().splitlines()]
    assert [s["sentence"] for s in first["explanation"]] == ["Ken went home.", "He was tired.", "He slept."]
    assert set(first["explanation"][0]) == {"index", "sentence", "score_without", "change"}
    assert second["explanation"] == [] and isinstance(second["score"], float)


def test_score_explain_needs_jsonl_and_a_free_field(tiny_checkpoint, tmp_path, capsys):
    text = tmp_path / "stories.txt"
    text.write_text("Ken went home. He slept.\n")
    assert cli.main(["score", str(text), "--config", str(tiny_checkpoint), "--quiet", "--explain"]) == 1
    assert "use a .jsonl input" in capsys.readouterr().err
    taken = tmp_path / "taken.jsonl"
    taken.write_text(json.dumps({"story": "Ken went home. He slept.", "explanation": "mine"}) + "\n")
    out = tmp_path / "out.jsonl"
    assert cli.main(["score", str(taken), "-o", str(out), "--config", str(tiny_checkpoint), "--quiet", "--explain"]) == 1
    assert "already has a field 'explanation'" in capsys.readouterr().err
    assert not out.exists()


def test_hit_rate_counts_either_copy_of_a_repeated_sentence_and_gives_chance_levels():
    from benchmarks.agreement.explain_hit_rate import score_cases

    cases = [
        {"kind": "negation", "sentences": ["It was late .", "He did not go .", "He stayed ."], "targets": [1]},
        {"kind": "repeat_sentence", "sentences": ["It was late .", "He did not go .", "He did not go ."], "targets": [1, 2]},
        {"kind": "negation", "sentences": ["It was not late .", "He went .", "He stayed ."], "targets": [2]},
    ]
    results = score_cases(cases, CountingScorer(), batch_size=4)
    whole, with_context = results["whole_story"], results["first_sentence_as_context"]
    # case 1: its planted "not" is blamed; case 2: blaming the first copy counts; case 3: the "not" is elsewhere
    assert whole["all"]["hit_rate"] == pytest.approx(2 / 3) and whole["all"]["cases"] == 3
    assert whole["repeat_sentence"]["chance"] == pytest.approx(2 / 3) and whole["negation"]["chance"] == pytest.approx(1 / 3)
    assert with_context["negation"]["chance"] == pytest.approx(1 / 2)
    assert whole["negation"]["last_sentence"] == pytest.approx(1 / 2) and whole["repeat_sentence"]["last_sentence"] == 1.0


def test_planted_flaws_change_exactly_one_sentence_after_the_first():
    import random

    from benchmarks.agreement.explain_hit_rate import plant

    units = [s.split() for s in ["[MALE] went home .", "he was tired .", "he went to bed early .", "he slept well ."]]
    for kind in ("negation", "repeat_ngram", "repeat_sentence"):
        planted = plant(kind, units, random.Random(f"1:{kind}"), lexicon=None)
        changed = [i for i, (a, b) in enumerate(zip(units, planted)) if a != b]
        assert len(changed) == 1 and changed[0] >= 1, kind
