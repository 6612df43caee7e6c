"""What the pair builders that read the modern-text check's stories share (``ending_pairs``, ``neighbour_pairs``,
``window_pairs``): their options, the stories folder's checks, one pass per split with its own seed, the draw of
another story by the same kind of writer, a split's pairs as a dataset (none: an empty one), and the saved folder with
its record."""
from __future__ import annotations

import argparse
import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Callable

import datasets

from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.data.output_folder import refuse_existing, written_whole
from storyeval_training.export.provenance import environment

PairSplit = Callable[[datasets.Dataset, int], tuple[datasets.Dataset, Counter]]


def other_story(index: int, same_writer: list[int], rng: random.Random) -> int | None:
    """Another story than ``index`` among ``same_writer`` (the indices of a split's stories of one view and kind of
    writer, ``index`` among them), drawn with ``rng``, where a stray sentence comes from; None where there is none."""
    if len(same_writer) < 2:
        return None
    other = index
    while other == index:
        other = rng.choice(same_writer)
    return other


def pairs_dataset(pairs: list[dict]) -> datasets.Dataset:
    """A split's pairs in the negative samplers' pair format; a split with none is an empty dataset of that format
    (``Dataset.from_list`` refuses an empty list with features)."""
    if not pairs:
        return datasets.Dataset.from_dict({name: [] for name in PAIR_FEATURES}, features=PAIR_FEATURES)
    return datasets.Dataset.from_list(pairs, features=PAIR_FEATURES)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stories", required=True, help="modern_breaks' stories folder")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--splits", nargs="+", default=["train", "validation"],
                   help="the splits to pair (default: train validation; the test split is the check's report)")
    p.add_argument("--seed", type=int, default=42)


def check_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not Path(args.stories).is_dir():
        p.error(f"--stories {args.stories}: no such folder")
    refuse_existing(p, args.output_dir)


def build(tool: str, args: argparse.Namespace, columns: set[str], pair_split: PairSplit, record: str) -> None:
    """Pairs every asked split of ``args.stories`` with ``pair_split(rows, seed)`` (split k gets ``args.seed + k``) and
    saves them to ``args.output_dir`` with ``record``: the arguments, the counts and the environment. A folder without
    ``columns`` or without an asked split stops in one line before anything is written."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    logger = logging.getLogger(f"storyeval_training.data.{tool}")
    stories = datasets.load_from_disk(args.stories)
    missing = columns - set(next(iter(stories.values())).column_names)
    if missing:
        raise SystemExit(f"{tool}: --stories {args.stories}: no {', '.join(sorted(missing))} column: not modern_breaks' stories")
    if absent := [split for split in args.splits if split not in stories]:
        raise SystemExit(f"{tool}: --stories {args.stories} has no split {', '.join(absent)} (it has {', '.join(stories)})")
    out, counts = {}, {"pairs": {}, "left_out": {}}
    for offset, split in enumerate(args.splits):
        out[split], left = pair_split(stories[split], args.seed + offset)
        counts["pairs"][split], counts["left_out"][split] = len(out[split]), dict(left)
        logger.info("%s: %d pairs, left out %s", split, len(out[split]), dict(left))
    with written_whole(args.output_dir) as output:
        datasets.DatasetDict(out).save_to_disk(str(output))
        (output / record).write_text(json.dumps({"args": vars(args), **counts, "environment": environment()}, indent=2) + "\n")
    print(json.dumps(counts))
