"""`storyeval score` checks its whole input, and its options, before it scores anything (issue 58):
non-English and letterless stories, JSON Lines or CSV on standard input without --format, an input with no
stories, a broken or too-long story late in a file, --dtype int8 where it is not offered; null for a skipped
JSON Lines row; and --metric story_quality."""
import io
import json
import sys

import pytest

from storyeval.cli import main as cli
from storyeval.scoring import windows

STORY = "[MALE] was at the bar . he noticed a phone on the floor . he gave it to the bartender ."
GERMAN = "Der alte Mann ging jeden Morgen mit seinem Hund in den Park."
RUSSIAN = "Старик каждое утро кормил голубей в парке."


def run_cli(args, capsys):
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def score(path, checkpoint, capsys, *extra):
    return run_cli(["score", str(path), "--config", str(checkpoint), "--quiet", *extra], capsys)


def assert_one_error_line(code, err, *messages):
    assert code == 1 and len(err.strip().splitlines()) == 1 and err.startswith("storyeval: error: "), err
    for message in messages:
        assert message in err, err


@pytest.fixture
def no_model(monkeypatch):
    """Fails the test if a model loads: the check must come first."""
    monkeypatch.setattr(cli, "load_scorer", lambda *args, **kwargs: pytest.fail("a model loaded before the refusal"))


def test_non_english_stories_stop_the_run_or_are_skipped_with_their_reason(tiny_checkpoint, tmp_path, capsys):
    stories = tmp_path / "foreign.txt"
    stories.write_text(f"{STORY}\n{GERMAN}\n12345 67890\n{RUSSIAN}\n")
    code, out, err = score(stories, tiny_checkpoint, capsys)
    assert_one_error_line(code, err, "foreign.txt:2: the line is not English (it reads as German", "2 more row(s)", "--skip-invalid")
    assert not out
    code, out, err = score(stories, tiny_checkpoint, capsys, "--skip-invalid")
    assert code == 0 and out.splitlines()[1:] == ["nan", "nan", "nan"] and float(out.splitlines()[0]) > 0
    assert "3 row(s) could not be scored and were written as nan: not English at lines 2, 4; no letters at line 3" in err


def test_digits_and_punctuation_alone_are_not_a_story(tiny_checkpoint, tmp_path, capsys):
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n12345 67890\n")
    code, out, err = score(stories, tiny_checkpoint, capsys)
    assert_one_error_line(code, err, "s.txt:2: empty line or no letters (one story per line): '12345 67890'")


def test_a_skipped_jsonl_row_is_null_which_strict_json_reads(tiny_checkpoint, tmp_path, capsys):
    records = tmp_path / "s.jsonl"
    records.write_text("".join(json.dumps({"id": i, "story": s}) + "\n" for i, s in enumerate([STORY, "...", GERMAN])))
    code, out, err = score(records, tiny_checkpoint, capsys, "--skip-invalid")
    assert code == 0 and "written as null" in err

    def strict(constant):
        raise ValueError(f"not strict JSON: {constant}")

    rows = [json.loads(line, parse_constant=strict) for line in out.splitlines()]
    assert [row["score"] is None for row in rows] == [False, True, True] and 0 <= rows[0]["score"] <= 1


@pytest.mark.parametrize("content, looks_like, flag", [
    ('{"story": "Ken went home."}\n', "JSON Lines", "--format jsonl"),
    ('\n{"id": 1, "text": "Ken went home."}\n', "JSON Lines", "--format jsonl"),
    ("id,story\n1,Ken went home.\n", "CSV", "--format csv"),
    ("id,text,label\n1,Ken went home.,0\n", "CSV", "--format csv"),
])
def test_standard_input_that_looks_like_jsonl_or_csv_needs_format(content, looks_like, flag, capsys, monkeypatch, no_model):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(content.encode())))
    code, out, err = run_cli(["score", "-", "--quiet"], capsys)
    assert_one_error_line(code, err, f"<stdin>: looks like {looks_like}", flag, "--format txt")
    assert not out


