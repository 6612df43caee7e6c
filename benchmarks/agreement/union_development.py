"""Agreement of UNION checkpoints with a small human-judged development set, to choose between them.

    python -m benchmarks.agreement.union_development --checkpoint a=runs/a/best --checkpoint b=hub_cards/union-roc

The development set is the part of the DeltaScore crowd ratings
(``../shared/data/continuation/``) that the continuation metric does not hold
out: the train and validation sides of its fixed grouped split (split seed 42).
That is 84 ROC and 72 WP generated continuations, each scored as its context
(the first sentence or the prompt) followed by the continuation; the human
score is "overall", the mean of the fluency, coherence and logicality ratings
(the continuation metric's mapping). The 44 test-side pairs are never read.

Unlike the sets in union_correlation.py, which are test sets, this one may
choose a checkpoint: per set, the one with the highest Spearman coefficient is
reported as ``selected``. Each generating model's mean score, mean rating and
mean length are recorded too. With 84 or 72 stories a coefficient's standard error
is about 0.11-0.12, so close candidates are not told apart.
"""
from __future__ import annotations

import argparse

import numpy as np

from storyeval_training.paths import data_dir

from ..common import add_checkpoint_options, checked_checkpoints, command_line, correlations, machine, results_name, write_results

SETS = ("roc", "wp")
DEVELOPMENT_SIDES = ("train", "validation")


def development_stories(set_name: str) -> tuple[list[str], list[float], list[str]]:
    """(context + continuation, overall rating, generating model) for one set's non-held-out DeltaScore pairs."""
    import datasets

    from storyeval_training.data import continuation_data

    root = data_dir() / "continuation"
    # the split is drawn over both files together, as training and the held-out benchmark draw it
    rated = datasets.concatenate_datasets([continuation_data.read_deltascore(root / f"deltascore_crowdsource_{name}.jsonl") for name in SETS])
    splits = continuation_data.grouped_split(rated, seed=continuation_data.HELDOUT_SPLIT_SEED)
    development = datasets.concatenate_datasets([splits[side] for side in DEVELOPMENT_SIDES])
    development = development.filter(lambda row: row["source"].startswith(f"deltascore_crowdsource_{set_name}:"))
    stories = [f"{context} {continuation}" for context, continuation in zip(development["context"], development["continuation"])]
    models = [source.split(":", 1)[1] for source in development["source"]]
    return stories, development["overall"], models


def by_model(scores, human, models, stories) -> dict:
    """Mean metric score, mean human rating and mean length in words of each generating model's stories."""
    return {
        model: {"stories": len(rows), "mean_score": float(np.mean([scores[i] for i in rows])), "mean_overall": float(np.mean([human[i] for i in rows])),
                "mean_words": float(np.mean([len(stories[i].split()) for i in rows]))}
        for model in sorted(set(models))
        for rows in [[i for i, m in enumerate(models) if m == model]]
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    add_checkpoint_options(parser, batch_size=32, help="label=path (repeatable)")
    parser.add_argument("--output", type=results_name, default="union_development", help="name of the results file")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args)

    from storyeval.scoring.sequence import load_union_scorer

    development = {set_name: development_stories(set_name) for set_name in args.sets}
    payload = {"machine": machine(), "command": command_line(__name__, argv),
               "stories": {name: len(stories) for name, (stories, _, _) in development.items()}, "checkpoints": {}, "selected": {}}
    for label, path in checkpoints.items():
        scorer = load_union_scorer(path)
        payload["checkpoints"][label] = {"path": str(path), "sets": {}}
        for set_name, (stories, human, models) in development.items():
            scores = scorer.score(stories, batch_size=args.batch_size)
            result = correlations(scores, human)
            result["by_model"] = by_model(scores, human, models, stories)
            payload["checkpoints"][label]["sets"][set_name] = result
            print(f"{label} on {set_name} development: Pearson {result['pearson']:.4f} / Spearman {result['spearman']:.4f} "
                  f"(p={result['spearman_p']:.1e}) / Kendall {result['kendall']:.4f}")
    for set_name in args.sets:
        best = max(checkpoints, key=lambda label: payload["checkpoints"][label]["sets"][set_name]["spearman"])
        payload["selected"][set_name] = best
        print(f"selected on {set_name} (highest development Spearman): {best}")
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
