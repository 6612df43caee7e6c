"""Correlation of UNION scores with the UNION paper's human judgments.

    python -m benchmarks.agreement.union_correlation                      # bundled union-roc and union-wp
    python -m benchmarks.agreement.union_correlation --checkpoint ours=outputs/union-roc/best --update-card

First it recomputes the paper's Table 5 UNION row from the paper's own scores
(``paper_metric_outputs/union.txt``), which checks this harness; then it scores
the same stories with each checkpoint. Results go to
``benchmarks/results/union_correlation.json``. These human sets are test sets:
nothing here may be used to choose a checkpoint or a hyperparameter.
"""
from __future__ import annotations

import argparse

from ..common import BUNDLED, add_checkpoint_options, checked_checkpoints, command_line, machine, results_name, write_results
from ..correlation import format_row, load_human_set, reproduce_paper, score_set, update_card


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=["roc", "wp"], choices=["roc", "wp"])
    add_checkpoint_options(parser, batch_size=32, required=False, help="label=path (repeatable); default: bundled union-roc/-wp")
    parser.add_argument("--output", type=results_name, default="union_correlation", help="name of the results file")
    parser.add_argument("--update-card", action="store_true", help="write evaluation.json + model card into each checkpoint folder")
    args = parser.parse_args(argv)

    checkpoints = checked_checkpoints(parser, args, default={"union-roc": str(BUNDLED / "union-roc"), "union-wp": str(BUNDLED / "union-wp")})

    from storyeval.scoring.sequence import load_union_scorer

    payload = {"machine": machine(), "command": command_line(__name__, argv), "paper": {}, "checkpoints": {}}
    human_sets = {set_name: load_human_set(f"union_{set_name}") for set_name in args.sets}
    for set_name, human_set in human_sets.items():
        payload["paper"][set_name] = reproduce_paper(human_set)
        print(f"paper UNION on {set_name}: " + format_row(payload["paper"][set_name]))
    for label, path in checkpoints.items():
        scorer = load_union_scorer(path)
        sets = {}
        payload["checkpoints"][label] = {"path": str(path), "sets": sets}
        for set_name, human_set in human_sets.items():
            sets[set_name] = score_set(scorer, human_set, args.batch_size)
            print(f"{label} on {set_name}: " + format_row(sets[set_name]))
        if args.update_card:
            update_card(path, "union", sets, payload["command"])
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
