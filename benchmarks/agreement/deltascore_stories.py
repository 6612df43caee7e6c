"""Agreement of story checkpoints with the DeltaScore ratings of whole generated stories (a test set).

    python -m benchmarks.agreement.deltascore_stories --corpus wp --checkpoint plot-coherence-wp=hub_cards/plot-coherence-wp

DeltaScore's crowd-sourced file for a corpus holds generated stories (``story``, continuing ``title``, the
prompt or opening) rated by people on fluency, coherence, relatedness, logicality and interestingness.
Each checkpoint scores the story as a reader sees it, ``title + " " + story``, and this reports Pearson,
Spearman and Kendall with every rated aspect, over every rated story: no story checkpoint (UNION or plot
coherence) trains on these files. Continuation quality does, so it is measured on their held-out side in
``benchmarks/agreement/continuation_quality.py`` instead.
"""
from __future__ import annotations

import argparse

from storyeval_training.data.continuation_data import read_deltascore_stories
from storyeval_training.paths import data_dir

from ..common import add_checkpoint_options, checked_checkpoints, command_line, correlations, machine, results_name, write_results


def rated_stories(corpus: str) -> tuple[list[str], dict[str, list[float]]]:
    return read_deltascore_stories(data_dir() / "continuation" / f"deltascore_crowdsource_{corpus}.jsonl")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="wp", choices=["roc", "wp"])
    add_checkpoint_options(parser, batch_size=16)
    parser.add_argument("--output", type=results_name, default=None, help="results file name (default: deltascore_stories_<corpus>)")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args)

    from storyeval.scoring.sequence import load_story_classifier

    stories, ratings = rated_stories(args.corpus)
    payload = {"machine": machine(), "command": command_line(__name__, argv), "corpus": args.corpus, "stories": len(stories),
               "checkpoints": {}}
    for label, folder in checkpoints.items():
        scorer = load_story_classifier(folder, device="cpu")
        scores = scorer.score(stories, batch_size=args.batch_size)
        rows = {aspect: correlations(scores, values) for aspect, values in ratings.items()}
        payload["checkpoints"][label] = {"path": folder, "settings": scorer.settings(), "correlations": rows}
        print(label + ": " + ", ".join(f"{a} S {r['spearman']:.3f} (p {r['spearman_p']:.2f})" for a, r in rows.items()))
    print("wrote", write_results(args.output or f"deltascore_stories_{args.corpus}", payload))


if __name__ == "__main__":
    main()
