"""Correlation of plot-coherence scores with the plot paper's AMT plausibility ratings (ROC).

    python -m benchmarks.agreement.plot_coherence_correlation                            # the paper's row only
    python -m benchmarks.agreement.plot_coherence_correlation --checkpoint ours=outputs/plot-coherence-roc/best

300 ROC stories (150 human-written, 150 from GPT-2), each rated 0-5 by five
workers; the human score of a story is its mean rating. First the paper's
Table 5 RoBERTa row is recomputed from the paper's own scores
(``paper_pred_roberta_af_manplts.txt``, joined to the ratings on the
whitespace-normalised text), which checks this harness; then each checkpoint
scores the same stories. Results go to
``benchmarks/results/plot_coherence_correlation.json``. This is a test set:
nothing here may be used to choose a checkpoint or a hyperparameter.
"""
from __future__ import annotations

import argparse

from ..common import add_checkpoint_options, checked_checkpoints, command_line, machine, results_name, write_results
from ..correlation import format_row, load_human_set, read_amt_ratings, reproduce_paper, score_set, update_card

ORDER = ("spearman", "kendall", "pearson")  # the paper prints Spearman and Kendall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoint_options(parser, batch_size=32, required=False, help="label=folder or config name (repeatable)")
    parser.add_argument("--output", type=results_name, default="plot_coherence_correlation", help="name of the results file")
    parser.add_argument("--update-card", action="store_true", help="write evaluation.json + model card into each checkpoint folder")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args, folders=False)

    human_set = load_human_set("plot_amt_roc")
    ratings = read_amt_ratings()
    payload = {
        "machine": machine(),
        "command": command_line(__name__, argv),
        "human": {"stories": len(human_set.stories), "ratings_per_story": sorted({len(ratings[t]) for t in human_set.stories})},
        "paper": reproduce_paper(human_set),
        "checkpoints": {},
    }
    print("paper RoBERTa (manipulated plots, AF) on ROC: " + format_row(payload["paper"], ORDER, 3))

    if checkpoints:
        from storyeval.checkpoints.resolution import resolve_checkpoint
        from storyeval.scoring.sequence import load_plot_coherence_scorer

    for label, config in checkpoints.items():
        path = resolve_checkpoint("plot_coherence", config)
        result = score_set(load_plot_coherence_scorer(path), human_set, args.batch_size)
        payload["checkpoints"][label] = {"path": str(path), "roc": result}
        print(f"{label} on ROC: " + format_row(result, ORDER, 3))
        if args.update_card:
            update_card(path, "plot_coherence", result, payload["command"])
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
