"""Do scores on an accelerator match the CPU's? Parity and speed of story-classifier checkpoints on a device.

    python -m benchmarks.speed.device_parity --checkpoint union=hub_cards/union-roc --checkpoint plot_coherence=hub_cards/plot-coherence-roc

Each checkpoint is loaded once. Its float32 scores on the CPU are the reference; on ``--device`` (default: cuda)
it scores the same stories in each ``--dtypes`` and reports how far they are from the reference (largest and mean
absolute difference, Spearman, and how many story pairs change order), whether the scores depend on the batch
size there, and stories/s on both, with a BERT-base-sized scorer (random weights, same code path) beside it.
The stories are the ROC and WP test stories of ``benchmarks.speed.scoring_speed``, or one per line of ``--stories-file``
on a machine without the data.
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from storyeval.inputs import FLOAT_DTYPE_NAMES

from ..common import checkpoint_spec, command_line, machine, results_name, results_path, write_results
from .baseline_scorer import bert_base_sized_scorer
from .scoring_speed import CORPORA, score_agreement


def stories_per_second(scorer, stories, device, dtype, batch_size) -> tuple[float, list[float]]:
    scorer.score(stories[:batch_size], batch_size=batch_size, device=device, dtype=dtype)  # warm-up: kernels, the dtype's copy
    synchronize(device)
    started = time.perf_counter()
    scores = scorer.score(stories, batch_size=batch_size, device=device, dtype=dtype)
    synchronize(device)
    return len(stories) / (time.perf_counter() - started), scores


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def order_changes(scores: list[float], reference: list[float]) -> float:
    """The share of story pairs that the reference orders strictly and ``scores`` orders the other way."""
    pairs = flipped = 0
    for i, j in itertools.combinations(range(len(reference)), 2):
        if reference[i] != reference[j]:
            pairs += 1
            flipped += (scores[i] - scores[j]) * (reference[i] - reference[j]) < 0
    return flipped / pairs


def parity(scorer, stories, device, dtypes, batch_size) -> dict:
    cpu_speed, reference = stories_per_second(scorer, stories, "cpu", "float32", batch_size)
    result = {"settings": scorer.settings(), "cpu_float32_stories_per_second": cpu_speed, "dtypes": {}}
    for dtype in dtypes:
        speed, scores = stories_per_second(scorer, stories, device, dtype, batch_size)
        one_by_one = scorer.score(stories, batch_size=1, device=device, dtype=dtype)
        result["dtypes"][dtype] = {
            "settings": scorer.settings(dtype),
            "stories_per_second": speed,
            **score_agreement(scores, reference),
            "order_changes_vs_cpu_float32": order_changes(scores, reference),
            "max_abs_difference_batch_1_vs_batch": max(abs(a - b) for a, b in zip(one_by_one, scores)),
        }
        print(device, dtype, json.dumps(result["dtypes"][dtype]), flush=True)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=checkpoint_spec, action="append", required=True, metavar="METRIC=FOLDER",
                        help="a union or plot_coherence checkpoint folder (repeatable)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", nargs="+", default=list(FLOAT_DTYPE_NAMES), choices=FLOAT_DTYPE_NAMES)
    parser.add_argument("--stories", type=int, default=200, help="test stories per corpus")
    parser.add_argument("--stories-file", default=None, help="one story per line (blank lines skipped), instead of the ROC and WP test stories")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", type=results_name, default="device_parity")
    parser.add_argument("--output-dir", default=None, help="where the results file goes (default: benchmarks/results)")
    args = parser.parse_args(argv)
    for metric, folder in args.checkpoint:
        if metric not in ("union", "plot_coherence"):
            parser.error(f"--checkpoint {metric}={folder}: this benchmark scores union and plot_coherence checkpoints")
        if not Path(folder, "config.json").is_file():
            parser.error(f"--checkpoint {metric}={folder}: no checkpoint folder there")
    if args.stories < 1 or args.batch_size < 1:
        parser.error("--stories and --batch-size must be positive")
    if args.stories_file and not Path(args.stories_file).is_file():
        parser.error(f"--stories-file {args.stories_file}: no such file")
    # a run on a lent machine writes into its own folder, where an earlier file must not be overwritten
    results_folder = Path(args.output_dir) if args.output_dir else None
    if results_folder is not None and (existing := results_path(args.output, results_folder)).exists():
        parser.error(f"{existing} exists; remove it or choose another --output")

    import torch
    from transformers import AutoTokenizer

    from storyeval.scoring.devices import resolve_device
    from storyeval.scoring.sequence import load_scorer

    device = str(resolve_device(args.device))  # a clear error where the device is missing
    if args.stories_file:
        stories = [line for line in Path(args.stories_file).read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        stories = [story for corpus in ("roc", "wp") for story in CORPORA[corpus](args.stories)]
    payload = {"machine": machine(), "command": command_line(__name__, argv), "device": device,
               "device_name": torch.cuda.get_device_name(device) if device.startswith("cuda") else device,
               "stories": len(stories), "batch_size": args.batch_size, "checkpoints": {}}
    for metric, folder in args.checkpoint:
        print(metric, folder, flush=True)
        payload["checkpoints"][folder] = {"metric": metric, **parity(load_scorer(metric, folder, device="cpu"), stories, device, args.dtypes, args.batch_size)}
    baseline = bert_base_sized_scorer(AutoTokenizer.from_pretrained(args.checkpoint[0][1]))
    payload["bert_base_sized_stories_per_second"] = {dtype: stories_per_second(baseline, stories, device, dtype, args.batch_size)[0]
                                                     for dtype in args.dtypes}
    print("bert-base-sized:", json.dumps(payload["bert_base_sized_stories_per_second"]))
    print("wrote", write_results(args.output, payload, results_folder))


if __name__ == "__main__":
    main()
