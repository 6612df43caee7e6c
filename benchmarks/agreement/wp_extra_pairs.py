"""How a checkpoint ranks human WritingPrompts stories against machine ones for the same prompt, per generator.

    python -m benchmarks.agreement.wp_extra_pairs --pairs-dir <wp_machine_pairs output>/pairs --split test \\
        --checkpoint union-wp-base=hub_cards/union-wp-base --confounds

Pairs come from ``python -m storyeval_training.data.wp_machine_pairs`` (``wp_extra/``): a human story and a
machine story written for the same prompt or continuing the same opening, both cut to the shorter one's
length. Pair accuracy is the share where the human story scores higher (a tie counts half), per
generator, over the weak generators (the open LMs that continue a human opening: the negatives of
``plot-coherence-wp``, and the held-out one) and over the strong ones. Human against machine is a label of
origin, not of quality: a strong generator's story may deserve the higher score, so that column is a
description, not a target.

``--confounds`` adds the checks that a checkpoint does not rank by surface: the same accuracy for a
length-only rule ("the longer story is human") on the same pairs; the Spearman correlation of the
checkpoint's score with story length over the WP builder's test stories (``extra`` config); and its mean
score per source of those human stories.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict

from ..common import add_checkpoint_options, checked_checkpoints, command_line, machine, results_name, write_results

WEAK = ("gpt2-xl", "opt-2.7b", "gpt-neo-2.7b", "gpt-j-6b", "gpt-neox-20b")


def outcome(human: float, machine_score: float) -> float:
    return 1.0 if human > machine_score else 0.5 if human == machine_score else 0.0


def accuracies(humans, machines, generators) -> dict:
    """Accuracy with counts: per generator, over the weak generators, over the others, and over all."""
    groups: dict[str, list[float]] = defaultdict(list)
    for human, machine_score, generator in zip(humans, machines, generators):
        value = outcome(human, machine_score)
        for key in (generator, "weak" if generator in WEAK else "strong", "all"):
            groups[key].append(value)
    return {key: {"accuracy": round(sum(v) / len(v), 4), "pairs": len(v)} for key, v in sorted(groups.items())}


def test_stories_by_source(cache_dir: str | None) -> tuple[list[str], list[str]]:
    """The WP builder's test stories (``extra`` config) and each one's source (``wp_valid`` for the plot-guided release)."""
    from storyeval_training.data.builders import WritingPrompts, load_split
    from storyeval_training.data.builders.wp_extra import HUMAN_FILE, default_extra_dir

    sources = {}
    with (default_extra_dir() / HUMAN_FILE).open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            sources[row["id"]] = row["source"]
    test = load_split(WritingPrompts, "test", cache_dir=cache_dir, config_name="extra")
    return list(test["story"]), [sources.get(story_id, "wp_valid") for story_id in test["id"]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs-dir", required=True, help="wp_machine_pairs' pairs/ folder")
    parser.add_argument("--split", default="test", choices=["validation", "test"])
    parser.add_argument("--confounds", action="store_true", help="add the length and source checks")
    add_checkpoint_options(parser, batch_size=16)
    parser.add_argument("--cache-dir", default=None, help="`datasets` cache for the builder (with --confounds)")
    parser.add_argument("--output", type=results_name, default="wp_extra_pairs")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args)

    import datasets
    from scipy import stats

    from storyeval.scoring.sequence import load_story_classifier

    pairs = datasets.load_from_disk(args.pairs_dir)[args.split]
    generators = [techniques[0] for techniques in pairs["techniques"]]
    payload = {"machine": machine(), "command": command_line(__name__, argv), "split": args.split, "pairs": len(pairs),
               "checkpoints": {}}
    lengths = [(len(h.split()), len(m.split())) for h, m in zip(pairs["human"], pairs["negative"])]
    payload["length_rule"] = accuracies([h for h, _ in lengths], [m for _, m in lengths], generators)
    if args.confounds:
        stories, sources = test_stories_by_source(args.cache_dir)
    for label, folder in checkpoints.items():
        scorer = load_story_classifier(folder, device="cpu")
        humans = scorer.score(list(pairs["human"]), batch_size=args.batch_size, progress_bar=True)
        machines = scorer.score(list(pairs["negative"]), batch_size=args.batch_size, progress_bar=True)
        result = {"path": folder, "settings": scorer.settings(), "accuracy": accuracies(humans, machines, generators)}
        if args.confounds:
            scores = scorer.score(stories, batch_size=args.batch_size, progress_bar=True)
            rho = stats.spearmanr(scores, [len(s.split()) for s in stories])
            per_source = defaultdict(list)
            for score, source in zip(scores, sources):
                per_source[source].append(score)
            result["length_spearman"] = {"rho": round(float(rho.statistic), 4), "p": float(rho.pvalue), "stories": len(stories)}
            result["mean_score_by_source"] = {s: {"mean": round(sum(v) / len(v), 4), "stories": len(v)} for s, v in sorted(per_source.items())}
        payload["checkpoints"][label] = result
        acc = result["accuracy"]
        print(f"{label}: weak {acc['weak']['accuracy']:.3f} ({acc['weak']['pairs']}), strong {acc.get('strong', {}).get('accuracy', float('nan')):.3f}, "
              + ", ".join(f"{g} {acc[g]['accuracy']:.2f}" for g in WEAK if g in acc)
              + (f"; length rho {result['length_spearman']['rho']:.3f}" if args.confounds else ""))
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
