"""A story scored against shuffled copies of itself (modern_text.md, C1).

Across different stories a score may follow style, generator or length rather than coherence. A story's copies with
its sentences shuffled share its words, style and length and lack only its order: ``logit(s(x)) - weight *
mean_j logit(s(x_j))`` is how far the story scores above them, the rest held constant (``weight`` 1: the margin
alone; between 0 and 1: part way back to the plain score, whose ranking its logit keeps).
"""
from __future__ import annotations

import hashlib
import math
import random

from storyeval.text import split_sentences

COPIES = 4
# the scorers round their sigmoid to float32, so a score may be exactly 0 or 1: clipped before the logit
CLIP = 1e-6


def shuffled_copies(text: str, copies: int = COPIES) -> list[str]:
    """``copies`` shuffles of ``text``'s sentences, none in the text's own order, seeded by the text itself so that
    a text gets the same copies in every run. A text of fewer than two sentences has no shuffle: ValueError."""
    sentences = split_sentences(text)
    if len(sentences) < 2:
        raise ValueError(f"a text of {len(sentences)} sentence(s) has no shuffled copy: {text[:60]!r}")
    rng = random.Random(int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big"))
    own = list(range(len(sentences)))
    out = []
    for _ in range(copies):
        order = own[:]
        while order == own:
            rng.shuffle(order)
        out.append(" ".join(sentences[i] for i in order))
    return out


def logit(score: float) -> float:
    score = min(max(score, CLIP), 1 - CLIP)
    return math.log(score / (1 - score))


def contrasted(score: float, copy_scores: list[float], weight: float) -> float:
    """The story's logit less ``weight`` times the mean logit of its shuffled copies."""
    return logit(score) - weight * sum(logit(s) for s in copy_scores) / len(copy_scores)
