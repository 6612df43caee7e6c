"""Correlation of UNION scores with the UNION paper's human judgments.

    python benchmarks/union_correlation.py                      # bundled union-roc and union-wp
    python benchmarks/union_correlation.py --checkpoint ours=outputs/union-roc/best --update-card

First it recomputes the paper's Table 5 UNION row from the paper's own scores
(``paper_metric_outputs/union.txt``), which checks this harness; then it scores
the same stories with each checkpoint. Results go to
``benchmarks/results/union_correlation.json``. These human sets are test sets:
nothing here may be used to choose a checkpoint or a hyperparameter.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CHECKOUT, checkpoint_spec, correlations, data_dir, machine, read_union_human, write_results  # noqa: E402

# Table 5 of Guan & Huang (2020), UNION row: (Pearson, Spearman, Kendall)
PAPER_TABLE5 = {"roc": (0.3687, 0.4599, 0.3386), "wp": (0.3663, 0.4493, 0.3293)}


def reproduce_paper(set_name: str) -> dict:
    _, human = read_union_human(set_name)
    path = data_dir() / "human" / f"union_{set_name}" / "paper_metric_outputs" / "union.txt"
    paper_scores = np.array([float(x) for x in path.read_text().split()])
    result = correlations(paper_scores, human)
    expected = PAPER_TABLE5[set_name]
    got = (result["pearson"], result["spearman"], result["kendall"])
    if not np.allclose(got, expected, atol=5e-5):
        raise SystemExit(f"harness check failed on {set_name}: got {got}, the paper reports {expected}")
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", default=[], type=checkpoint_spec,
                        help="label=path (repeatable); default: bundled union-roc/-wp")
    parser.add_argument("--sets", nargs="+", default=["roc", "wp"], choices=["roc", "wp"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", default="union_correlation", help="name of the results file")
    parser.add_argument("--update-card", action="store_true", help="write evaluation.json + model card into each checkpoint folder")
    args = parser.parse_args(argv)

    from storyeval.scoring import load_union_scorer

    checkpoints = dict(args.checkpoint) or {
        "union-roc": str(CHECKOUT / "hub_cards" / "union-roc"),
        "union-wp": str(CHECKOUT / "hub_cards" / "union-wp"),
    }
    for label, path in checkpoints.items():  # a mistyped path fails here, before any scoring or results file
        if not (Path(path) / "config.json").is_file():
            parser.error(f"--checkpoint {label}={path}: no checkpoint there (config.json)")
    payload = {"machine": machine(), "command": "python benchmarks/union_correlation.py " + " ".join(argv or sys.argv[1:]), "paper": {}, "checkpoints": {}}
    for set_name in args.sets:
        payload["paper"][set_name] = reproduce_paper(set_name)
        print(f"paper UNION on {set_name}: " + _row(payload["paper"][set_name]))
    for label, path in checkpoints.items():
        scorer = load_union_scorer(path)
        payload["checkpoints"][label] = {"path": str(path), "sets": {}}
        for set_name in args.sets:
            stories, human = read_union_human(set_name)
            started = time.perf_counter()
            scores = scorer.score(stories, batch_size=args.batch_size)
            result = correlations(scores, human)
            result["seconds"] = round(time.perf_counter() - started, 2)
            payload["checkpoints"][label]["sets"][set_name] = result
            print(f"{label} on {set_name}: " + _row(result))
        if args.update_card:
            _update_card(Path(path), payload["checkpoints"][label]["sets"], payload["command"])
    print("wrote", write_results(args.output, payload))


def _row(r: dict) -> str:
    return " / ".join(f"{name} {r[name]:.4f} (p={r[name + '_p']:.1e})" for name in ("pearson", "spearman", "kendall"))


def _update_card(folder: Path, sets: dict, command: str) -> None:
    from storyeval_training.model_card import write_union_card

    (folder / "evaluation.json").write_text(json.dumps({"command": command, "correlations": sets}, indent=2) + "\n")
    results_path = folder / "training_results.json"
    if results_path.is_file():
        write_union_card(folder, json.loads(results_path.read_text()))


if __name__ == "__main__":
    main()
