"""Pairs of every window of a few consecutive sentences of a story against the same sentences shuffled: what teaches an
order scorer, with many windows of each story rather than one.

    python -m storyeval_training.data.window_pairs --stories runs/modern-r2/stories --output-dir runs/windows/pairs

The input is the ``stories`` folder of :mod:`storyeval_training.data.modern_breaks`; only its intact stories are read,
of the training and validation splits (the test split is the check's report). Each story is normalised as the
checkpoints were trained and split into the sentences that have words, as the order scorer reads a story
(:func:`storyeval.text.sentence_runs`); every window of ``--sentences`` consecutive sentences, one starting every
``--stride`` sentences, gives one pair: ``human`` the window, ``negative`` its sentences in a seeded order other than
their own, as the check's ``shuffle`` orders them. Both sides hold the same words, so only order tells them apart.
A story of fewer than ``--sentences`` sentences gives no window and is counted. The check saves a story twice, at WP
length and as a ROC-length window of it, so a window that a split already holds is left out and counted: each window is
trained on once.

``--negative stray`` pairs each window instead with its first sentences and, among them after the first, a sentence
drawn from another story of the same split, view and kind of writer (a person's or a model's), as the check's
``insert`` draws its stray sentence: both sides hold as many sentences, as a run of the order scorer that holds a stray
sentence does (first_checks.md, E11).

The check's own ``roc-shuffle`` pairs hold one window of each story: an order scorer trained on them (first_checks.md,
E8) learned its 4,508 training windows long before it learned order. These pairs hold about ten times as many.
"""
from __future__ import annotations

import argparse
import functools
import random
from collections import Counter, defaultdict

import datasets

from storyeval import text as textlib
from storyeval_training.data import breaks, story_pairs

RECORD = "window_pairs.json"
# what a window is paired with: its sentences shuffled, or its first sentences with a sentence of another story of the
# same split, view and kind of writer among them (as the check's insert draws its stray sentence)
NEGATIVES = ("shuffle", "stray")


def windows(sentences: list[str], size: int, stride: int) -> list[tuple[int, list[str]]]:
    """Every window of ``size`` consecutive sentences starting every ``stride`` sentences, with where it starts, and the
    window that ends where the story ends (placed as the order scorer's runs are); none for a story shorter than
    ``size``."""
    return [(start, sentences[start:start + size]) for start in textlib.window_starts(len(sentences), size, stride)]


def window_pairs(rows: datasets.Dataset, seed: int, size: int, stride: int, negative: str = "shuffle") -> tuple[datasets.Dataset, Counter]:
    """One split's pairs (one per window of each intact story) and what was left out, counted; ``negative``: what a
    window is paired with (:data:`NEGATIVES`)."""
    rng = random.Random(seed)
    stories, left, seen = [], Counter(), set()  # (row, sentences, its windows not seen before)
    for row in rows:
        if row["kind"] != "intact":
            continue
        sentences = textlib.sentences_with_words(textlib.normalize_story(row["text"]))
        found = windows(sentences, size, stride)
        if not found:
            left["too_short"] += 1
        kept = []
        for start, window in found:
            text = " ".join(window)
            if text in seen:
                left["window_seen"] += 1
                continue
            seen.add(text)
            kept.append((start, window))
        stories.append((row, sentences, kept))
    by_writer = defaultdict(list)  # (view, origin) -> indices of stories, where a stray sentence is drawn from
    for index, (row, _, _) in enumerate(stories):
        by_writer[(row["view"], row["origin"])].append(index)
    pairs = []
    for index, (row, sentences, kept) in enumerate(stories):
        for start, window in kept:
            if negative == "shuffle":
                broken = breaks.shuffle(window, rng)
                if broken is None:  # every sentence of the window the same
                    left["cannot_shuffle"] += 1
                    continue
                text = " ".join(broken[0])
            else:
                other = story_pairs.other_story(index, by_writer[(row["view"], row["origin"])], rng)
                if other is None:
                    left["no_other_story"] += 1
                    continue
                # the window's first sentences with a sentence of the other story among them, after the first: as
                # many sentences as the window, as a run of the story with a stray sentence in it reads
                at = rng.randrange(1, size)
                text = " ".join([*window[:at], rng.choice(stories[other][1]), *window[at:size - 1]])
            kind = "window" if negative == "shuffle" else f"window-{negative}"
            pairs.append({"id": f"{row['unit']}/{kind}/{start}", "context": "", "human": " ".join(window),
                          "negative": text, "original": " ".join(window),
                          "techniques": [f"window-{negative}", row["origin"], row["view"], f"at {start} of {len(sentences)}"]})
    return story_pairs.pairs_dataset(pairs), left


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    story_pairs.add_arguments(p)
    p.add_argument("--sentences", type=int, default=5, help="how many consecutive sentences a window holds (default: the five of a run the order scorer reads)")
    p.add_argument("--stride", type=int, default=2, help="a window starts every this many sentences")
    p.add_argument("--negative", choices=NEGATIVES, default="shuffle",
                   help="what a window is paired with: its sentences shuffled, or a stray sentence of another story in it")
    args = p.parse_args(argv)
    if args.sentences < breaks.MIN_SENTENCES:
        p.error(f"--sentences must be at least {breaks.MIN_SENTENCES}: a shorter text carries no shuffle in the check")
    if args.stride < 1:
        p.error("--stride must be at least 1")
    story_pairs.check_arguments(p, args)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    pair_split = functools.partial(window_pairs, size=args.sentences, stride=args.stride, negative=args.negative)
    story_pairs.build("window_pairs", args, {"unit", "kind", "origin", "view", "text"}, pair_split, RECORD)


if __name__ == "__main__":
    main()
