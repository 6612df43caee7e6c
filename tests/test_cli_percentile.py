"""`storyeval score --percentile`: each score's place among the checkpoint's human-written reference stories."""
import json
import shutil

from storyeval.analysis.percentiles import build_reference, write_reference
from storyeval.cli import main as cli


def _with_reference(tiny_checkpoint, tmp_path):
    folder = tmp_path / "checkpoint"
    shutil.copytree(tiny_checkpoint, folder)
    reference = build_reference("union", "roc", {"score": [0.0, 0.25, 0.5, 0.75]}, {"split": "test", "items": 4})
    write_reference(folder, "union", {"roc": reference}, {"command": "a test"})
    return folder


def test_percentile_adds_a_column_per_score(tiny_checkpoint, tmp_path, capsys):
    folder = _with_reference(tiny_checkpoint, tmp_path)
    stories = tmp_path / "stories.jsonl"
    stories.write_text(json.dumps({"story": "Ken went home. He was tired. He slept."}) + "\n")
    out = tmp_path / "scored.jsonl"
    assert cli.main(["score", str(stories), "-o", str(out), "--config", str(folder), "--quiet", "--percentile", "roc"]) == 0, capsys.readouterr().err
    record = json.loads(out.read_text())
    below = sum(value < record["score"] for value in (0.0, 0.25, 0.5, 0.75))
    assert record["score_percentile"] == 100.0 * below / 4


def test_percentile_refuses_text_files_and_missing_references_before_writing(tiny_checkpoint, tmp_path, capsys):
    text = tmp_path / "stories.txt"
    text.write_text("Ken went home. He slept.\n")
    assert cli.main(["score", str(text), "--config", str(tiny_checkpoint), "--quiet", "--percentile", "roc"]) == 1
    assert "use a .jsonl or .csv input" in capsys.readouterr().err
    stories = tmp_path / "stories.jsonl"
    stories.write_text(json.dumps({"story": "Ken went home. He slept."}) + "\n")
    out = tmp_path / "out.jsonl"
    assert cli.main(["score", str(stories), "-o", str(out), "--config", str(tiny_checkpoint), "--quiet", "--percentile", "roc"]) == 1
    assert "has no reference_scores.json" in capsys.readouterr().err
    folder = _with_reference(tiny_checkpoint, tmp_path)
    assert cli.main(["score", str(stories), "-o", str(out), "--config", str(folder), "--quiet", "--percentile", "wp"]) == 1
    assert "has no 'wp' reference; it has ['roc']" in capsys.readouterr().err
    assert not out.exists()
