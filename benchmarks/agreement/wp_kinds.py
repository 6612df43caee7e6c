"""Each kind's held-out pair accuracy for WritingPrompts checkpoints and suites: which orders a score holds, and the worst.

    python -m benchmarks.agreement.wp_kinds --kinds-dir <wp_kinds output> --split test \\
        --checkpoint union-wp-base=hub_cards/union-wp-base --suite story-quality-wp-base=wp-base

The kinds are those of ``python -m storyeval_training.data.wp_kinds``: ``origin`` (a human story above a weak
generator's continuation of its opening), ``damage`` (a story above its UNION perturbation, human and machine
stories), ``strength`` (a stronger generator's story above a weaker one's for the same prompt). Pair accuracy
is the share of pairs in which the first story scores higher (a tie counts half); a checkpoint is judged by its
**worst** kind (``min``). ``--suite label=config`` adds a ``story_quality`` suite's ``combined`` score
(its parts' scores are reused where the same checkpoint was scored). Beside them: a length-only rule (the
longer story wins: 0.5 when every pair was cut to equal length) and each score's Spearman correlation with the
story's length in words, over the split's distinct stories. Checkpoints were selected on the validation split,
so ``--split test`` is the report.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.common import add_checkpoint_options, checked_checkpoints, command_line, machine, results_name, write_results

from .story_scores import FITTED_HELP, SUITE_HELP, parse_fitted_suites, parse_suites

KINDS = ("origin", "damage", "strength")


def outcome(first: float, second: float) -> float:
    return 1.0 if first > second else 0.5 if first == second else 0.0


def accuracy(pairs: list[tuple[str, str]], score_of: dict[str, float]) -> dict:
    values = [outcome(score_of[a], score_of[b]) for a, b in pairs]
    return {"accuracy": round(sum(values) / len(values), 4), "pairs": len(values)}


def summary(per_kind: dict[str, dict]) -> dict:
    values = [result["accuracy"] for result in per_kind.values()]
    return {"min": round(min(values), 4), "mean": round(sum(values) / len(values), 4), "per_kind": per_kind}


def read_kinds(kinds_dir: Path, split: str, max_pairs: int | None, seed: int) -> dict[str, list[tuple[str, str]]]:
    import datasets

    kinds = {}
    for kind in KINDS:
        folder = kinds_dir / kind
        if not (folder / "dataset_dict.json").is_file():
            raise FileNotFoundError(f"--kinds-dir {kinds_dir}: no {kind}/ pairs (a wp_kinds output folder holds {', '.join(KINDS)})")
        rows = datasets.load_from_disk(str(folder))[split]
        if max_pairs:
            rows = rows.shuffle(seed=seed).select(range(min(max_pairs, len(rows))))
        kinds[kind] = list(zip(rows["human"], rows["negative"]))
    return kinds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds-dir", required=True, type=Path, help="python -m storyeval_training.data.wp_kinds's output")
    parser.add_argument("--split", default="test", choices=["validation", "test"])
    parser.add_argument("--max-pairs-per-kind", type=int, default=None, help="a seeded sample of each kind's pairs")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--suite", action="append", default=[], metavar="LABEL=CONFIG[:COMBINATION]", help=SUITE_HELP)
    parser.add_argument("--fitted-suite", action="append", default=[], metavar="LABEL=REPORT", help=FITTED_HELP)
    add_checkpoint_options(parser, batch_size=16, required=False)
    parser.add_argument("--output", type=results_name, default="wp_kinds")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args) if args.checkpoint else {}
    try:  # an unknown suite or combination: one line, before any model loads
        suites = parse_suites(args.suite)
        fitted = parse_fitted_suites(args.fitted_suite, {*suites, *checkpoints})
    except ValueError as error:
        parser.error(str(error))
    if not (checkpoints or suites or fitted):
        parser.error("give --checkpoint label=folder, --suite label=config and/or --fitted-suite label=report (each at least once)")
    if args.max_pairs_per_kind is not None and args.max_pairs_per_kind < 1:
        parser.error("--max-pairs-per-kind must be positive")
    from storyeval_training.selection import length_spearman

    from .story_scores import StoryScores

    try:  # a folder that is not the builder's output: one line, before any model loads
        kinds = read_kinds(args.kinds_dir, args.split, args.max_pairs_per_kind, args.seed)
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    stories = sorted({story for pairs in kinds.values() for pair in pairs for story in pair})
    words = {story: len(story.split()) for story in stories}
    payload = {"machine": machine(), "command": command_line(__name__, argv), "split": args.split, "stories": len(stories),
               "length_rule": summary({kind: accuracy(pairs, words) for kind, pairs in kinds.items()}), "checkpoints": {}}
    scores = StoryScores(stories, args.batch_size)

    def report(label: str, score_of: dict[str, float], fields: dict) -> None:
        rho = length_spearman([score_of[s] for s in stories], [words[s] for s in stories])  # null: every story has one length
        result = {**fields, **summary({kind: accuracy(pairs, score_of) for kind, pairs in kinds.items()}),
                  "length_spearman": None if rho is None else round(rho, 4)}
        payload["checkpoints"][label] = result
        print(f"{label}: min {result['min']:.3f}, mean {result['mean']:.3f} ("
              + ", ".join(f"{kind} {value['accuracy']:.3f}" for kind, value in result["per_kind"].items())
              + f"); length rho {result['length_spearman']}")

    for label, folder in checkpoints.items():
        report(label, *scores.checkpoint(folder))
    for label, spec in suites.items():
        report(label, *scores.suite(*spec))
    for label, entry in fitted.items():
        report(label, *scores.fitted_suite(entry))
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
