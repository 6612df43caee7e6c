"""What a new user trips on at the command line: every error one line, every path people use, readable output."""
import io
import json
import socket
import sys

import pytest

from storyeval.checkpoints import resolution as checkpoints
from storyeval.cli import main as cli

STORY = "[MALE] was at the bar . he noticed a phone on the floor . he gave it to the bartender ."


def run_cli(args, capsys):
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_usage_error(args, capsys) -> str:
    with pytest.raises(SystemExit) as raised:
        cli.main(args)
    err = capsys.readouterr().err
    assert raised.value.code == 2 and len(err.strip().splitlines()) == 1 and "usage:" not in err, err
    return err


@pytest.mark.parametrize("args, message", [
    (["score", "s.txt", "--num-threads", "0"], "storyeval score: error: argument --num-threads: expects a positive integer, got 0"),
    (["score", "s.txt", "--batch-size", "0"], "storyeval score: error: argument --batch-size: expects a positive integer, got 0"),
    (["score", "s.txt", "--dtype", "int4"], "invalid choice: 'int4'"),
    (["compare", "a.jsonl", "b.jsonl", "--resamples", "0"], "argument --resamples: expects a positive integer, got 0"),
    (["compare", "a.jsonl", "b.jsonl", "--batch-size", "-1"], "argument --batch-size: expects a positive integer, got -1"),
    (["score"], "the following arguments are required: input"),
])
def test_option_errors_are_one_line(args, message, capsys):
    assert message in one_line_usage_error(args, capsys)


def test_a_folder_as_input_says_it_is_a_folder(tmp_path, capsys):
    code, _, err = run_cli(["score", str(tmp_path)], capsys)
    assert code == 1 and err == f"storyeval: error: {tmp_path} is a folder; give a story file (.txt, .jsonl or .csv) in it\n"
    code, _, err = run_cli(["compare", str(tmp_path), str(tmp_path / "b.jsonl")], capsys)
    assert code == 1 and f"{tmp_path} is a folder" in err


