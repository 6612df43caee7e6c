"""Export the best checkpoint saved with a resumable state of a UNION run, while the run goes on.

    python -m storyeval_training.export_state --state outputs/union-roc-base/step_4000 \
        --export-dir hub_cards/union-roc-base --base-model sentence-transformers/all-mpnet-base-v2 \
        -- --dataset roc --output-dir outputs/union-roc-base ...   # the run's own arguments

A long run on a CPU spans sittings; its ``step_N`` states hold the best weights so far
(``best/``) and the evaluation history (``trainer_state.json``). This writes the same
export and model card that the run writes when it ends, with the history up to that
state, and records which state it came from. The run's arguments after ``--`` are
parsed by ``storyeval-train-union``'s own parser, so the card describes the run.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from storyeval_training import train_union
from storyeval_training.loop import TRAINER_STATE
from storyeval_training.provenance import environment


def parse_args(argv=None) -> tuple[argparse.Namespace, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--state", required=True, help="a step_N folder the run saved")
    p.add_argument("--export-dir", required=True, help="where the checkpoint and its card go (must not exist yet)")
    p.add_argument("--base-model", default=None,
                   help="the backbone a top-layer checkpoint sits on, by a name storyeval.backbones resolves (default: the run's --base-model-name or --model-name-or-path)")
    p.add_argument("--code-commit", default=None, help="the commit the run's code was at, recorded in the card's results (default: unknown)")
    p.add_argument("run_args", nargs=argparse.REMAINDER, help="-- followed by the run's storyeval-train-union arguments")
    args = p.parse_args(argv)
    state = Path(args.state)
    if not (state / TRAINER_STATE).is_file() or not (state / "best" / "config.json").is_file():
        p.error(f"--state {state}: expected a step_N folder with {TRAINER_STATE} and best/ (written by --checkpointing-steps)")
    if Path(args.export_dir).exists():
        p.error(f"--export-dir {args.export_dir} exists; choose a new folder")
    run_args = args.run_args[1:] if args.run_args[:1] == ["--"] else args.run_args
    if not run_args:
        p.error("give the run's own arguments after --, so the card describes the run")
    # the run's parser, without the checks that look at the file system as it is now (the run has started)
    run = train_union.build_parser().parse_args(run_args)
    return args, run


def export_state(state: Path, export_dir: Path, run: argparse.Namespace, base_model: str | None = None, code_commit: str | None = None) -> dict:
    trainer_state = json.loads((state / TRAINER_STATE).read_text())
    step = int(state.name.split("_")[-1])
    results = {
        "best_validation": trainer_state["best"],
        "selected_by": "accuracy",
        "history": trainer_state["history"],
        "completed_steps": step,
        "stopped_by_time_budget": False,
        "training_minutes": round(trainer_state["minutes"], 1),
        "exported_from_state": {"step": step, "run_code_commit": code_commit},
        "notes": [f"Exported from the run's resumable state at step {step:,} of {run.max_train_steps or 'an epoch-length schedule'}, "
                  "while the run went on; the selected step is the best evaluation up to that state."],
        "args": vars(run),
        # this machine, but the run's code: the checkout exporting may have moved on since the run started
        "environment": {**environment(), "commit": code_commit or "unknown", "uncommitted_changes": []},
    }
    train_union.export(state / "best", export_dir, results, base_model=base_model or run.base_model_name or run.model_name_or_path)
    return results


def main(argv=None) -> None:
    args, run = parse_args(argv)
    export_state(Path(args.state), Path(args.export_dir), run, args.base_model, args.code_commit)


if __name__ == "__main__":
    main()
