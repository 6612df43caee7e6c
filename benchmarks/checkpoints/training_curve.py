"""A run's cost curve: its selection signal against training steps and minutes, read from a saved state.

    python -m benchmarks.checkpoints.training_curve --state <run>/step_200 --output wp_v2/plot_coherence_wp_base_curve

Every evaluation a run made is in its states' ``trainer_state.json`` (``storyeval_training.loop``), and in the
``all_results.json`` it writes when it ends, with the step and the training minutes it was made at. This writes them
as results file ``<output>`` (``benchmarks.common.results_path``) and prints one line per evaluation, with the
best-so-far value of ``--metric``: what more CPU time bought. Nothing is scored, so it never touches a human-judged set.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import command_line, results_name, write_results
from storyeval_training.loop import RUN_RESULTS, TRAINER_STATE


def curve(history: list[dict], metric: str) -> list[dict]:
    """Per evaluation: step, minutes, the metric and its best value so far."""
    rows, best = [], None
    for entry in history:
        if metric not in entry:
            continue
        best = entry[metric] if best is None else max(best, entry[metric])
        rows.append({"step": entry["step"], "minutes": round(entry.get("minutes", float("nan")), 1), metric: entry[metric],
                     "best_so_far": best})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", required=True, type=Path, help="a step_N folder of the run (or its output folder once ended)")
    parser.add_argument("--metric", default=None,
                        help="the evaluation key to follow (default: selection_pair_accuracy where the run had selection pairs, "
                             "else pair_accuracy)")
    parser.add_argument("--output", type=results_name, required=True, help="name of the results file")
    args = parser.parse_args(argv)
    # a saved state, or an ended run's folder (which keeps no state for a last step off the checkpointing grid)
    path = next((args.state / name for name in (TRAINER_STATE, RUN_RESULTS) if (args.state / name).is_file()), None)
    if path is None:
        parser.error(f"{args.state} holds neither {TRAINER_STATE} nor {RUN_RESULTS} (give a step_N folder the run saved, "
                     "or the folder of a run that ended)")
    history = json.loads(path.read_text(encoding="utf-8")).get("history", [])
    if not history:
        parser.error(f"{path} holds no evaluation")
    metric = args.metric or ("selection_pair_accuracy" if "selection_pair_accuracy" in history[-1] else "pair_accuracy")
    rows = curve(history, metric)
    if not rows:
        parser.error(f"no evaluation in {path} has {metric!r}; it has {sorted(history[-1])}")
    for row in rows:
        print(f"step {row['step']:>6}  {row['minutes']:>7.1f} min  {metric} {row[metric]:.3f}  best so far {row['best_so_far']:.3f}")
    payload = {"command": command_line(__name__, argv), "state": str(args.state), "metric": metric, "curve": rows}
    print("wrote", write_results(args.output, payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
