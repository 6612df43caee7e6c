"""Pairs of two intact stories of different lengths, in the order a scorer gives them: what holds that scorer's
order across stories, length included, while it is taught other kinds.

    python -m storyeval_training.data.order_pairs --pairs runs/modern-r2/pairs/wp-half \\
        --checkpoint hub_cards/union-roc-base --output-dir runs/order/wp --seed 42

The input is a folder of (intact story, broken copy) pairs, as :mod:`storyeval_training.data.modern_breaks` saves
them; only the intact stories are read, one per story. The checkpoint scores them (as the pairs are written, already
normalised), and each story is paired with another story, by the same kind of writer, whose length in words differs
by at least ``--min-length-ratio`` either way, drawn (seeded); the pair's higher story is the one the checkpoint
scores higher. Trained on beside the kinds that teach a change, these pairs keep the start's order between a short
and a long story, which is what the Spearman of the score with length reads; a squared-difference anchor on each
story's logit (``train_ranker --anchor-kinds``) charges little for the small shifts that reorder close scores.
Each split asked for (``--splits``: training and validation by default; the test split is the check's report, which no
run trains or selects on, so it is not scored unless named) is paired within itself; pairs whose two scores tie are
left out and counted.
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import datasets
import numpy as np

from storyeval_training.data.across_pairs import MACHINE, load_break_pairs, story_of
from storyeval_training.data.output_folder import refuse_existing, written_whole
from storyeval_training.export.provenance import environment

logger = logging.getLogger("storyeval_training.data.order_pairs")

RECORD = "order_pairs.json"


def intact_stories(rows: datasets.Dataset) -> datasets.Dataset:
    """The first pair of each story: its intact story, once."""
    seen, keep = set(), []
    for index, pair_id in enumerate(rows["id"]):
        if story_of(pair_id) not in seen:
            seen.add(story_of(pair_id))
            keep.append(index)
    return rows.select(keep)


def order_pairs(stories: datasets.Dataset, scores: list[float], min_ratio: float, seed: int) -> tuple[datasets.Dataset, dict]:
    """One split's pairs (the input's columns: ``human`` the story scored higher, ``negative`` the other) from its intact
    stories (:func:`intact_stories`) and their scores, and the counts of stories left without a partner or tied."""
    rng = np.random.default_rng(seed)
    words = np.array([len(text.split()) for text in stories["human"]], dtype=float)
    machine = np.array([MACHINE in techniques for techniques in stories["techniques"]])
    ratio = np.maximum(words[:, None], words[None, :]) / np.minimum(words[:, None], words[None, :])
    allowed = (machine[:, None] == machine[None, :]) & (ratio >= min_ratio)
    np.fill_diagonal(allowed, False)
    columns, counts = {name: [] for name in stories.column_names}, {"without_partner": 0, "tied": 0}
    for i in range(len(stories)):
        if not allowed[i].any():
            counts["without_partner"] += 1
            continue
        j = int(rng.choice(np.flatnonzero(allowed[i])))
        if scores[i] == scores[j]:
            counts["tied"] += 1
            continue
        higher, lower = (i, j) if scores[i] > scores[j] else (j, i)
        row = {"id": f"{story_of(stories[i]['id'])}/order/{story_of(stories[j]['id'])}", "context": "",
               "human": stories[higher]["human"], "negative": stories[lower]["human"],
               "original": stories[higher]["original"], "techniques": ["order", *stories[i]["techniques"][1:]]}
        for name in columns:
            columns[name].append(row[name])
    return datasets.Dataset.from_dict(columns, features=stories.features), counts


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", required=True, help="a folder of (intact story, broken copy) pairs (modern_breaks' pairs/KIND)")
    p.add_argument("--checkpoint", required=True, help="the UNION-architecture checkpoint whose order the pairs keep")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--min-length-ratio", type=float, default=1.25,
                   help="the longer story of a pair has at least this many times the shorter one's words")
    p.add_argument("--splits", nargs="+", default=["train", "validation"],
                   help="the splits of --pairs to score and pair (default: train validation; the test split is the report's)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    if not args.min_length_ratio >= 1:
        p.error("--min-length-ratio must be at least 1")
    if not Path(args.pairs).is_dir():
        p.error(f"--pairs {args.pairs}: no such folder")
    if not Path(args.checkpoint).is_dir():
        p.error(f"--checkpoint {args.checkpoint}: no such folder")
    refuse_existing(p, args.output_dir)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    from storyeval.scoring.sequence import load_story_classifier

    pairs = load_break_pairs(args.pairs, "order_pairs")  # before the checkpoint loads: a wrong folder costs nothing
    missing = [split for split in args.splits if split not in pairs]
    if missing:
        raise SystemExit(f"order_pairs: --pairs {args.pairs} has no split {', '.join(missing)} (it has {', '.join(pairs)})")
    pairs = {split: pairs[split] for split in args.splits}
    scorer = load_story_classifier(args.checkpoint, preprocess=False)  # the pairs' text is normalised already
    out, counts = {}, {"pairs": {}, "stories": {}}
    for split, rows in pairs.items():
        stories = intact_stories(rows)
        scores = scorer.score(stories["human"], batch_size=args.batch_size, progress_bar=True)
        out[split], left = order_pairs(stories, scores, args.min_length_ratio, args.seed)
        counts["pairs"][split], counts["stories"][split] = len(out[split]), {"intact": len(stories), **left}
    with written_whole(args.output_dir) as output:
        datasets.DatasetDict(out).save_to_disk(str(output))
        (output / RECORD).write_text(json.dumps({"args": vars(args), **counts, "environment": environment()}, indent=2) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
