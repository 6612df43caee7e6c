"""Pairs across stories in which length points the wrong way: an intact story above another story's broken copy
that is at least as long.

    python -m storyeval_training.data.across_pairs --pairs runs/modern-r2/pairs/wp-half \\
        --output-dir runs/against-length/wp-half --seed 42

The input is a folder of (intact story, broken copy) pairs, as :mod:`storyeval_training.data.modern_breaks` saves
them (``human`` the intact story, ``negative`` its broken copy, ``id`` starting with the story's id). A half or cut
copy is shorter than its own story, so its pairs reward a scorer for preferring longer text as much as for noticing
a missing ending. Here each intact story is paired instead with the broken copy of **another** story whose length,
in words, is between ``--min-length-ratio`` and ``--max-length-ratio`` times its own (by default at least as long
and at most half again): a scorer that ranks by length gets these wrong, so beside the own-copy pairs only the
ending explains both orders. The partner is drawn (seeded) among the copies of stories by the same kind of writer
(a person's against a person's, a model's against a model's: the ``machine`` technique), so that authorship does not
explain the order either. A story with no such partner is left out and counted; every split is paired within itself,
so no story crosses from training to selection.
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import datasets
import numpy as np

from storyeval_training.data.output_folder import refuse_existing, written_whole
from storyeval_training.export.provenance import environment

logger = logging.getLogger("storyeval_training.data.across_pairs")

RECORD = "across_pairs.json"
MACHINE = "machine"  # the technique modern_breaks gives a model's story (a person's carries "human")


def story_of(pair_id: str) -> str:
    """The story a pair's id names: modern_breaks' ids are story/view/kind."""
    return pair_id.split("/")[0]


def load_break_pairs(folder: str, tool: str) -> datasets.DatasetDict:
    """modern_breaks' pairs from ``folder``, or a one-line exit naming the columns another folder lacks."""
    pairs = datasets.load_from_disk(folder)
    missing = {"id", "human", "negative", "techniques"} - set(next(iter(pairs.values())).column_names)
    if missing:
        raise SystemExit(f"{tool}: --pairs {folder}: no {', '.join(sorted(missing))} column: not modern_breaks' pairs")
    return pairs


def partners(rows: datasets.Dataset, min_ratio: float, max_ratio: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(intact pair index, partner pair index) for every intact story that has a partner: another story's broken copy,
    by the same kind of writer, whose length is within the ratios of the intact story's."""
    intact = np.array([len(text.split()) for text in rows["human"]], dtype=float)
    broken = np.array([len(text.split()) for text in rows["negative"]], dtype=float)
    stories = np.array([story_of(pair_id) for pair_id in rows["id"]])
    machine = np.array([MACHINE in techniques for techniques in rows["techniques"]])
    ratio = broken[None, :] / intact[:, None]
    allowed = ((stories[:, None] != stories[None, :]) & (machine[:, None] == machine[None, :])
               & (ratio >= min_ratio) & (ratio <= max_ratio))
    return [(i, int(rng.choice(np.flatnonzero(allowed[i])))) for i in range(len(rows)) if allowed[i].any()]


def pair_across(rows: datasets.Dataset, min_ratio: float, max_ratio: float, seed: int) -> tuple[datasets.Dataset, int]:
    """One split's across-story pairs (the input's columns; ``techniques`` are the partner copy's, with "across") and
    how many intact stories had no partner."""
    chosen = partners(rows, min_ratio, max_ratio, np.random.default_rng(seed))
    paired = {
        "id": [f"{rows[i]['id']}/across/{story_of(rows[j]['id'])}" for i, j in chosen],
        "context": [rows[i]["context"] for i, _ in chosen],
        "human": [rows[i]["human"] for i, _ in chosen],
        "negative": [rows[j]["negative"] for _, j in chosen],
        "original": [rows[i]["original"] for i, _ in chosen],
        "techniques": [[*rows[j]["techniques"], "across"] for _, j in chosen],
    }
    return datasets.Dataset.from_dict(paired, features=rows.features), len(rows) - len(chosen)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", required=True, help="a folder of (intact story, broken copy) pairs (modern_breaks' pairs/KIND)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--min-length-ratio", type=float, default=1.0,
                   help="the partner copy has at least this many times the intact story's words")
    p.add_argument("--max-length-ratio", type=float, default=1.5, help="and at most this many times")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    if not 0 < args.min_length_ratio <= args.max_length_ratio:
        p.error("--min-length-ratio must be above 0 and at most --max-length-ratio")
    if not Path(args.pairs).is_dir():
        p.error(f"--pairs {args.pairs}: no such folder")
    refuse_existing(p, args.output_dir)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    pairs = load_break_pairs(args.pairs, "across_pairs")
    out, counts = {}, {"pairs": {}, "intact_stories_without_partner": {}}
    for split, rows in pairs.items():
        out[split], unpaired = pair_across(rows, args.min_length_ratio, args.max_length_ratio, args.seed)
        counts["pairs"][split], counts["intact_stories_without_partner"][split] = len(out[split]), unpaired
    with written_whole(args.output_dir) as output:
        datasets.DatasetDict(out).save_to_disk(str(output))
        (output / RECORD).write_text(json.dumps({"args": vars(args), **counts, "environment": environment()}, indent=2) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
