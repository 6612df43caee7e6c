"""Pairs of two neighbouring sentences of a story against the first of them followed by a sentence of another story:
what teaches a scorer to notice a stray sentence, with the text it reads of the same size on both sides.

    python -m storyeval_training.data.neighbour_pairs --stories runs/modern-r2/stories --output-dir runs/neighbours/pairs

The input is the ``stories`` folder of :mod:`storyeval_training.data.modern_breaks`; only its intact stories are read,
of the training and validation splits (the test split is the check's report). Each story is normalised as the
checkpoints were trained, split into sentences, and gives one pair at a seeded position ``i``: ``human`` its sentences
``i - 1`` and ``i``, ``negative`` its sentence ``i - 1`` followed by a sentence drawn from another story of the same
split, view and kind of writer (a person's or a model's), as the check's ``insert`` draws its stray sentence. Both
sides are two sentences, so neither length nor the writer's style tells them apart. A story of fewer than four
sentences (the checks' own bound) is left out and counted.

``--with-repeats`` adds a second pair per story at the same position, its ``negative`` sentence ``i - 1`` said twice:
a scorer taught only stray sentences prefers a sentence as its own neighbour, so a repeated sentence raised its score
(first_checks.md, E2). ``--with-swaps`` adds one more, the two neighbours in the wrong order (E4: it did not move the
shuffle check, and shipped nothing).
The stray pairs are the same with or without them.
"""
from __future__ import annotations

import argparse
import functools
import random
from collections import Counter, defaultdict

import datasets

from storyeval import text as textlib
from storyeval_training.data import story_pairs
from storyeval_training.data.breaks import MIN_SENTENCES

RECORD = "neighbour_pairs.json"


def neighbour_pairs(rows: datasets.Dataset, seed: int, repeats: bool = False, swaps: bool = False) -> tuple[datasets.Dataset, Counter]:
    """One split's pairs (one per intact story that qualifies, and one more for each of ``repeats`` and ``swaps``) and
    what was left out, counted."""
    rng = random.Random(seed)
    stories = []  # (unit, view, origin, sentences)
    left = Counter()
    for row in rows:
        if row["kind"] != "intact":
            continue
        sentences = textlib.split_sentences(textlib.normalize_story(row["text"]))
        if len(sentences) < MIN_SENTENCES:
            left["too_short"] += 1
        else:
            stories.append((row["unit"], row["view"], row["origin"], sentences))
    by_writer = defaultdict(list)  # (view, origin) -> story indices
    for index, (_, view, origin, _) in enumerate(stories):
        by_writer[(view, origin)].append(index)
    pairs = []
    for index, (unit, view, origin, sentences) in enumerate(stories):
        other = story_pairs.other_story(index, by_writer[(view, origin)], rng)
        if other is None:
            left["no_other_story"] += 1
            continue
        stray = rng.choice(stories[other][3])
        at = rng.randint(1, len(sentences) - 1)
        pairs.append({"id": f"{unit}/neighbour/{at}", "context": "", "human": f"{sentences[at - 1]} {sentences[at]}",
                      "negative": f"{sentences[at - 1]} {stray}", "original": f"{sentences[at - 1]} {sentences[at]}",
                      "techniques": ["neighbour", origin, view, f"at {at} of {len(sentences)}"]})
        stray_pair = pairs[-1]
        if repeats:
            pairs.append({**stray_pair, "id": f"{unit}/repeat/{at}", "negative": f"{sentences[at - 1]} {sentences[at - 1]}",
                          "techniques": ["repeat", origin, view, f"at {at} of {len(sentences)}"]})
        if swaps:
            pairs.append({**stray_pair, "id": f"{unit}/swap/{at}", "negative": f"{sentences[at]} {sentences[at - 1]}",
                          "techniques": ["swap", origin, view, f"at {at} of {len(sentences)}"]})
    return story_pairs.pairs_dataset(pairs), left


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    story_pairs.add_arguments(p)
    p.add_argument("--with-repeats", action="store_true", help="also a pair per story against its sentence said twice")
    p.add_argument("--with-swaps", action="store_true", help="also a pair per story against the two neighbours swapped")
    args = p.parse_args(argv)
    story_pairs.check_arguments(p, args)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    pair_split = functools.partial(neighbour_pairs, repeats=args.with_repeats, swaps=args.with_swaps)
    story_pairs.build("neighbour_pairs", args, {"unit", "kind", "origin", "view", "text"}, pair_split, RECORD)


if __name__ == "__main__":
    main()
