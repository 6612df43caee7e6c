"""`storyeval score` on awkward files and paths: output onto the input or a folder,
bad devices, Excel CSVs, an existing score field, ragged rows, empty input, a blank
config and missing NLTK data."""
import csv
import json
from pathlib import Path

import pytest
import torch

from storyeval.cli import main as cli

STORY = "[MALE] was at the bar . he noticed a phone on the floor . he gave it to the bartender ."


def run_cli(args, capsys):
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_story(tmp_path) -> Path:
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n")
    return stories


def score(path, checkpoint, capsys, *extra):
    return run_cli(["score", str(path), "--config", str(checkpoint), "--quiet", *extra], capsys)


def assert_clean_error(code, err, *messages):
    # the last line: transformers may draw a progress bar above it when a model first loads
    assert code == 1 and err.splitlines()[-1].startswith("storyeval: error: ") and "Traceback" not in err
    for message in messages:
        assert message in err


def test_output_onto_the_input_is_refused(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    stories = tmp_path / "same.txt"
    stories.write_text(f"{STORY}\n")
    monkeypatch.chdir(tmp_path)
    # the same file by another spelling, and through a symlink
    (tmp_path / "link.txt").symlink_to(stories)
    for output in [str(stories), "same.txt", f"../{tmp_path.name}/same.txt", "link.txt"]:
        code, _, err = score(stories, tiny_checkpoint, capsys, "-o", output)
        assert_clean_error(code, err, "is the input file")
        assert stories.read_text() == f"{STORY}\n" and not list(tmp_path.glob("*.partial"))


def test_output_folder_is_refused_before_scoring(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    stories = one_story(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    monkeypatch.setattr(cli, "load_scorer", lambda *args: pytest.fail("scored before checking the output"))
    code, _, err = score(stories, tiny_checkpoint, capsys, "-o", str(folder))
    assert_clean_error(code, err, "is a directory")
    assert folder.is_dir() and not list(tmp_path.glob("*.partial"))


def test_a_failed_rename_leaves_no_partial_file(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    stories = one_story(tmp_path)
    real_replace = Path.replace

    def failing_replace(self, target):
        if self.name.endswith(".partial"):
            raise OSError(f"cannot rename {self}")
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", failing_replace)
    code, _, err = score(stories, tiny_checkpoint, capsys, "-o", str(tmp_path / "o.txt"))
    assert_clean_error(code, err, "cannot rename")
    assert not (tmp_path / "o.txt").exists() and not list(tmp_path.glob("*.partial"))


def test_a_stop_mid_run_is_one_line_and_a_shells_status_and_writes_nothing(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n" * 3)
    output = tmp_path / "o.txt"
    monkeypatch.setattr(cli, "score_chunk", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
    code, out, err = score(stories, tiny_checkpoint, capsys, "-o", str(output))
    assert code == 130 and err.splitlines()[-1] == f"storyeval score: stopped; nothing written to {output}"
    assert "Traceback" not in err and not output.exists() and not list(tmp_path.glob("*.partial"))
    code, out, err = score(stories, tiny_checkpoint, capsys)
    assert code == 130 and err.splitlines()[-1] == "storyeval score: stopped; the rows printed before it are whole"


@pytest.mark.parametrize("device", ["gpu", "cuda", "cuda:7", "cpu:x"])
def test_bad_device_is_a_clear_error_before_anything_loads(tmp_path, capsys, monkeypatch, device):
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setattr(cli, "load_scorer", lambda *args: pytest.fail("loaded a model for a bad device"))
    # the input does not exist either: the device is checked first, right after parsing
    code, _, err = run_cli(["score", str(tmp_path / "missing.txt"), "--device", device, "--quiet"], capsys)
    assert_clean_error(code, err, f"device {device!r}")


def test_csv_with_a_byte_order_mark(tiny_checkpoint, tmp_path, capsys):
    table = tmp_path / "excel.csv"
    table.write_text(f"story,id\n{STORY},a\n", encoding="utf-8-sig")
    code, _, err = score(table, tiny_checkpoint, capsys, "-o", str(tmp_path / "o.csv"))
    assert code == 0 and "1 story," in err
    rows = list(csv.DictReader((tmp_path / "o.csv").open(encoding="utf-8", newline="")))
    assert list(rows[0]) == ["story", "id", "score"] and rows[0]["story"] == STORY


def test_an_existing_score_field_is_refused_not_overwritten(tiny_checkpoint, tmp_path, capsys):
    table = tmp_path / "s.csv"
    table.write_text(f"story,score\n{STORY},0.5\n")
    records = tmp_path / "s.jsonl"
    records.write_text(json.dumps({"story": STORY}) + "\n" + json.dumps({"story": STORY, "score": 3}) + "\n")
    for path, where in [(table, "s.csv:"), (records, "s.jsonl:2:")]:
        output = tmp_path / f"o{path.suffix}"
        code, _, err = score(path, tiny_checkpoint, capsys, "-o", str(output))
        assert_clean_error(code, err, where, "'score'", "--score-field")
        assert not output.exists()

    code, _, _ = score(table, tiny_checkpoint, capsys, "-o", str(tmp_path / "o.csv"), "--score-field", "union")
    row = next(csv.DictReader((tmp_path / "o.csv").open(newline="")))
    assert code == 0 and row["score"] == "0.5" and 0 <= float(row["union"]) <= 1
    code, _, _ = score(records, tiny_checkpoint, capsys, "-o", str(tmp_path / "o.jsonl"), "--score-field", "union")
    scored = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert code == 0 and scored[1]["score"] == 3 and "union" in scored[0] and "score" not in scored[0]


def test_csv_row_with_more_fields_than_the_header(tiny_checkpoint, tmp_path, capsys):
    table = tmp_path / "s.csv"
    table.write_text(f"story,id\n{STORY},1\n{STORY},2,stray\n")
    code, _, err = score(table, tiny_checkpoint, capsys, "-o", str(tmp_path / "o.csv"))
    assert_clean_error(code, err, "s.csv:3:", "3 fields", "header has 2")
    assert not list(tmp_path.glob("o.csv*"))


@pytest.mark.parametrize("name, content, why", [
    ("s.txt", "", "an empty file"), ("s.jsonl", "", "an empty file"), ("s.jsonl", "\n\n", "blank lines only"),
    ("s.csv", "", "an empty file"), ("s.csv", "id,story\n", "a header and no rows"),
])
def test_an_input_with_no_stories_is_an_error_and_writes_nothing(tmp_path, capsys, monkeypatch, name, content, why):
    monkeypatch.setattr(cli, "load_scorer", lambda *args: pytest.fail("loaded a model for an empty input"))
    path = tmp_path / name
    path.write_text(content)
    output = tmp_path / f"o{path.suffix}"
    code, out, err = run_cli(["score", str(path), "-o", str(output), "--quiet"], capsys)
    assert_clean_error(code, err, f"{path}: no stories to score ({why})")
    assert not output.exists() and not out
    code, out, err = run_cli(["score", str(path), "--quiet"], capsys)  # to stdout
    assert code == 1 and not out


def test_score_field_is_documented(capsys):
    with pytest.raises(SystemExit):
        cli.main(["score", "--help"])
    assert "--score-field" in capsys.readouterr().out


@pytest.mark.parametrize("field", ["", "  "])
def test_blank_score_field_is_refused(tiny_checkpoint, tmp_path, capsys, field):
    table = tmp_path / "s.csv"
    table.write_text(f"story\n{STORY}\n")
    out = tmp_path / "out.csv"
    code, _, err = run_cli(["score", str(table), "--config", str(tiny_checkpoint), "-o", str(out), "--score-field", field, "--quiet"], capsys)
    assert code == 2 and "--score-field must be a non-blank name" in err and not out.exists()


@pytest.mark.parametrize("config", ["", "  "])
def test_blank_config_is_refused(tmp_path, capsys, config):
    stories = one_story(tmp_path)
    code, out, err = run_cli(["score", str(stories), "--config", config, "--quiet"], capsys)
    assert code == 2 and "--config must be a config name, a folder or a Hub repo id" in err and not out


def test_missing_nltk_data_is_an_error_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    from storyeval.checkpoints.resources import MissingResourceError

    def missing(*args, **kwargs):
        raise MissingResourceError("NLTK resource 'punkt_tab' not found; set NLTK_DATA")

    monkeypatch.setattr(cli, "load_scorer", missing)
    stories = one_story(tmp_path)
    code, _, err = run_cli(["score", str(stories), "--quiet"], capsys)
    assert_clean_error(code, err, "NLTK resource 'punkt_tab' not found")


@pytest.mark.parametrize("header, row", [("note,story,note", "first,{story},second"), ("story,,", "{story},,")])
def test_csv_columns_with_repeated_or_blank_names_come_back_unchanged(tiny_checkpoint, tmp_path, capsys, header, row):
    table = tmp_path / "s.csv"
    table.write_text(f"{header}\n{row.format(story=STORY)}\n")
    code, out, _ = score(table, tiny_checkpoint, capsys)
    rows = list(csv.reader(out.splitlines()))
    assert code == 0 and rows[0] == header.split(",") + ["score"]
    assert rows[1][:-1] == next(csv.reader([row.format(story=STORY)])) and float(rows[1][-1]) > 0


def test_output_in_a_missing_folder_is_refused_before_scoring(tmp_path, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(cli, "load_scorer", never)
    stories = one_story(tmp_path)
    code, _, err = run_cli(["score", str(stories), "-o", str(tmp_path / "missing" / "out.txt"), "--quiet"], capsys)
    assert_clean_error(code, err, "its folder does not exist")


def test_quiet_draws_no_bar_while_the_weights_load(tmp_path, capsys):
    from conftest import save_tiny_checkpoint
    from transformers.utils import logging as transformers_logging

    checkpoint = save_tiny_checkpoint(tmp_path / "fresh")  # not cached yet: the weights are read in this call
    stories = one_story(tmp_path)
    capsys.readouterr()  # the bars of saving it
    try:
        code, _, err = score(stories, checkpoint, capsys)
        assert code == 0 and "Loading weights" not in err and "%|" not in err
    finally:
        transformers_logging.enable_progress_bar()  # the CLI switched it off for the whole process


def test_a_csv_story_longer_than_the_csv_modules_default_field_limit_is_scored(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    from storyeval.scoring import windows

    monkeypatch.setattr(windows, "MAX_WINDOWS", 10**6)  # the tiny checkpoint's windows are 16 tokens
    long_story = " ".join([STORY] * 2000)  # about 170,000 characters; the default limit is 131,072
    table = tmp_path / "s.csv"
    with table.open("w", newline="") as handle:
        csv.writer(handle).writerows([["id", "story"], ["long", long_story], ["short", STORY]])
    code, out, err = run_cli(["score", str(table), "--config", str(tiny_checkpoint), "--quiet"], capsys)
    rows = list(csv.reader(out.splitlines()))
    assert code == 0 and [row[0] for row in rows] == ["id", "long", "short"] and "2 stories" in err


def test_a_lone_carriage_return_stays_inside_its_story(tiny_checkpoint, tmp_path, capsys):
    stories = tmp_path / "s.txt"
    stories.write_bytes(b"ken was at the bar .\rhe noticed a phone .\r\nshe went home .\n")
    code, out, err = run_cli(["score", str(stories), "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert code == 0 and len(out.splitlines()) == 2 and "2 stories" in err


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("s.txt", b"ken went home .\ncaf\xe9 was closed .\n", "s.txt:2: not UTF-8 text (byte 0xe9"),
        ("s.csv", b"id,story\n1,ken went home .\n2,caf\xe9 was closed .\n", "s.csv:3: not UTF-8 text"),
        ("s.jsonl", b'{"story": "ken went home ."}\n{"story": "he saw a dog \\ud83d"}\n',
         "s.jsonl:2: 'story' holds '\\ud83d' at position 13, a lone surrogate"),
        ("s.csv", b"id,story\n1,ken went home .\n2,ken\rwent home .\n", "s.csv:3: not valid CSV (new-line character seen in unquoted field"),
    ],
)
def test_text_that_is_not_unicode_is_an_error_naming_its_line(tiny_checkpoint, tmp_path, capsys, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    code, _, err = run_cli(["score", str(path), "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert_clean_error(code, err, message)


def test_a_lone_surrogate_outside_the_story_goes_back_out_as_it_came_in(tiny_checkpoint, tmp_path, capsys):
    # valid JSON: only the story must be text the model can read; another field is passed through
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"story": "ken went home .", "note": "half an emoji \\ud83d"}\n')
    code, out, err = run_cli(["score", str(path), "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert code == 0, err
    record = json.loads(out)
    assert record["note"] == "half an emoji \ud83d" and 0 <= record["score"] <= 1
    assert "\\ud83d" in out  # escaped, so the output file is UTF-8


def test_an_existing_output_is_kept_unless_overwrite_is_given(tiny_checkpoint, tmp_path, capsys):
    stories = one_story(tmp_path)
    output = tmp_path / "scores.txt"
    output.write_text("earlier results\n")
    code, _, err = score(stories, tiny_checkpoint, capsys, "-o", str(output))
    assert_clean_error(code, err, "scores.txt exists; pass --overwrite to replace it")
    assert output.read_text() == "earlier results\n"
    code, _, _ = score(stories, tiny_checkpoint, capsys, "-o", str(output), "--overwrite")
    assert code == 0 and output.read_text() != "earlier results\n" and len(output.read_text().splitlines()) == 1


@pytest.mark.parametrize("output", ["scores.jsonl", "scores.csv", "scores", "scores.TXT.bak"])
def test_an_output_extension_unlike_the_inputs_format_is_refused(tiny_checkpoint, tmp_path, capsys, monkeypatch, output):
    monkeypatch.setattr(cli, "load_scorer", lambda *args: pytest.fail("loaded before checking the output"))
    code, _, err = score(one_story(tmp_path), tiny_checkpoint, capsys, "-o", str(tmp_path / output))
    assert_clean_error(code, err, "written in the input's format (.txt); name the output *.txt")
    assert not (tmp_path / output).exists()


def test_every_format_writes_the_same_exact_score(tiny_checkpoint, tmp_path, capsys):
    (tmp_path / "s.jsonl").write_text(json.dumps({"story": STORY}) + "\n")
    (tmp_path / "s.csv").write_text(f"story\n{STORY}\n")
    _, txt, _ = score(one_story(tmp_path), tiny_checkpoint, capsys)
    _, jsonl, _ = score(tmp_path / "s.jsonl", tiny_checkpoint, capsys)
    _, table, _ = score(tmp_path / "s.csv", tiny_checkpoint, capsys)
    record = json.loads(jsonl)
    assert txt.strip() == list(csv.reader(table.splitlines()))[1][1] == repr(record["score"])
    assert record["score_settings"].startswith(f"{tiny_checkpoint.name}_fp32_storyeval-")


def test_an_unscorable_line_stops_the_run_or_scores_nan_with_skip_invalid(tiny_checkpoint, tmp_path, capsys):
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n\n{STORY}\n...\n")
    code, out, err = score(stories, tiny_checkpoint, capsys)
    assert_clean_error(code, err, "s.txt:2: empty line or no letters", "1 more row(s) cannot be scored", "--skip-invalid")
    code, out, err = score(stories, tiny_checkpoint, capsys, "--skip-invalid")
    lines = out.splitlines()
    assert code == 0 and lines[1] == lines[3] == "nan" and lines[0] == lines[2] != "nan"
    assert "2 row(s) could not be scored and were written as nan: no letters at lines 2, 4" in err and ": 2 stories" in err


def test_a_story_past_the_window_limit_stops_the_run_naming_its_line_and_the_limit(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    from storyeval.scoring import windows

    monkeypatch.setattr(windows, "MAX_WINDOWS", 3)  # STORY needs 3 of the tiny checkpoint's 16-token windows
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n{' '.join(f'word{i} .' for i in range(40))}\n")
    output = tmp_path / "scores.txt"
    code, out, err = score(stories, tiny_checkpoint, capsys, "--output", str(output))
    assert_clean_error(code, err, "s.txt:2: is ", "a story may have at most 3 (", "score it in parts")
    assert not output.exists() and not Path(str(output) + ".partial").exists()


def test_continuation_quality_scores_a_file_with_a_context_field(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"id": i, "prompt": "Ken found a phone at the bar.", "story": s}) + "\n"
                             for i, s in enumerate(["He gave it back.", "A tiger ate it."])))
    code, out, err = run_cli(["score", str(pairs), "--metric", "continuation_quality", "--context-field", "prompt", "--quiet"], capsys)
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["id"] for r in records] == [0, 1]
    assert {"score_overall", "score_relevance", "score_interestingness"} <= set(records[0])
    assert "continuation_quality/deltascore: 2 stories, mean score_overall" in err
    # a context field the file lacks, and a .txt file, which has no fields
    code, _, err = run_cli(["score", str(pairs), "--metric", "continuation_quality", "--quiet"], capsys)
    assert_clean_error(code, err, "expected an object with a string field 'context'")
    code, _, err = run_cli(["score", str(one_story(tmp_path)), "--metric", "continuation_quality", "--quiet"], capsys)
    assert_clean_error(code, err, "give a .jsonl or .csv file with 'story' and 'context' fields")


def test_version_and_help_show_what_the_defaults_are(capsys):
    import storyeval

    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"storyeval {storyeval.__version__}"
    with pytest.raises(SystemExit):
        cli.main(["score", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    from storyeval.checkpoints.registry import metric_spec

    union_configs = ("roc, wp, roc-base, wp-base, wp-base-ending, wp-base-ending-neighbours, roc-neighbours, wp-neighbours, wp-base-complete, "
                     "wp-base-ordered, wp-ordered, wp-complete, roc-complete")
    assert f"union: {union_configs} (default {metric_spec('union').default})" in text
    assert "16 for union" in text and "256 for continuation_quality" in text
    assert "(default: union)" in text and "(default: None)" not in text and "(default: False)" not in text
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 7860)" in text and "(default: 127.0.0.1)" in text and "(default: all)" in text


def test_demo_without_the_extra_is_one_line_with_the_install_command(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gradio", None)  # what an install without [demo] looks like to import
    code, _, err = run_cli(["demo"], capsys)
    assert code == 1 and err == ('storyeval: error: the demo needs the [demo] extra: python -m pip install "gradio>=5.0" '
                                 '(in a checkout: python -m pip install -e ".[demo]")\n')


def test_no_loading_bar_from_transformers_even_without_quiet(tmp_path, capsys):
    from conftest import save_tiny_checkpoint

    checkpoint = save_tiny_checkpoint(tmp_path / "fresh")  # not cached: the weights are read in this call
    capsys.readouterr()
    code, _, err = run_cli(["score", str(one_story(tmp_path)), "--config", str(checkpoint)], capsys)
    assert code == 0 and "Loading weights" not in err and "1 story" in err
