"""The shared training loop's arguments and resumable states (the runs themselves are in test_union, test_plot_*)."""
import argparse
import dataclasses
from pathlib import Path

import pytest

from storyeval_training import loop
from storyeval_training.data.plots import generator
from storyeval_training.recipes import train_plot_coherence, train_union


def loop_parser(**defaults) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", required=True)
    loop.add_loop_arguments(parser, **defaults)
    return parser


def write_state(folder: Path, complete: bool = True) -> Path:
    """A step_N folder as save_training_state leaves it (the files the resume check looks for)."""
    folder.mkdir(parents=True)
    (folder / "optimizer.bin").write_bytes(b"")
    if complete:
        (folder / loop.TRAINER_STATE).write_text('{"best": null, "history": [], "minutes": 0.0}\n')
    return folder


def test_loop_arguments_round_trip_through_the_command_line():
    parser = loop_parser()
    assert loop.LoopArguments.from_namespace(parser.parse_args(["--output-dir", "out"])) == loop.LoopArguments(output_dir="out")
    given = loop.LoopArguments(
        output_dir="out", per_device_train_batch_size=3, per_device_eval_batch_size=5, learning_rate=1e-3, weight_decay=0.01,
        num_train_epochs=1.5, max_train_steps=7, time_budget_minutes=2.5, stop_after_steps=3, gradient_accumulation_steps=2, lr_scheduler_type="cosine",
        num_warmup_steps=4, eval_steps=6, checkpointing_steps=8, seed=1,
    )
    argv = []
    for name, value in dataclasses.asdict(given).items():
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    args = parser.parse_args(argv)
    loop.check_loop_arguments(parser, args)
    assert loop.LoopArguments.from_namespace(args) == given
    # a script's own options are left out
    assert loop.LoopArguments.from_namespace(argparse.Namespace(**dataclasses.asdict(given), max_length=3)) == given


def test_a_script_overrides_loop_defaults_and_only_loop_ones():
    assert loop_parser(learning_rate=2e-5).parse_args(["--output-dir", "x"]).learning_rate == 2e-5
    with pytest.raises(TypeError, match="not loop arguments: \\['max_length'\\]"):
        loop_parser(max_length=3)


def test_the_training_commands_keep_their_loop_defaults():
    def loop_defaults(args):
        return (args.per_device_train_batch_size, args.per_device_eval_batch_size, args.learning_rate, args.num_train_epochs,
                args.eval_steps, args.checkpointing_steps, args.seed)

    assert loop_defaults(train_union.parse_args(["--dataset", "roc", "--output-dir", "x"])) == (10, 32, 5e-5, 3, 500, 1000, 42)
    assert loop_defaults(generator.parse_args(["--output-dir", "x"])) == (8, 16, 5e-5, 3, 500, 1000, 42)
    # the paper's classifier settings; the evaluation batch is UNION's, as when the classifier had no option for it
    assert loop_defaults(train_plot_coherence.parse_args(["--output-dir", "x"])) == (8, 32, 2e-5, 3, 500, 1000, 42)


@pytest.mark.parametrize(
    "options, message",
    [
        (["--gradient-accumulation-steps", "0"], "must be positive: --gradient-accumulation-steps 0"),
        (["--time-budget-minutes", "-1"], "must be positive: --time-budget-minutes -1"),
        (["--stop-after-steps", "0"], "must be positive: --stop-after-steps 0"),
        (["--weight-decay", "-1"], "must not be negative: --weight-decay -1"),
        # a state without its trainer_state.json (or still under its temporary name) is not one to resume
        (["--resume-from-checkpoint", "{tmp}/old/step_2"], "expected a step_N folder"),
        (["--resume-from-checkpoint", "{tmp}/old/step_3.partial"], "expected a step_N folder"),
    ],
)
def test_a_bad_loop_option_is_refused_before_anything_is_written(options, message, tmp_path, capsys):
    write_state(tmp_path / "old" / "step_2", complete=False)
    write_state(tmp_path / "old" / "step_3.partial")
    parser = loop_parser()
    args = parser.parse_args(["--output-dir", str(tmp_path / "run")] + [o.format(tmp=tmp_path) for o in options])
    with pytest.raises(SystemExit):
        loop.check_loop_arguments(parser, args)
    assert message in capsys.readouterr().err and not (tmp_path / "run").exists()
    # the plot classifier has the loop's options now, checked before its pairs are written
    with pytest.raises(SystemExit):
        train_plot_coherence.train(["--output-dir", str(tmp_path / "pc")] + [o.format(tmp=tmp_path) for o in options])
    assert not (tmp_path / "pc").exists()


def test_latest_is_the_newest_complete_state_by_step_number(tmp_path):
    assert loop.latest_state(tmp_path) is None  # nothing to resume: a fresh start
    for name in ("step_9", "step_10"):
        write_state(tmp_path / name)
    write_state(tmp_path / "step_11", complete=False)
    write_state(tmp_path / "step_12.partial")
    assert loop.latest_state(tmp_path) == str(tmp_path / "step_10")
    parser = loop_parser()
    args = parser.parse_args(["--output-dir", str(tmp_path), "--resume-from-checkpoint", "latest"])
    loop.check_loop_arguments(parser, args)
    assert args.resume_from_checkpoint == str(tmp_path / "step_10")


def test_union_arguments_from_values_are_checked_as_the_command_line_is(tmp_path):
    loop_args = loop.LoopArguments(output_dir=str(tmp_path / "run"), eval_steps=3)
    args = train_union.arguments(loop_args, pairs_dir=str(tmp_path), recon_weight=0.0)
    expected = train_union.parse_args(["--pairs-dir", str(tmp_path), "--output-dir", str(tmp_path / "run"), "--eval-steps", "3",
                                       "--recon-weight", "0"])
    assert vars(args) == vars(expected)
    with pytest.raises(TypeError, match="not train_union options"):
        train_union.arguments(loop_args, pairs_dir=str(tmp_path), recon_wieght=0.0)
    with pytest.raises(SystemExit):  # a usage error, as on the command line
        train_union.arguments(dataclasses.replace(loop_args, eval_steps=0), pairs_dir=str(tmp_path))
    assert not (tmp_path / "run").exists()


def test_keep_last_states_deletes_all_but_the_newest_complete_ones(tmp_path):
    for name in ("step_2", "step_10", "step_4"):
        write_state(tmp_path / name)
    write_state(tmp_path / "step_12.partial")  # a save under way is not a state to count or delete
    write_state(tmp_path / "step_11", complete=False)
    deleted = loop.prune_states(tmp_path, keep_last=2)
    assert deleted == [tmp_path / "step_2"]
    assert sorted(folder.name for folder in tmp_path.iterdir()) == ["step_10", "step_11", "step_12.partial", "step_4"]
    assert loop.latest_state(tmp_path) == str(tmp_path / "step_10")
    assert loop.prune_states(tmp_path, keep_last=5) == []


def test_keep_last_states_must_be_positive(tmp_path, capsys):
    parser = loop_parser()
    args = parser.parse_args(["--output-dir", str(tmp_path / "run"), "--keep-last-states", "0"])
    with pytest.raises(SystemExit):
        loop.check_loop_arguments(parser, args)
    assert "must be positive: --keep-last-states 0" in capsys.readouterr().err
