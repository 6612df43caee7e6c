"""A builder's --output-dir appears whole or not at all (storyeval_training.data.output_folder)."""
import pytest

from storyeval_training.data.output_folder import written_whole


def test_the_folder_appears_only_when_everything_was_written(tmp_path):
    output = tmp_path / "runs" / "pairs"
    with written_whole(output) as staging:
        (staging / "record.json").write_text("{}")
        assert not output.exists() and staging.name.startswith(".pairs.partial-")
    assert (output / "record.json").read_text() == "{}" and [p.name for p in output.parent.iterdir()] == ["pairs"]


def test_a_build_stopped_while_it_writes_leaves_nothing_a_rerun_would_refuse(tmp_path):
    output = tmp_path / "pairs"
    with pytest.raises(KeyboardInterrupt), written_whole(output) as staging:
        (staging / "half").write_text("x")
        raise KeyboardInterrupt
    assert not output.exists() and list(tmp_path.iterdir()) == []


def test_a_folder_made_by_another_run_meanwhile_is_not_written_over(tmp_path):
    output = tmp_path / "pairs"
    with pytest.raises(FileExistsError, match="appeared while this build ran"), written_whole(output) as staging:
        (staging / "mine").write_text("x")
        output.mkdir()
        (output / "theirs").write_text("y")
    assert [p.name for p in output.iterdir()] == ["theirs"] and [p.name for p in tmp_path.iterdir()] == ["pairs"]


def test_an_existing_output_dir_is_a_usage_error_before_any_work(tmp_path, capsys):
    import argparse

    from storyeval_training.data.output_folder import refuse_existing

    parser = argparse.ArgumentParser(prog="builder")
    refuse_existing(parser, tmp_path / "new")  # nothing there: no error
    with pytest.raises(SystemExit) as stopped:
        refuse_existing(parser, tmp_path)
    assert stopped.value.code == 2 and f"--output-dir {tmp_path} exists: choose a new folder" in capsys.readouterr().err