@pytest.mark.parametrize("first_line", ["Ken went home, and slept.", "Yes, no, maybe so.", "He said {yes} twice."])
def test_plain_stories_on_standard_input_are_not_mistaken_for_csv_or_json(first_line, tiny_checkpoint, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f"{first_line}\n{STORY}\n".encode())))
    code, out, err = run_cli(["score", "-", "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert code == 0 and len(out.splitlines()) == 2, err


def test_empty_standard_input_is_an_error(capsys, monkeypatch, no_model):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    code, out, err = run_cli(["score", "-", "--quiet"], capsys)
    assert_one_error_line(code, err, "<stdin>: no stories to score (standard input was empty)")


def test_a_broken_line_late_in_a_file_is_found_before_any_model_loads(tmp_path, capsys, no_model):
    records = tmp_path / "s.jsonl"
    records.write_text(json.dumps({"story": STORY}) + "\n" * 3000 + '{"story": "broken\n')
    output = tmp_path / "scores.jsonl"
    for extra in ([], ["-o", str(output)]):
        code, out, err = run_cli(["score", str(records), "--quiet", *extra], capsys)
        assert_one_error_line(code, err, f"{records}:3001: not JSON")
        assert not out and not output.exists()


def test_a_story_past_the_window_limit_late_in_a_file_stops_the_run_before_any_score(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    from storyeval import files

    monkeypatch.setattr(windows, "MAX_WINDOWS", 3)  # STORY needs 3 of the tiny checkpoint's 16-token windows
    monkeypatch.setattr(files, "LONG_TEXT", 100)  # so that the long story is checked up front
    monkeypatch.setattr(cli, "CHUNK", 2)  # the long story is in the second chunk
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n{STORY}\n{' '.join(f'word{i} .' for i in range(40))}\n")
    scored = []
    real = cli.score_chunk
    monkeypatch.setattr(cli, "score_chunk", lambda *args: scored.append(1) or real(*args))
    code, out, err = score(stories, tiny_checkpoint, capsys)
    assert code == 1 and "s.txt:3: is " in err and "a story may have at most 3" in err
    assert not out and not scored


def test_help_says_what_a_failure_while_scoring_leaves_behind(capsys):
    with pytest.raises(SystemExit):
        cli.main(["score", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "checked whole like a file" in text and "standard output keeps the chunks of 1,024 scores written before it" in text
    assert "story_quality: roc, wp, roc-base, wp-base (default roc-base)" in text


def test_int8_with_the_base_tier_is_refused_before_anything_loads_or_exports(tmp_path, capsys, no_model, monkeypatch):
    """A base checkpoint whose measured int8 copy misses the rule (as union-roc-base's every-weight copy did) is refused
    with its own figures, whatever its record says today."""
    import dataclasses

    from storyeval.scoring.int8 import runtime as int8_runtime

    missed = dataclasses.replace(int8_runtime.MEASURED_FIDELITY["union-roc-base"], spearman=0.9953, human_move=0.0066, modern_outside=None)
    monkeypatch.setitem(int8_runtime.MEASURED_FIDELITY, "union-roc-base", missed)
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n")
    code, out, err = run_cli(["score", str(stories), "--config", "roc-base", "--dtype", "int8", "--quiet"], capsys)
    assert_one_error_line(code, err, "dtype='int8' is not offered for union-roc-base: its int8 copy moves a human-set coefficient by 0.0066",
                          "was not measured on the modern-text check")
    assert "exporting" not in err


def test_an_int8_refusal_names_the_checkpoint_asked_for(tmp_path, capsys, no_model):
    """Not another checkpoint's figure: plot_coherence wp-base is refused under its own name."""
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n")
    code, out, err = run_cli(["score", str(stories), "--metric", "plot_coherence", "--config", "wp-base", "--dtype", "int8", "--quiet"], capsys)
    assert_one_error_line(code, err, "dtype='int8' is not offered for plot-coherence-wp-base", "was not measured")
    assert "union-roc-base" not in err


@pytest.mark.parametrize("metric, message", [
    ("continuation_quality", "--dtype int8 runs union and plot_coherence only; continuation_quality scores in float32"),
    # the MiniLM suite's story metrics take int8, but its combined score in int8 was never measured
    ("story_quality", "dtype='int8' is not offered for story_quality roc: its combined score in int8 was not measured; score it in float32"),
    # the default suite's: refused with its refused part's own figures
    ("story_quality:", "story_quality roc-base scores in int8 through its story metrics, and is not offered for plot-coherence-roc-base: "
                       "its int8 copy moves 1 of 108 modern-text figures"),
])
def test_int8_where_it_is_not_offered_is_one_line_not_a_traceback(metric, message, tmp_path, capsys, no_model):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"context": "Ken went to the bar.", "story": "He found a phone."}) + "\n")
    metric, default, _ = metric.partition(":")  # "story_quality:": the suite's default config, named by no option
    config = ["--config", "roc"] if metric == "story_quality" and not default else []
    code, out, err = run_cli(["score", str(pairs), "--metric", metric, *config, "--dtype", "int8", "--quiet"], capsys)
    assert_one_error_line(code, err, message)


def test_story_quality_scores_a_file_with_and_without_contexts(tmp_path, capsys):
    stories = tmp_path / "s.txt"
    stories.write_text("Ken went to the bar. He found a phone and gave it back.\nAnn baked a cake. She shared it with friends.\n")
    code, out, err = run_cli(["score", str(stories), "--metric", "story_quality", "--quiet"], capsys)
    values = [float(line) for line in out.splitlines()]
    assert code == 0 and len(values) == 2 and all(0 <= v <= 100 for v in values), err
    # naming the precision it scores in anyway changes nothing
    code, named, err = run_cli(["score", str(stories), "--metric", "story_quality", "--dtype", "float32", "--quiet"], capsys)
    assert code == 0 and named == out, err
    assert "story_quality/roc-base: 2 stories" in err and "_percentiles-roc-test-" in err
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"prompt": "Ken went to the bar.", "story": "He found a phone and gave it back."}) + "\n")
    code, out, err = run_cli(["score", str(pairs), "--metric", "story_quality", "--context-field", "prompt", "--quiet"], capsys)
    record = json.loads(out)
    assert code == 0 and 0 <= record["score"] <= 100 and record["score_settings"].startswith("union-roc-base+plot-coherence-roc-base+continuation-quality_")
    for extra, message in [(["--percentile", "roc"], "a percentile already"), (["--explain"], "--explain writes")]:
        code, _, err = run_cli(["score", str(pairs), "--metric", "story_quality", "--quiet", *extra], capsys)
        assert_one_error_line(code, err, message)


def test_a_run_whose_every_row_is_skipped_says_so_without_a_mean_of_nothing(tiny_checkpoint, tmp_path, capsys):
    stories = tmp_path / "s.txt"
    stories.write_text("...\n")
    code, out, err = score(stories, tiny_checkpoint, capsys, "--skip-invalid")
    assert code == 0 and out == "nan\n" and f"union/{tiny_checkpoint}: no story scored (1 skipped)" in err and "mean" not in err
