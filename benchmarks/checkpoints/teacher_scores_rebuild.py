"""Does a teacher's cache, scored again, give the scores a student learned from? The first stories of a transfer file.

    python -m benchmarks.checkpoints.teacher_scores_rebuild --transfer-dir outputs/transfer-plot \\
        --teacher hub_cards/union-roc-base --reference union-roc-base.jsonl --stories 512 --output teacher_scores_rebuild_roc

A distilled student learns its teacher's logits from the cache ``storyeval_training.data.transfer score`` writes. The
cache is rebuilt by that command, not kept in the repository; this scores the first ``--stories`` stories of the
transfer file as ``transfer score`` does (the same function, chunks and batches) and compares each logit with a
reference cache, such as the one a shipped student learned from. The teacher's weights and the transfer file must be
the reference's (by hash); the versions in its settings string may differ, and are recorded. A difference above
``--tolerance`` ends with status 1 after the results file is written.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.common import command_line, machine, results_name, write_results
from storyeval_training.data import transfer


def reference_cache(path: Path) -> tuple[dict, dict[str, float | None]]:
    """A cache's header and its scores, whoever wrote it."""
    try:
        header = json.loads(path.read_text(encoding="utf-8").split("\n", 1)[0])
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"--reference {path}: not a teacher-score cache ({error})") from None
    if not isinstance(header, dict):
        raise ValueError(f"--reference {path}: not a teacher-score cache (its first line is no header)")
    return header, transfer.read_cache(path, header)


def compare(rebuilt: list[float | None], reference: list[float | None]) -> dict:
    """How far the rebuilt logits are from the reference's, story by story (a story longer than one window has none)."""
    both = [(a, b) for a, b in zip(rebuilt, reference) if a is not None and b is not None]
    differences = [abs(a - b) for a, b in both]
    return {"compared": len(both), "identical": sum(d == 0.0 for d in differences),
            "max_abs_difference": max(differences, default=0.0),
            "mean_abs_difference": sum(differences) / len(differences) if differences else 0.0,
            "longer_than_one_window_in_both": sum(a is None and b is None for a, b in zip(rebuilt, reference)),
            "longer_than_one_window_in_one": sum((a is None) != (b is None) for a, b in zip(rebuilt, reference))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transfer-dir", required=True, type=Path, help="the folder `transfer build` wrote")
    parser.add_argument("--teacher", required=True, type=Path, help="the teacher's checkpoint folder")
    parser.add_argument("--reference", required=True, type=Path, help="a cache of that teacher and file (`transfer score`)")
    parser.add_argument("--stories", type=int, default=512, help="the first N stories of the file (default: one chunk)")
    parser.add_argument("--batch-size", type=int, default=32, help="as `transfer score` (its default)")
    parser.add_argument("--chunk", type=int, default=512, help="as `transfer score`: the batches form within a chunk")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="the largest difference of a logit counted as the same")
    parser.add_argument("--output", type=results_name, required=True, help="results file name")
    args = parser.parse_args(argv)
    if min(args.stories, args.batch_size, args.chunk) < 1 or args.tolerance < 0:
        parser.error("--stories, --batch-size and --chunk must be positive, --tolerance not negative")
    if not (args.teacher / "config.json").is_file():
        parser.error(f"--teacher {args.teacher}: no checkpoint there (config.json)")
    if not (args.transfer_dir / transfer.STORIES_FILE).is_file():
        parser.error(f"--transfer-dir {args.transfer_dir}: no {transfer.STORIES_FILE} (build it with `transfer build`)")
    if not args.reference.is_file():
        parser.error(f"--reference {args.reference}: no such file")
    try:
        header, scores = reference_cache(args.reference)
        rows = transfer.read_stories(args.transfer_dir)[:args.stories]
    except ValueError as error:
        parser.error(str(error))
    if missing := sum(row["id"] not in scores for row in rows):
        parser.error(f"--reference {args.reference}: {missing} of the first {len(rows)} stories have no score there")

    import torch

    from storyeval.scoring.sequence import load_story_classifier

    scorer = load_story_classifier(args.teacher)
    identity = transfer.teacher_identity(args.teacher, scorer, args.transfer_dir)
    differing = {field: {"reference": header.get(field), "rebuilt": value} for field, value in identity.items() if header.get(field) != value}
    if other := [field for field in ("weights_sha256", "transfer_sha256") if field in differing]:
        parser.error(f"--reference {args.reference}: another {' and '.join(other)} than this teacher and file's; "
                     "compare a cache of the same teacher and transfer file")
    started, rebuilt = time.perf_counter(), []
    for start in range(0, len(rows), args.chunk):
        rebuilt += transfer.single_window_logits(scorer, [row["story"] for row in rows[start:start + args.chunk]], args.batch_size)
    seconds = time.perf_counter() - started
    figures = compare(rebuilt, [scores[row["id"]] for row in rows])
    within = figures["max_abs_difference"] <= args.tolerance and not figures["longer_than_one_window_in_one"]
    payload = {"command": command_line(__name__, argv), "machine": machine(), "teacher": identity["teacher"],
               "reference": {"sha256": transfer.file_sha256(args.reference), "header": header}, "header_fields_differing": differing,
               "stories": len(rows), "batch_size": args.batch_size, "chunk": args.chunk, "torch_threads": torch.get_num_threads(),
               "scoring_seconds": round(seconds, 1), **figures, "tolerance": args.tolerance, "within_tolerance": within}
    print("wrote", write_results(args.output, payload))
    print(f"{figures['compared']} logits compared: largest difference {figures['max_abs_difference']:.3g}, "
          f"{figures['identical']} identical" + ("" if within else f"; above the tolerance {args.tolerance:g}"))
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
