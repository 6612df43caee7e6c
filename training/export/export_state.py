"""Export the best checkpoint saved with a resumable state of a UNION or plot-coherence run, while it goes on or after it stopped.

    python -m storyeval_training.export.export_state --state outputs/union-roc-base/step_4000 \
        --export-dir hub_cards/union-roc-base --base-model sentence-transformers/all-mpnet-base-v2 \
        -- --dataset roc --output-dir outputs/union-roc-base ...   # the run's own arguments

A long run on a CPU spans sittings; its ``step_N`` states hold the best weights so far
(``best/``) and the evaluation history (``trainer_state.json``). This writes the same
export and model card that the run writes when it ends, with the history up to that
state, and records which state it came from. The run's arguments after ``--`` are
parsed by its own script's parser (``storyeval-train-union`` or ``storyeval-train-plot-coherence``,
by the metric the checkpoint records), so the card describes the run.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from storyeval_training.export.model_card import CHECKPOINT_CARD_WRITERS
from storyeval_training.export.provenance import environment
from storyeval_training.loop import RUN_RESULTS, TRAINER_STATE
from storyeval_training.recipes import train_plot_coherence, train_union


def parse_args(argv=None) -> tuple[argparse.Namespace, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # every default is stated in its help
    p.add_argument("--state", required=True, help="a step_N folder the run saved, or the run's output folder once it has ended")
    p.add_argument("--export-dir", required=True, help="where the checkpoint and its card go (must not exist yet)")
    p.add_argument("--base-model", default=None,
                   help="the backbone a top-layer checkpoint sits on, by a name storyeval.checkpoints.backbones "
                        "resolves (default: the run's --base-model-name or --model-name-or-path)")
    p.add_argument("--code-commit", default=None, help="the commit the run's code was at, recorded in the card's results (default: unknown)")
    p.add_argument("run_args", nargs=argparse.REMAINDER, help="-- followed by the run's own arguments "
                                                              "(storyeval-train-union or storyeval-train-plot-coherence)")
    args = p.parse_args(argv)
    state = Path(args.state)
    if not ((state / TRAINER_STATE).is_file() or (state / RUN_RESULTS).is_file()) or not (state / "best" / "config.json").is_file():
        p.error(f"--state {state}: expected a step_N folder with {TRAINER_STATE} and best/ (written by --checkpointing-steps), "
                f"or the output folder of a run that ended, with {RUN_RESULTS} and best/")
    if Path(args.export_dir).exists():
        p.error(f"--export-dir {args.export_dir} exists; choose a new folder")
    run_args = args.run_args[1:] if args.run_args[:1] == ["--"] else args.run_args
    if not run_args:
        p.error("give the run's own arguments after --, so the card describes the run")
    # the run's parser, without the checks that look at the file system as it is now (the run has started)
    metric = json.loads((state / "best" / "config.json").read_text()).get("metric", "union")
    run = TRAINERS[metric].build_parser().parse_args(run_args)
    return args, run


# the script whose arguments a run was started with, by the metric its checkpoint records
TRAINERS = {"union": train_union, "plot_coherence": train_plot_coherence}


def export_state(state: Path, export_dir: Path, run: argparse.Namespace, base_model: str | None = None, code_commit: str | None = None) -> dict:
    metric = json.loads((state / "best" / "config.json").read_text()).get("metric", "union")
    if (state / TRAINER_STATE).is_file():
        trainer_state = json.loads((state / TRAINER_STATE).read_text())
        step = int(state.name.split("_")[-1])
        ended = _ended_run(run, trainer_state)
    else:  # an ended run's own folder: its best/ is the selection of the whole run, which its results record
        ended = json.loads((state / RUN_RESULTS).read_text())
        trainer_state = {"best": ended["best_validation"]}
        step = ended["completed_steps"]
    if ended is not None:  # the run finished after this state without a better evaluation: its whole history is known
        trainer_state = {**trainer_state, "history": ended["history"], "minutes": ended["training_minutes"]}
    results = {
        "best_validation": trainer_state["best"],
        # as the loop chose: held-out selection pairs where the run had them, else its validation pairs
        "selected_by": train_union.selection_key(run),
        "history": trainer_state["history"],
        "completed_steps": step if ended is None else ended["completed_steps"],
        "stopped_by_time_budget": False,
        "training_minutes": round(trainer_state["minutes"], 1),
        "exported_from_state": {"step": step, "run_code_commit": code_commit},
        "notes": [_export_note(step, run.max_train_steps, ended)],
        "args": vars(run),
        # this machine, but the run's code: the checkout exporting may have moved on since the run started
        "environment": {**environment(), "commit": code_commit or "unknown", "uncommitted_changes": []},
    }
    if metric == "plot_coherence":  # what the run logged and recorded only at its end: rebuilt from the same data and seed
        run.max_length = run.max_length or train_plot_coherence.DEFAULT_MAX_LENGTH[run.dataset]
        pairs, run.leakage_dropped_groups = train_plot_coherence.run_pairs(run)
        results["train_pairs"] = pairs["train"].num_rows
    train_union.export(state / "best", export_dir, results, write_card=CHECKPOINT_CARD_WRITERS[metric],
                       base_model=base_model or run.base_model_name or run.model_name_or_path)
    return results


def _export_note(step: int, max_train_steps: int | None, ended: dict | None) -> str:
    """Where in the run the exported state sits, for the card."""
    if max_train_steps and step >= max_train_steps:
        return f"Exported from the run's final state, step {step:,}; the selected step is the best evaluation of the whole run."
    if ended is not None and step == ended["completed_steps"]:
        return f"Exported from the run's output folder after it ended at step {step:,}; the selected step is the best evaluation of the whole run."
    if ended is not None:
        return (f"Exported from the run's last saved state, step {step:,}, after the run ended at step {ended['completed_steps']:,}; "
                "the selected step is the best evaluation of the whole run.")
    return (f"Exported from the run's resumable state at step {step:,} of {max_train_steps or 'an epoch-length schedule'}; "
            "the selected step is the best evaluation up to that state.")


def _ended_run(run: argparse.Namespace, trainer_state: dict) -> dict | None:
    """The run's own final results (``all_results.json``, written when it ends), if the run has ended and
    its selection is the state's; else None (the run goes on, or chose a later step)."""
    path = Path(run.output_dir) / RUN_RESULTS
    if not path.is_file():
        return None
    ended = json.loads(path.read_text())
    return ended if ended["best_validation"] == trainer_state["best"] else None


def main(argv=None) -> None:
    args, run = parse_args(argv)
    export_state(Path(args.state), Path(args.export_dir), run, args.base_model, args.code_commit)


if __name__ == "__main__":
    main()
