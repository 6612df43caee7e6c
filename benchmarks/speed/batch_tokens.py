"""Batches capped by padded tokens on the CPU (``storyeval.scoring.windows.CPU_BATCH_TOKENS``) against batches of a
fixed number of windows, timed in one process, settings alternating round by round (ABBA order, so a drift in the
machine's speed falls on every setting alike).

    python -m benchmarks.speed.batch_tokens --checkpoint hub_cards/union-wp-base --corpus wp --stories 100 \\
        --settings 32:none 16:none 8:none 16:2048 16:4096 16:8192 --output speed/union_wp_base_batch_tokens_wp

A setting is ``BATCH_SIZE:MAX_TOKENS`` (``none``: no cap, the batch size alone). Reported per setting: the median
stories/s over the rounds, and the largest difference of its scores from the first setting's (float32 batches of other
shapes give the same scores to about 1e-6; int8's activations are quantised per batch, so its scores move more).
Run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import statistics
import time

from ..common import command_line, machine, results_name, write_results
from .scoring_speed import CORPORA, add_workload_arguments, workload_checkpoint


def setting(value: str) -> tuple[int, int | None]:
    """argparse type of ``BATCH_SIZE:MAX_TOKENS``."""
    size, _, tokens = value.partition(":")
    try:
        parsed = int(size), None if tokens in ("", "none") else int(tokens)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: give BATCH_SIZE:MAX_TOKENS, such as 16:4096 or 32:none") from None
    if parsed[0] < 1 or (parsed[1] is not None and parsed[1] < 1):
        raise argparse.ArgumentTypeError(f"{value!r}: the batch size and the token cap must be at least 1")
    return parsed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser, batch_size=False)
    parser.add_argument("--settings", type=setting, nargs="+", required=True, metavar="BATCH_SIZE:MAX_TOKENS")
    parser.add_argument("--dtype", default="float32", choices=["float32", "int8"])
    parser.add_argument("--rounds", type=int, default=4, help="timed passes over the stories per setting")
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--output", type=results_name, required=True)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.num_threads < 1:
        parser.error("--rounds and --num-threads must be at least 1")
    import torch

    from storyeval.scoring import windows
    from storyeval.scoring.sequence import load_scorer

    torch.set_num_threads(args.num_threads)
    checkpoint = workload_checkpoint(args)
    if args.dtype == "int8":
        from storyeval.scoring.int8.scorer import load_int8_scorer

        scorer = load_int8_scorer(checkpoint, num_threads=args.num_threads)
    else:
        scorer = load_scorer(args.metric, checkpoint, device="cpu")
    stories = CORPORA[args.corpus](args.stories)

    def score(batch_size: int, max_tokens: int | None) -> list[float]:
        windows.CPU_BATCH_TOKENS = max_tokens  # read by the scorer at every call
        return scorer.score(stories, batch_size=batch_size, dtype=args.dtype)

    scorer.score(stories[:32], batch_size=16, dtype=args.dtype)  # warm-up (and int8's export)
    reference = score(*args.settings[0])
    speeds: dict[tuple, list[float]] = {s: [] for s in args.settings}
    differences = {s: max(abs(a - b) for a, b in zip(score(*s), reference)) for s in args.settings}
    for round_ in range(args.rounds):
        for s in args.settings if round_ % 2 == 0 else reversed(args.settings):
            started = time.perf_counter()
            score(*s)
            speeds[s].append(len(stories) / (time.perf_counter() - started))
    rows = {f"{size}:{'none' if tokens is None else tokens}": {
        "stories_per_second": statistics.median(speeds[(size, tokens)]), "runs": speeds[(size, tokens)],
        "max_abs_difference_from_first": differences[(size, tokens)]} for size, tokens in args.settings}
    for name, row in rows.items():
        print(f"{name:>12}  {row['stories_per_second']:7.2f} stories/s  (max |difference| {row['max_abs_difference_from_first']:.2g})")
    payload = {"machine": machine(), "command": command_line(__name__, argv), "metric": args.metric, "checkpoint": checkpoint,
               "corpus": args.corpus, "stories": len(stories), "dtype": args.dtype, "rounds": args.rounds,
               "torch_threads": torch.get_num_threads(), "settings": rows}
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
