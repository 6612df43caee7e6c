"""Repetition (UNION): repeat an N-gram inside a sentence, or a whole sentence.

Every technique in this package takes ``sentences`` (a list of token lists),
``start`` (sentences before it are the leading context: read, never changed)
and a ``random.Random``, and returns a new list or ``None`` when it cannot apply.
"""
from __future__ import annotations

import random

Sentences = list[list[str]]
MAX_NGRAM = 4


def _words_end(tokens: list[str]) -> int:
    """Index after the last word, so the final punctuation stays last."""
    end = len(tokens)
    while end > 0 and not any(c.isalnum() for c in tokens[end - 1]):
        end -= 1
    return end


def repeat_ngram(sentences: Sentences, start: int, rng: random.Random) -> Sentences | None:
    """Repeat an N-gram (N = 1..4) of a random sentence right after itself."""
    candidates = [i for i in range(start, len(sentences)) if _words_end(sentences[i]) > 0]
    if not candidates:
        return None
    index = rng.choice(candidates)
    tokens = sentences[index]
    end = _words_end(tokens)
    n = rng.randint(1, min(MAX_NGRAM, end))
    first = rng.randint(0, end - n)
    repeated = tokens[: first + n] + tokens[first : first + n] + tokens[first + n :]
    return sentences[:index] + [repeated] + sentences[index + 1 :]


def repeat_sentence(sentences: Sentences, start: int, rng: random.Random) -> Sentences | None:
    """Copy a random sentence over the one that follows it; the count stays the same."""
    # neither the copied nor the overwritten sentence is the context, as in UNION's own sampler
    sources = [i for i in range(start, len(sentences) - 1) if sentences[i] != sentences[i + 1]]
    if not sources:
        return None
    i = rng.choice(sources)
    return sentences[: i + 1] + [list(sentences[i])] + sentences[i + 2 :]


def repetition(sentences: Sentences, start: int, rng: random.Random) -> Sentences | None:
    """One of the two repetition forms, at random; the other if the first cannot apply."""
    forms = [repeat_ngram, repeat_sentence]
    rng.shuffle(forms)
    for form in forms:
        result = form(sentences, start, rng)
        if result is not None:
            return result
    return None
