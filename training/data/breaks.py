"""One break of a kind people flag in stories by today's language models, planted in an intact story.

Each function takes a story as a list of sentences (as written: cased, untokenised) and a seeded
``random.Random``, and returns ``(sentences, index)``: the broken copy and the index of the sentence where the
break shows (the sentence an explanation should blame), or None when the story cannot carry this break. The
first sentence (the opening, often the prompt's echo) is never changed, so every break is in the story's body.

* ``insert``: an off-topic sentence from another story (of the same generator, chosen by the caller) is
  inserted in the body;
* ``contradiction``: a later sentence contradicts what the story set up: a character named earlier is renamed
  with a name of the other gender (names of one gender are one token to the scorers, which delexicalise
  them), a number stated earlier is changed, a word is replaced by its ConceptNet antonym, or a verb's polarity
  is flipped (UNION's negation rules);
* ``swap``: two events (sentences at least two apart) change places;
* ``repeat``: a sentence is repeated two sentences later;
* ``cut``: the story stops mid-plot, after 60% of its sentences (only a text that reaches its story's end can
  carry it: a window that stops mid-story is already cut, and cutting it again breaks nothing; see
  :data:`ENDING_KINDS`);
* ``move``: one sentence is moved at least three sentences away, out of its paragraph.

Three more are the checks a researcher runs first on a story metric (issue 86), planted the same way:

* ``shuffle``: every sentence in a seeded order other than the story's (the one kind that may move the opening:
  a researcher shuffles the whole story);
* ``triple``: one body sentence said three times in a row;
* ``half``: only the story's first half (an ending kind, as ``cut``).

``insert``, ``repeat`` and ``triple`` add sentences and ``cut`` and ``half`` remove several, so a broken copy's length differs from
its story's; the benchmark matches lengths across stories, and training balances the kinds that lengthen
against the one that shortens.
"""
from __future__ import annotations

import functools
import random
import re
from typing import Callable, Sequence

from storyeval import text as textlib

MIN_SENTENCES = 4  # fewer sentences cannot carry a break in the body and still read as a story
CUT_SHARE = 0.6
SWAP_DISTANCE = 2
MOVE_DISTANCE = 3
REPEAT_DISTANCE = 2
TRIPLE_TIMES = 3

Broken = tuple[list[str], int]

_NUMBER_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "twenty")
_DIGITS = re.compile(r"^\d{1,4}$")


def insert(sentences: Sequence[str], rng: random.Random, foreign: str) -> Broken | None:
    """``foreign`` (a sentence of another story) inserted before one of the body's sentences after the first."""
    if len(sentences) < MIN_SENTENCES:
        return None
    at = rng.randrange(2, len(sentences))  # after the opening and at least one sentence of the body
    return [*sentences[:at], foreign, *sentences[at:]], at


def swap(sentences: Sequence[str], rng: random.Random) -> Broken | None:
    options = [(i, j) for i in range(1, len(sentences)) for j in range(i + SWAP_DISTANCE, len(sentences))]
    if len(sentences) < MIN_SENTENCES or not options:
        return None
    i, j = rng.choice(options)
    out = list(sentences)
    out[i], out[j] = out[j], out[i]
    return out, i


def repeat(sentences: Sequence[str], rng: random.Random) -> Broken | None:
    if len(sentences) < MIN_SENTENCES:
        return None
    i = rng.randrange(1, len(sentences) - 1)
    at = min(i + REPEAT_DISTANCE, len(sentences))
    return [*sentences[:at], sentences[i], *sentences[at:]], at


def cut(sentences: Sequence[str], rng: random.Random) -> Broken | None:
    """The first 60% of the sentences (at least three, always fewer than all)."""
    keep = max(3, round(CUT_SHARE * len(sentences)))
    if len(sentences) < MIN_SENTENCES or keep >= len(sentences):
        return None
    return list(sentences[:keep]), keep - 1


def move(sentences: Sequence[str], rng: random.Random) -> Broken | None:
    options = [(i, j) for i in range(1, len(sentences)) for j in range(1, len(sentences)) if abs(i - j) >= MOVE_DISTANCE]
    if len(sentences) < MIN_SENTENCES or not options:
        return None
    i, j = rng.choice(options)
    out = list(sentences)
    out.insert(j, out.pop(i))
    return out, j


def shuffle(sentences: Sequence[str], rng: random.Random) -> Broken | None:
    """Every sentence in a seeded order other than the story's; the break shows at the first sentence out of place."""
    if len(sentences) < MIN_SENTENCES or len(set(sentences)) < 2:
        return None
    order = list(range(len(sentences)))
    while order == sorted(order) or [sentences[i] for i in order] == list(sentences):
        rng.shuffle(order)
    out = [sentences[i] for i in order]
    return out, next(i for i, (a, b) in enumerate(zip(out, sentences)) if a != b)


def triple(sentences: Sequence[str], rng: random.Random) -> Broken | None:
    """One body sentence said :data:`TRIPLE_TIMES` times in a row; the break shows at its first repetition."""
    if len(sentences) < MIN_SENTENCES:
        return None
    i = rng.randrange(1, len(sentences))
    return [*sentences[:i + 1], *[sentences[i]] * (TRIPLE_TIMES - 1), *sentences[i + 1:]], i + 1


