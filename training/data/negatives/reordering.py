"""Reordering (UNION): shuffle the sentences after the context."""
from __future__ import annotations

import random

from storyeval_training.data.negatives.repetition import Sentences


def reorder(sentences: Sentences, start: int, rng: random.Random) -> Sentences | None:
    """Shuffle ``sentences[start:]`` so that the order really changes.

    A plain shuffle of n sentences returns the same order with probability
    1/n! (1/24 for a ROC story), so we reshuffle until it differs; ``None``
    when fewer than two distinct sentences can move.
    """
    body = sentences[start:]
    if len({tuple(s) for s in body}) < 2:
        return None
    shuffled = list(body)
    while shuffled == body:
        rng.shuffle(shuffled)
    return sentences[:start] + shuffled
