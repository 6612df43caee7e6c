"""Why a ROC-trained checkpoint drifts on WritingPrompts: its cheap suspects, on the selection signal.

    python -m benchmarks.agreement.wp_drift --perturbed-pairs <WP test pairs, seed 42> --machine-pairs <wp_machine_pairs>/pairs

Each suspect is a change to how the checkpoint reads a WP story, scored by pair accuracy (the human story
above its negative, a tie counting half) on auto-constructed and model-written pairs, never on people's
judgments:

* the scoring window (128, 256 or 512 tokens, stride half of it) and how window scores combine (mean, min);
* the text's form: WP's release is tokenised ("they 'd", " ,"), which no ROC story is; the suspect is
  scored detokenised too (NLTK's Treebank detokeniser, the inverse of the tokeniser the builders use);
* length: a ROC checkpoint trained on five-sentence stories scores 200-word ones; the suspect is scored on
  each story's first 60 and 100 words too (both sides of a pair cut alike).

Pairs: UNION's perturbations of the WP builder's test stories (``storyeval-build-negatives --dataset wp
--splits test --seed 42``) and the weak generators' stories paired with held-out human stories
(``python -m storyeval_training.data.wp_machine_pairs``, validation split).
"""
from __future__ import annotations

import argparse
import random

from ..common import checkpoint_spec, command_line, machine, results_name, write_results
from .wp_extra_pairs import outcome

WINDOWS = (128, 256, 512)
WEAK_GENERATORS = ("gpt2-xl", "opt-2.7b", "gpt-neo-2.7b", "gpt-j-6b", "gpt-neox-20b")


def detokenise(story: str) -> str:
    """A tokenised story as running text: "he did n't go ." -> "he didn't go."."""
    from nltk.tokenize.treebank import TreebankWordDetokenizer

    return TreebankWordDetokenizer().detokenize(story.split())


def first_words(story: str, words: int) -> str:
    return " ".join(story.split()[:words])


def pair_sets(perturbed_dir: str, machine_dir: str, per_generator: int, seed: int) -> dict[str, tuple[list[str], list[str]]]:
    """(humans, negatives) of each pair set."""
    import datasets

    perturbed = datasets.load_from_disk(perturbed_dir)["test"]
    machine_pairs = datasets.load_from_disk(machine_dir)["validation"]
    rng = random.Random(seed)
    weak = []
    for generator in WEAK_GENERATORS:
        rows = [row for row in machine_pairs if row["techniques"] == [generator]]
        weak += rng.sample(rows, min(per_generator, len(rows)))
    return {"perturbed_wp_test": (list(perturbed["human"]), list(perturbed["negative"])),
            "weak_generators_validation": ([r["human"] for r in weak], [r["negative"] for r in weak])}


def accuracy(humans: list[float], negatives: list[float]) -> float:
    return sum(map(outcome, humans, negatives)) / len(humans)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=checkpoint_spec, default=("union-roc-base", "hub_cards/union-roc-base"),
                        help="label=folder (default: the bundled union-roc-base)")
    parser.add_argument("--perturbed-pairs", required=True, help="storyeval-build-negatives output for WP test stories")
    parser.add_argument("--machine-pairs", required=True, help="wp_machine_pairs' pairs/ folder")
    parser.add_argument("--per-generator", type=int, default=30, help="machine pairs drawn per weak generator")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--output", type=results_name, default="wp_drift")
    args = parser.parse_args(argv)
    if args.per_generator < 1 or args.batch_size < 1:
        parser.error("--per-generator and --batch-size must be positive")

    from storyeval.scoring.sequence import WINDOW_AGGREGATIONS, SequenceScorer, load_story_classifier

    label, folder = args.checkpoint
    scorer = load_story_classifier(folder, device="cpu")
    sets = pair_sets(args.perturbed_pairs, args.machine_pairs, args.per_generator, args.seed)
    payload = {"machine": machine(), "command": command_line(__name__, argv), "checkpoint": {label: folder},
               "own_settings": {"window": scorer.max_length, "stride": scorer.window_stride, "aggregation": scorer.window_aggregation},
               "pairs": {name: len(humans) for name, (humans, _) in sets.items()}, "accuracy": {}}

    def record(name: str, set_name: str, value: float) -> None:
        payload["accuracy"].setdefault(name, {})[set_name] = round(value, 4)
        print(f"{name:>28} {set_name}: {value:.3f}")

    for set_name, (humans, negatives) in sets.items():
        for window in WINDOWS:
            if window > scorer.max_length:
                continue
            probe = SequenceScorer(scorer.model, scorer.tokenizer, window, window // 2, scorer.device, scorer.preprocess,
                                   scorer.delexicalize, name=scorer.name)
            human_windows = probe.window_scores(humans, batch_size=args.batch_size)
            negative_windows = probe.window_scores(negatives, batch_size=args.batch_size)
            for aggregation, combine in WINDOW_AGGREGATIONS.items():
                record(f"window {window} {aggregation}", set_name,
                       accuracy([combine(w) for w in human_windows], [combine(w) for w in negative_windows]))
        record("detokenised", set_name, accuracy(scorer.score([detokenise(s) for s in humans], batch_size=args.batch_size),
                                                 scorer.score([detokenise(s) for s in negatives], batch_size=args.batch_size)))
        for words in (60, 100):
            record(f"first {words} words", set_name,
                   accuracy(scorer.score([first_words(s, words) for s in humans], batch_size=args.batch_size),
                            scorer.score([first_words(s, words) for s in negatives], batch_size=args.batch_size)))
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
