"""--num-threads for storyeval score and compare: bad values are usage errors before anything loads."""
import pytest
import torch

from storyeval.cli import main as cli
from storyeval.scoring import sequence as scoring

STORY = "[MALE] was at the bar . he noticed a phone on the floor ."


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a bad --num-threads must stop the command before a checkpoint loads")

    monkeypatch.setattr(scoring, "load_scorer", refuse)


@pytest.fixture
def torch_threads():
    """Restores torch's thread count after a test that sets it."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
@pytest.mark.parametrize("command", ["score", "compare"])
def test_bad_num_threads_is_a_usage_error_before_loading(command, value, tmp_path, no_loading, capsys):
    stories = tmp_path / "s.txt"
    stories.write_text(STORY + "\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, str(stories), f"--num-threads={value}"])
    assert exit_info.value.code == 2
    assert f"--num-threads: expects a positive integer, got {value}" in capsys.readouterr().err.replace("'", "")


def test_num_threads_sets_the_scoring_threads(tiny_checkpoint, tmp_path, capsys, torch_threads):
    stories = tmp_path / "s.txt"
    stories.write_text(STORY + "\nhe left .\n")
    assert cli.main(["score", str(stories), "--config", str(tiny_checkpoint), "--num-threads", "1", "--quiet"]) == 0
    assert torch.get_num_threads() == 1 and len(capsys.readouterr().out.split()) == 2


def test_compare_takes_num_threads(tiny_checkpoint, tmp_path, capsys, torch_threads):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(STORY + "\nhe left .\nshe smiled .\n")
    b.write_text("he left .\n" + STORY + "\nshe ran .\n")
    code = cli.main(["compare", str(a), str(b), "--config", str(tiny_checkpoint), "--num-threads", "1", "--resamples", "99"])
    assert code == 0 and torch.get_num_threads() == 1 and "a" in capsys.readouterr().out