def half(sentences: Sequence[str], rng: random.Random) -> Broken | None:
    """The first half of the sentences (rounded down, so at least two of four)."""
    if len(sentences) < MIN_SENTENCES:
        return None
    keep = len(sentences) // 2
    return list(sentences[:keep]), keep - 1


# --- contradiction ---


@functools.lru_cache(maxsize=1)
def _detokenizer():
    from nltk.tokenize.treebank import TreebankWordDetokenizer

    return TreebankWordDetokenizer()


@functools.lru_cache(maxsize=1)
def _names_by_gender() -> dict[str, tuple[str, ...]]:
    """Capitalised first names that name only one gender, sorted (so a seed always picks the same)."""
    from storyeval.checkpoints import resources

    male, female = resources.first_names()
    return {"[MALE]": tuple(sorted(n.capitalize() for n in male - female)),
            "[FEMALE]": tuple(sorted(n.capitalize() for n in female - male))}


def _rename(tokens: list[str], earlier: set[str], rng: random.Random) -> list[str] | None:
    """A character named in an earlier sentence given a name of the other gender."""
    names = _names_by_gender()
    sites = [k for k, token in enumerate(tokens)
             if token in earlier and textlib.name_gender(token, cased=True) in ("[MALE]", "[FEMALE]")]
    if not sites:
        return None
    k = rng.choice(sites)
    other = "[FEMALE]" if textlib.name_gender(tokens[k], cased=True) == "[MALE]" else "[MALE]"
    new = rng.choice(names[other])
    return [new if token == tokens[k] else token for token in tokens]


def _renumber(tokens: list[str], earlier: set[str], rng: random.Random) -> list[str] | None:
    """A number stated in an earlier sentence changed where it comes back."""
    sites = [k for k, token in enumerate(tokens) if token in earlier and (token.lower() in _NUMBER_WORDS or _DIGITS.match(token))]
    if not sites:
        return None
    k = rng.choice(sites)
    token = tokens[k]
    if _DIGITS.match(token):
        new = str(int(token) + rng.choice((2, 3, 5)))
    else:
        new = rng.choice([w for w in _NUMBER_WORDS if w != token.lower()])
        new = new.capitalize() if token[:1].isupper() else new
    return [*tokens[:k], new, *tokens[k + 1:]]


def _antonym(tokens: list[str], antonyms: dict[str, list[str]], rng: random.Random) -> list[str] | None:
    import nltk

    from storyeval.checkpoints import resources
    from storyeval_training.data.negatives.substitution import inflected_antonyms

    resources.require_nltk("averaged_perceptron_tagger_eng")
    tagged = nltk.pos_tag(tokens)
    sites = [(k, options) for k, (token, tag) in enumerate(tagged) if token.isalpha() and token.islower()
             for options in [inflected_antonyms(token, tag, antonyms)] if options]
    if not sites:
        return None
    k, options = rng.choice(sites)
    return [*tokens[:k], rng.choice(options), *tokens[k + 1:]]


def _negate(tokens: list[str], rng: random.Random) -> list[str] | None:
    from storyeval_training.data.negatives import negation

    return negation.alter_negation(tokens, rng)


def contradiction(sentences: Sequence[str], rng: random.Random, antonyms: dict[str, list[str]]) -> Broken | None:
    """One sentence after the second changed so that it contradicts the story so far.

    A renamed character or a changed number is tried first (a fact the story stated); where the story repeats
    no name or number, an antonym or a flipped negation in a body sentence. Which sentence, and which of the
    edits that apply there, is seeded."""
    if len(sentences) < MIN_SENTENCES:
        return None
    tokenised = [textlib.tokenize(s, lowercase=False) for s in sentences]
    order = list(range(2, len(sentences)))
    rng.shuffle(order)
    edits: list[Callable[[list[str], int], list[str] | None]] = [
        lambda tokens, j: _rename(tokens, {t for s in tokenised[:j] for t in s}, rng),
        lambda tokens, j: _renumber(tokens, {t for s in tokenised[:j] for t in s}, rng),
    ]
    fallbacks: list[Callable[[list[str], int], list[str] | None]] = [
        lambda tokens, j: _antonym(tokens, antonyms, rng),
        lambda tokens, j: _negate(tokens, rng),
    ]
    rng.shuffle(fallbacks)
    for group in (edits, fallbacks):
        for j in order:
            for edit in group:
                changed = edit(tokenised[j], j)
                if changed is not None and changed != tokenised[j]:
                    out = list(sentences)
                    out[j] = _detokenizer().detokenize(changed)
                    return out, j
    return None


# new kinds go last: a story's seeded draws are made in this order, so the earlier kinds' copies stay as they were
KINDS = ("insert", "contradiction", "swap", "repeat", "cut", "move", "shuffle", "triple", "half")
# the checks a researcher runs first (issue 86): BENCHMARKS.md's "first checks" table
FIRST_CHECKS = ("shuffle", "triple", "half", "insert")
LENGTHENING, SHORTENING = ("insert", "repeat", "triple"), ("cut", "half")
# kinds whose break is at the story's end: planted only in a text that reaches it, and measured against intact texts
# that reach it (an intact window from mid-story has no ending to lose)
ENDING_KINDS = ("cut", "half")
