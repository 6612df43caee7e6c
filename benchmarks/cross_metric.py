"""Each metric on the other metric's human set, so the two can be compared on the same data.

    python benchmarks/cross_metric.py
    python benchmarks/cross_metric.py --checkpoint union:union-roc=hub_cards/union-roc \
        --checkpoint plot_coherence:plot-coherence-roc=hub_cards/plot-coherence-roc

Sets: UNION's ``union_roc`` (400 stories) and ``union_wp`` (200), scored as the
mean of 7 binary votes, and the plot paper's AMT ROC set (300 stories), scored as
the mean of 5 ratings (0-5). Results go to ``benchmarks/results/cross_metric.json``.
These are test sets: nothing here may be used to choose a checkpoint.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CHECKOUT, correlations, machine, metric_checkpoint_spec, read_amt_ratings, read_union_human, write_results  # noqa: E402

DEFAULT_CHECKPOINTS = [
    ("union", "union-roc", str(CHECKOUT / "hub_cards" / "union-roc")),
    ("plot_coherence", "plot-coherence-roc", str(CHECKOUT / "hub_cards" / "plot-coherence-roc")),
]


def human_sets() -> dict[str, tuple[list[str], np.ndarray]]:
    sets = {f"union_{name}": read_union_human(name) for name in ("roc", "wp")}
    ratings = read_amt_ratings()
    texts = sorted(ratings)
    sets["plot_amt_roc"] = (texts, np.array([np.mean(ratings[t]) for t in texts]))
    return sets


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", default=[], type=metric_checkpoint_spec,
                        help="metric:label=folder_or_config (repeatable)")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)

    from storyeval.checkpoints import resolve_checkpoint
    from storyeval.scoring import load_scorer

    payload = {"machine": machine(), "command": "python benchmarks/cross_metric.py " + " ".join(argv or sys.argv[1:]), "checkpoints": {}}
    sets = human_sets()
    for metric, label, config in args.checkpoint or DEFAULT_CHECKPOINTS:
        path = resolve_checkpoint(metric, config)
        scorer = load_scorer(metric, path)
        entry = payload["checkpoints"][label] = {"metric": metric, "path": str(path), "sets": {}}
        for set_name, (stories, human) in sets.items():
            started = time.perf_counter()
            result = correlations(scorer.score(stories, batch_size=args.batch_size), human)
            result["seconds"] = round(time.perf_counter() - started, 2)
            entry["sets"][set_name] = result
            print(f"{label} on {set_name}: " + " / ".join(f"{k} {result[k]:.3f}" for k in ("pearson", "spearman", "kendall")))
    print("wrote", write_results("cross_metric", payload))


if __name__ == "__main__":
    main()