def test_a_broken_jsonl_line_keeps_the_whole_message(tiny_checkpoint, tmp_path, capsys):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"story": "ok ."}\n{"story": "a\tb"}\n')
    code, _, err = run_cli(["score", str(broken), "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert code == 1 and f"{broken}:2: not JSON (Invalid control character at: column 13)" in err
    code, _, err = run_cli(["compare", str(broken), str(broken.with_name("b.jsonl"))], capsys)
    assert f"{broken}:2: not JSON (Invalid control character at: column 13)" in err


def test_help_lists_only_configs_that_load_and_derives_them_from_the_bundle(capsys, monkeypatch, tmp_path):
    def help_text():
        with pytest.raises(SystemExit):
            cli.main(["score", "--help"])
        return " ".join(capsys.readouterr().out.split())

    text = help_text()
    assert "plot_coherence: roc, roc-base, wp-base (default roc-base)" in text and "``" not in text
    # shipping a registered config (a bundled checkpoint) lists it, with no other change
    cards = tmp_path / "cards"
    for name in ("plot-coherence-roc", "plot-coherence-roc-base", "plot-coherence-wp"):
        (cards / name).mkdir(parents=True)
        (cards / name / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(checkpoints, "HUB_CARDS", cards)
    assert "plot_coherence: roc, wp, roc-base, wp-base (default roc-base)" in help_text()


def test_an_unshipped_config_is_one_line_naming_what_to_do(tmp_path, capsys):
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n")
    code, _, err = run_cli(["score", str(stories), "--metric", "plot_coherence", "--config", "wp"], capsys)
    assert code == 1 and len(err.splitlines()) == 1 and len(err) < 300, err
    assert "no plot-coherence-wp checkpoint is bundled or published" in err and "docs/TRAINING.md" in err


def test_compare_help_documents_every_option_with_its_default(capsys):
    from storyeval.checkpoints.registry import metric_spec

    with pytest.raises(SystemExit):
        cli.main(["compare", "--help"])
    text = capsys.readouterr().out
    assert "``" not in text
    options = text.split("options:", 1)[1]
    flat = " ".join(options.split())
    for option, default in [("--resamples", "9999"), ("--seed", "12345"), ("--batch-size", "16"), ("--field", "story"),
                            ("--metric", "union")]:
        assert f"(default: {default})" in flat.split(option, 1)[1].split(" --", 1)[0], option
    assert f"union {metric_spec('union').default}" in flat.split("--config", 1)[1].split(" --", 1)[0]  # each metric's default
    for option in ("--device", "--dtype"):
        assert "default" in flat.split(option, 1)[1].split(" --", 1)[0], option


def test_standard_input_and_output(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\nhe left .\n")
    code, expected, _ = run_cli(["score", str(stories), "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert code == 0 and len(expected.split()) == 2
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stories.read_bytes())))
    code, out, err = run_cli(["score", "-", "-o", "-", "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert code == 0 and out == expected, err
    # JSONL on standard input, with a bad line named as standard input's
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"story": "he left ."}\n{"story": ""}\n')))
    code, _, err = run_cli(["score", "-", "--format", "jsonl", "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert code == 1 and "storyeval: error: <stdin>:2: 'story' is empty" in err


def test_output_to_dev_null_is_allowed(tiny_checkpoint, tmp_path, capsys):
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\n")
    code, out, err = run_cli(["score", str(stories), "--config", str(tiny_checkpoint), "--quiet", "-o", "/dev/null"], capsys)
    assert code == 0 and out == "" and "1 story" in err, err


@pytest.mark.parametrize("count, seconds, shown", [
    (1, 40.0, "40.0 s/story"), (3, 4.5, "1.5 s/story"), (170, 1.0, "170.0 stories/s"), (1, 1.0, "1.0 stories/s"),
    (0, 0.5, "0.0 stories/s"),
])
def test_the_rate_is_readable_for_slow_stories(count, seconds, shown):
    assert cli.format_rate(count, seconds) == shown


def test_demo_on_a_port_in_use_is_one_line(capsys):
    pytest.importorskip("gradio")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = run_cli(["demo", "--port", str(port)], capsys)
    assert code == 1 and err == f"storyeval: error: port {port} is in use; pass --port N\n"


def test_int8_says_it_is_exporting_and_keeps_the_export_out_of_the_rate(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    import time

    from storyeval.scoring.int8 import runtime as int8_runtime

    if not int8_runtime.cpu_has_int8_dot_product():
        pytest.skip("this CPU has no int8 dot-product instructions")
    pytest.importorskip("openvino")
    monkeypatch.setenv("STORYEVAL_CACHE", str(tmp_path / "cache"))
    checkpoint = tmp_path / "ckpt"
    checkpoint.symlink_to(tiny_checkpoint)
    backend = type(int8_runtime.get_backend())
    export = backend.export

    def slow_export(self, model, tokenizer, folder, **options):
        time.sleep(3)  # a real MiniLM export takes about 11 s
        return export(self, model, tokenizer, folder, **options)

    monkeypatch.setattr(backend, "export", slow_export)
    stories = tmp_path / "s.txt"
    stories.write_text(f"{STORY}\nhe left .\n")
    code, _, err = run_cli(["score", str(stories), "--config", str(checkpoint), "--dtype", "int8", "--quiet"], capsys)
    assert code == 0, err
    assert f"exporting {tiny_checkpoint.name} to int8, once" in err and "exported in" in err
    summary = err.strip().splitlines()[-1]
    assert "stories/s" in summary and float(summary.split(" stories/s")[0].rsplit(" ", 1)[1]) > 1, summary


def test_compare_records_what_scored_it(tiny_checkpoint, tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"story": f"he went to shop {i} ."}) + "\n" for i in range(4)))
    b.write_text("".join(json.dumps({"story": f"he went to shop {i} . he left ."}) + "\n" for i in range(4)))
    out = tmp_path / "cmp.json"
    code, table, err = run_cli(["compare", str(a), str(b), "--config", str(tiny_checkpoint), "--resamples", "99", "--json", str(out)], capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    assert payload["metric"] == "union" and payload["config"] == str(tiny_checkpoint) and payload["scores_from"] == "scored"
    assert payload["settings"].startswith(f"{tiny_checkpoint.name}_fp32_storyeval-") and payload["settings"] in table


def test_compare_of_scored_files_carries_their_settings_and_refuses_mixed_ones(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"score": s, "score_settings": "union-roc_fp32_x"}) + "\n" for s in (0.1, 0.5, 0.3)))
    b.write_text("".join(json.dumps({"score": s, "score_settings": "union-roc_fp32_x"}) + "\n" for s in (0.2, 0.4, 0.1)))
    code, out, err = run_cli(["compare", str(a), str(b), "--resamples", "99", "--json", "-"], capsys)
    assert code == 0, err
    payload = json.loads(out)
    assert payload["settings"] == "union-roc_fp32_x" and payload["scores_from"] == "files" and payload["metric"] is None
    b.write_text("".join(json.dumps({"score": s, "score_settings": "union-wp_fp32_x"}) + "\n" for s in (0.2, 0.4, 0.1)))
    code, _, err = run_cli(["compare", str(a), str(b), "--resamples", "99"], capsys)
    assert code == 1 and "different settings" in err and "union-wp_fp32_x" in err


def test_compare_on_the_suites_combined_percentile(tmp_path, capsys):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("Ken went to the bar. He found a phone. He gave it back.\nAnn baked a cake. She shared it with friends.\n")
    b.write_text("Ken went to the bar. Ken went to the bar. Ken went to the bar.\nAnn baked. Cake cake cake.\n")
    code, out, err = run_cli(["compare", str(a), str(b), "--metric", "story_quality", "--resamples", "99", "--json", "-"], capsys)
    assert code == 0, err
    payload = json.loads(out)
    assert payload["metric"] == "story_quality" and payload["config"] == "roc-base"  # the suite's default
    assert payload["settings"].startswith("union-roc-base+plot-coherence-roc-base_fp32_") and "_percentiles-roc-test-" in payload["settings"]
    assert all(0 <= s["mean"] <= 100 for s in payload["systems"])
    code, _, err = run_cli(["compare", str(a), str(b), "--metric", "story_quality", "--dtype", "bfloat16"], capsys)
    assert code == 1 and "scores in float32, not bfloat16: pass --dtype float32 or leave it out" in err
    code, named, err = run_cli(["compare", str(a), str(b), "--metric", "story_quality", "--resamples", "99", "--json", "-",
                                "--dtype", "float32"], capsys)
    assert code == 0 and named == out, err  # the precision it scores in anyway


def test_the_comparison_plot_keeps_its_title_inside_the_figure():
    pytest.importorskip("matplotlib")
    from storyeval.analysis.compare import compare_systems, comparison_figure

    scores = {"a": [0.1, 0.5, 0.3, 0.7], "b": [0.2, 0.4, 0.2, 0.6]}
    figure = comparison_figure(compare_systems(scores, resamples=99), scores, "union (roc)")
    renderer = figure.canvas.get_renderer()
    title = figure.axes[0].title.get_window_extent(renderer)
    box = figure.bbox
    assert box.x0 <= title.x0 and title.x1 <= box.x1 and title.y1 <= box.y1, (title, box)
