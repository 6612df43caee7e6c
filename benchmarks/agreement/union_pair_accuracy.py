"""How often a checkpoint scores a human story above its perturbed copy, per perturbation.

    python -m benchmarks.agreement.union_pair_accuracy --checkpoint union-roc=hub_cards/union-roc
    python -m benchmarks.agreement.union_pair_accuracy --pairs-dir runs/pairs-roc-42 --checkpoint a=... --checkpoint b=...

The pairs are UNION negatives built by ``storyeval-build-negatives`` from the
builder's test split: auto-constructed, held out from training and checkpoint
selection, and not human-judged. Accuracy is the share of pairs where the human
story scores higher (a tie counts half), overall, for the pairs whose negative
used a given technique (alone or with others), for the pairs that used it alone,
and by the number of techniques. It shows which perturbations a checkpoint
detects; it says nothing about agreement with people (see union_correlation.py).

Any folder of (human, negative) pairs in that format works with ``--pairs-dir``,
for instance the released AF_ManPlts pairs that ``storyeval-train-plot-coherence
--negatives paper`` saves under ``<output-dir>/pairs`` (``--split validation``).
"""
from __future__ import annotations

import argparse
from collections import defaultdict

from ..common import BUNDLED, add_checkpoint_options, checked_checkpoints, command_line, machine, results_name, write_results


def pair_accuracy(human_scores, negative_scores, techniques) -> dict:
    """Accuracy overall, per technique (any / alone) and per number of techniques, with counts."""
    if not len(human_scores) == len(negative_scores) == len(techniques):
        raise ValueError("need one human score, one negative score and one technique list per pair")
    if not techniques:
        raise ValueError("no pairs to score")
    groups: dict[str, list[float]] = defaultdict(list)
    for human, negative, used in zip(human_scores, negative_scores, techniques):
        outcome = 1.0 if human > negative else 0.5 if human == negative else 0.0
        keys = ["all", f"{len(used)}_techniques", *(f"{t}_any" for t in used)]
        if len(used) == 1:
            keys.append(f"{used[0]}_alone")
        for key in keys:
            groups[key].append(outcome)
    return {key: {"accuracy": sum(v) / len(v), "pairs": len(v)} for key, v in sorted(groups.items())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs-dir", help="a storyeval-build-negatives output (default: build ROC pairs, seed 42)")
    parser.add_argument("--split", default="test", choices=["validation", "test"])
    add_checkpoint_options(parser, batch_size=32, required=False, help="label=path (repeatable); default: bundled union-roc")
    parser.add_argument("--output", type=results_name, default="union_pair_accuracy", help="name of the results file")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args, default={"union-roc": str(BUNDLED / "union-roc")})

    import datasets

    from storyeval.scoring.sequence import load_union_scorer

    if args.pairs_dir:
        pairs = datasets.load_from_disk(args.pairs_dir)[args.split]
    else:
        from storyeval_training.data import build_negatives

        pairs = build_negatives.build("roc", (args.split,), seed=42)[args.split]
    payload = {"machine": machine(), "command": command_line(__name__, argv),
               "split": args.split, "pairs": len(pairs), "checkpoints": {}}
    for label, path in checkpoints.items():
        scorer = load_union_scorer(path)
        humans = scorer.score(pairs["human"], batch_size=args.batch_size, progress_bar=True)
        negatives = scorer.score(pairs["negative"], batch_size=args.batch_size, progress_bar=True)
        result = pair_accuracy(humans, negatives, pairs["techniques"])
        payload["checkpoints"][label] = {"path": path, **result}
        print(label + ": " + ", ".join(f"{key} {value['accuracy']:.3f} ({value['pairs']})" for key, value in result.items()))
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
