"""Fewer windows for long stories: a checkpoint scored with a longer window stride, against its own stride.

    python -m benchmarks.speed.window_stride --metric plot_coherence --checkpoint hub_cards/plot-coherence-roc-base \
        --corpus wp-held-out --strides 96 126 --sets union_wp

A story longer than a checkpoint's window is scored over overlapping windows, ``window_stride`` tokens apart (half a
window for every bundled checkpoint), and its score is their mean. A longer stride scores fewer windows, each story's
text still covered whole. This measures, for each ``--strides`` value, how many windows the stories need and how far
their scores move from the checkpoint's own (Spearman, largest and mean difference), as the int8 fidelity rule
measures a copy: on 1,000 held-out stories of a corpus (``--corpus``), and on the human-judged sets of ``--sets``
(each coefficient's move; those sets are only checked, never used to choose a stride). Untimed, so valid on a busy
machine; ``--time`` also times each stride back to back in this process (on a quiet machine).
"""
from __future__ import annotations

import argparse
import time

from ..common import command_line, correlations, machine, write_results
from ..correlation import HUMAN_SETS, load_human_set
from .scoring_speed import CORPORA, score_agreement

COEFFICIENTS = ("pearson", "spearman", "kendall")


def with_stride(scorer, stride: int):
    """A scorer of the same model and text side whose windows are ``stride`` tokens apart."""
    from storyeval.scoring.sequence import SequenceScorer

    return SequenceScorer(scorer.model, scorer.tokenizer, scorer.max_length, stride, "cpu", scorer.preprocess, scorer.delexicalize,
                          name=scorer.name, window_aggregation=scorer.window_aggregation)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metric", default="union", choices=["union", "plot_coherence"])
    parser.add_argument("--checkpoint", required=True, help="a UNION-architecture checkpoint folder")
    parser.add_argument("--corpus", default="wp-held-out", choices=sorted(CORPORA))
    parser.add_argument("--stories", type=int, default=1000)
    parser.add_argument("--strides", type=int, nargs="+", required=True, help="window strides to score with, besides the checkpoint's own")
    parser.add_argument("--sets", nargs="*", default=[], choices=HUMAN_SETS, help="human-judged sets to check each stride's moves on")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--time", action="store_true", help="also time each stride in this process (a quiet machine only)")
    parser.add_argument("--output", default=None, help="results file name (default: <checkpoint>_window_stride)")
    args = parser.parse_args(argv)
    from pathlib import Path

    if not (Path(args.checkpoint) / "config.json").is_file():
        parser.error(f"--checkpoint {args.checkpoint}: no checkpoint there (config.json)")
    if args.stories < 1 or args.batch_size < 1:
        parser.error("--stories and --batch-size must be positive")

    from storyeval.checkpoints.resolution import checkpoint_name
    from storyeval.scoring.sequence import load_scorer

    own = load_scorer(args.metric, args.checkpoint, device="cpu")
    bad = [stride for stride in args.strides if not 0 < stride <= own.max_length - 2 or stride == own.window_stride]
    if bad:
        parser.error(f"--strides {bad}: each must be in 1..{own.max_length - 2} and differ from the checkpoint's own {own.window_stride}")
    stories = CORPORA[args.corpus](args.stories)
    sets = {name: load_human_set(name) for name in args.sets}
    name = checkpoint_name(args.checkpoint)
    payload = {"machine": machine(), "command": command_line(__name__, argv), "checkpoint": name, "corpus": args.corpus,
               "stories": len(stories), "max_length": own.max_length, "own_stride": own.window_stride, "strides": {}}

    def measure(scorer) -> dict:
        started = time.perf_counter()
        scores = scorer.score(stories, batch_size=args.batch_size)
        seconds = time.perf_counter() - started
        row = {"windows": sum(len(scorer.windows(story)) for story in stories), "scores": scores,
               "sets": {set_name: correlations(scorer.score(human_set.stories, batch_size=args.batch_size), human_set.human)
                        for set_name, human_set in sets.items()}}
        if args.time:
            row["stories_per_second"] = len(stories) / seconds
        return row

    reference = measure(own)
    payload["own"] = {key: value for key, value in reference.items() if key != "scores"}
    for stride in args.strides:
        row = measure(with_stride(own, stride))
        row["agreement_with_own_stride"] = score_agreement(row.pop("scores"), reference["scores"])
        row["moved"] = {set_name: {c: row["sets"][set_name][c] - reference["sets"][set_name][c] for c in COEFFICIENTS} for set_name in sets}
        payload["strides"][str(stride)] = row
        agreement = row["agreement_with_own_stride"]
        print(f"stride {stride}: {row['windows']:,} windows (own {own.window_stride}: {reference['windows']:,}), Spearman "
              f"{agreement['spearman_with_float32']:.4f}, max {agreement['max_abs_difference']:.3f}; moves "
              + ", ".join(f"{s} {max(abs(v) for v in m.values()):.4f}" for s, m in row["moved"].items()))
    print("wrote", write_results(args.output or f"{name.replace('-', '_')}_window_stride", payload))


if __name__ == "__main__":
    main()
