"""Pairs of a story's last sentences against the sentences before a cut in the same story: what teaches a scorer to
tell a story's end from a point part-way through it, with the text it reads of the same size on both sides.

    python -m storyeval_training.data.ending_pairs --stories runs/modern-r2/stories --output-dir runs/ending/pairs

The input is the ``stories`` folder of :mod:`storyeval_training.data.modern_breaks`; only its intact stories are read,
of the training and validation splits (the test split is the check's report). Each story is normalised as the
checkpoints were trained, split into sentences, and gives one pair: ``human`` its last ``--sentences`` sentences,
``negative`` the same number of sentences ending at a cut drawn (seeded) inside the story: at its half, where the
first checks cut it, in half the stories, anywhere after its first ``--sentences`` sentences in the rest. Both sides
are as many sentences long, so the number of sentences cannot tell them apart, and neither side says how long its
story is. Left out and counted: a story of fewer than four sentences (the checks' own bound), and one whose last
sentence has no closing punctuation (a model's story stopped mid-sentence by its token limit has no end to learn).

The pairs train a UNION-architecture classifier (``storyeval-train-union --pairs-dir``) whose score of a story's last
sentences is mixed with a story scorer's (``benchmarks.agreement.modern_breaks --ending``).
"""
from __future__ import annotations

import argparse
import json
import logging
import random
from collections import Counter
from pathlib import Path

import datasets

from storyeval import text as textlib
from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.export.provenance import environment

logger = logging.getLogger("storyeval_training.data.ending_pairs")

RECORD = "ending_pairs.json"
MIN_SENTENCES = 4  # the first checks' bound: a shorter story is neither cut nor shuffled
CLOSING = (".", "!", "?", '"', "'", "”", "’")


def tail(sentences: list[str], count: int) -> str:
    """The last ``count`` sentences, as one text: what the ending scorer reads of a story. Not
    ``storyeval.text.last_sentences``, which skips back past sentences of punctuation alone where the last ones have no
    words: the shipped ending scorer was trained on these pairs, 6 of whose 17,798 sides are such sentences."""
    return " ".join(sentences[-count:])


def story_pair(story_id: str, sentences: list[str], count: int, rng: random.Random, origin: str) -> dict:
    """One pair from a story of at least ``MIN_SENTENCES`` and more than ``count`` sentences."""
    n = len(sentences)
    cut = n // 2 if rng.random() < 0.5 else rng.randint(count, n - 1)
    cut = max(cut, count)  # a half shorter than ``count`` sentences: the first ``count`` (the two sides stay equal in size)
    return {"id": f"{story_id}/ending/{cut}", "context": "", "human": tail(sentences, count),
            "negative": tail(sentences[:cut], count), "original": tail(sentences, count),
            "techniques": ["ending", origin, f"cut {cut} of {n}"]}


def ending_pairs(rows: datasets.Dataset, count: int, seed: int) -> tuple[datasets.Dataset, Counter]:
    """One split's pairs (one per intact story that qualifies) and what was left out, counted."""
    rng = random.Random(seed)
    pairs, left = [], Counter()
    for row in rows:
        if row["kind"] != "intact":
            continue
        sentences = textlib.split_sentences(textlib.normalize_story(row["text"]))
        if len(sentences) < max(MIN_SENTENCES, count + 1):
            left["too_short"] += 1
        elif not row["text"].rstrip().endswith(CLOSING):
            left["stopped_mid_sentence"] += 1
        else:
            pairs.append(story_pair(row["unit"], sentences, count, rng, row["origin"]))
    return datasets.Dataset.from_list(pairs, features=PAIR_FEATURES), left


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stories", required=True, help="modern_breaks' stories folder")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--sentences", type=int, default=2, help="how many of a story's last sentences a side holds")
    p.add_argument("--splits", nargs="+", default=["train", "validation"],
                   help="the splits to pair (default: train validation; the test split is the check's report)")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    if not 1 <= args.sentences < MIN_SENTENCES:
        p.error(f"--sentences must be between 1 and {MIN_SENTENCES - 1}: a cut story keeps at least that many")
    if not Path(args.stories).is_dir():
        p.error(f"--stories {args.stories}: no such folder")
    if Path(args.output_dir).exists():
        p.error(f"--output-dir {args.output_dir} exists: choose a new folder")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    stories = datasets.load_from_disk(args.stories)
    missing = {"unit", "kind", "origin", "text"} - set(next(iter(stories.values())).column_names)
    if missing:
        raise SystemExit(f"ending_pairs: --stories {args.stories}: no {', '.join(sorted(missing))} column: not modern_breaks' stories")
    if absent := [split for split in args.splits if split not in stories]:
        raise SystemExit(f"ending_pairs: --stories {args.stories} has no split {', '.join(absent)} (it has {', '.join(stories)})")
    out, counts = {}, {"pairs": {}, "left_out": {}}
    for offset, split in enumerate(args.splits):
        out[split], left = ending_pairs(stories[split], args.sentences, args.seed + offset)
        counts["pairs"][split], counts["left_out"][split] = len(out[split]), dict(left)
        logger.info("%s: %d pairs, left out %s", split, len(out[split]), dict(left))
    output = Path(args.output_dir)
    datasets.DatasetDict(out).save_to_disk(str(output))
    (output / RECORD).write_text(json.dumps({"args": vars(args), **counts, "environment": environment()}, indent=2) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
