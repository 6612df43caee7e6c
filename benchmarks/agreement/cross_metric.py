"""Each metric on the other metric's human set, so the two can be compared on the same data.

    python -m benchmarks.agreement.cross_metric
    python -m benchmarks.agreement.cross_metric --checkpoint union:union-roc=hub_cards/union-roc \
        --checkpoint plot_coherence:plot-coherence-roc=hub_cards/plot-coherence-roc
    python -m benchmarks.agreement.cross_metric --checkpoint plot_coherence:plot-coherence-wp=<folder> --output wp/plot_coherence_wp_correlation

Sets: UNION's ``union_roc`` (400 stories) and ``union_wp`` (200), scored as the
mean of 7 binary votes, and the plot paper's AMT ROC set (300 stories), scored as
the mean of 5 ratings (0-5). Results go to ``benchmarks/results/cross_metric.json`` (``--output``: another name).
These are test sets: nothing here may be used to choose a checkpoint.
"""
from __future__ import annotations

import argparse

from ..common import BUNDLED, command_line, machine, metric_checkpoint_spec, results_name, write_results
from ..correlation import HUMAN_SETS, format_row, load_human_set, score_set

DEFAULT_CHECKPOINTS = [
    ("union", "union-roc", str(BUNDLED / "union-roc")),
    ("plot_coherence", "plot-coherence-roc", str(BUNDLED / "plot-coherence-roc")),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", default=[], type=metric_checkpoint_spec,
                        help="metric:label=folder_or_config (repeatable)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sets", nargs="+", default=list(HUMAN_SETS), choices=HUMAN_SETS, help="human sets to score (default: all)")
    parser.add_argument("--output", type=results_name, default="cross_metric",
                        help="name of the results file (a new checkpoint's keeps the bundled rows' file)")
    args = parser.parse_args(argv)

    from storyeval.checkpoints.resolution import resolve_checkpoint
    from storyeval.scoring.sequence import load_scorer

    payload = {"machine": machine(), "command": command_line(__name__, argv), "checkpoints": {}}
    human_sets = [load_human_set(name) for name in args.sets]
    for metric, label, config in args.checkpoint or DEFAULT_CHECKPOINTS:
        path = resolve_checkpoint(metric, config)
        scorer = load_scorer(metric, path)
        entry = payload["checkpoints"][label] = {"metric": metric, "path": str(path), "sets": {}}
        for human_set in human_sets:
            entry["sets"][human_set.name] = score_set(scorer, human_set, args.batch_size)
            print(f"{label} on {human_set.name}: " + format_row(entry["sets"][human_set.name], decimals=3, p_values=False))
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
