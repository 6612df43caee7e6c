"""Text utilities shared by the scorers and the training data pipeline.

Stories follow the UNION papers' conventions: lower-cased, Penn-Treebank
tokenised ("did n't", "[MALE] 's"), with person names replaced by
``[MALE]``, ``[FEMALE]`` or ``[NEUTRAL]``.
"""
from __future__ import annotations

import calendar
import functools
import re
from pathlib import Path

from nltk.tokenize import TreebankWordTokenizer

from storyeval.checkpoints import resources
from storyeval.inputs import SENTENCE_SEPARATOR, has_words

NAME_PLACEHOLDERS = ("[MALE]", "[FEMALE]", "[NEUTRAL]")
# any case: some corpora lower-case their placeholders ("[male]"); tokenize restores the canonical form
_PLACEHOLDER_RE = re.compile(r"(\[(?:MALE|FEMALE|NEUTRAL)\])", re.IGNORECASE)
_TREEBANK = TreebankWordTokenizer()


def split_sentences(text: str) -> list[str]:
    """Split a story into sentences.

    Text that already marks sentences with ``</s>`` (the plot-guided releases)
    is split there; anything else goes through NLTK's punkt model.
    """
    if SENTENCE_SEPARATOR in text:
        parts = text.split(SENTENCE_SEPARATOR)
    else:
        resources.require_nltk("punkt_tab")
        from nltk.tokenize import sent_tokenize

        parts = sent_tokenize(text)
    return [p.strip() for p in parts if p.strip()]


def last_sentences(text: str, count: int) -> str:
    """The text's last ``count`` sentences (all of a shorter text), as one text: what an ending scorer reads of a story
    (:mod:`storyeval.scoring.ending`). Where they are punctuation alone (a closing `` ... ``), which cannot be scored,
    the last ``count`` that have words in them."""
    return _last_with_words(split_sentences(text), count)


def opening_and_ending(text: str, count: int) -> str:
    """The text's first sentence and the last ``count`` after it (as :func:`last_sentences` finds them), as one text:
    what an ending scorer that reads where the story began reads of it (``ending_reads: "opening_ending"``). A text of
    ``count + 1`` sentences or fewer is read whole."""
    sentences = split_sentences(text)
    return " ".join(part for part in (*sentences[:1], _last_with_words(sentences[1:], count)) if part)


def _last_with_words(sentences: list[str], count: int) -> str:
    tail = " ".join(sentences[-count:])
    return tail if has_words(tail) else " ".join([sentence for sentence in sentences if has_words(sentence)][-count:])


def sentences_with_words(text: str) -> list[str]:
    """The text's sentences that have words in them: a "sentence" of punctuation alone ("...") has none."""
    return [sentence for sentence in split_sentences(text) if has_words(sentence)]


def distinct_sentences(text: str) -> list[str]:
    """The text's sentences that have words in them, each once, in order of first appearance: what a topic scorer
    compares (:mod:`storyeval.scoring.topic`)."""
    return list(dict.fromkeys(sentences_with_words(text)))


def window_starts(count: int, size: int, stride: int) -> list[int]:
    """Where each window of ``size`` of ``count`` items starts: one every ``stride`` items, and the last ending where
    the items end (none when there are fewer than ``size``)."""
    if count < size:
        return []
    starts = list(range(0, count - size + 1, stride))
    return starts if starts[-1] == count - size else [*starts, count - size]


def neighbouring_pairs(text: str) -> list[str]:
    """Every two neighbouring sentences of the text that have words in them, each as one text, in order: what a
    neighbour scorer reads of a story (:class:`storyeval.scoring.ending.NeighbourMixScorer`)."""
    sentences = sentences_with_words(text)
    return [f"{first} {second}" for first, second in zip(sentences, sentences[1:])]


def sentence_runs(text: str, count: int) -> list[str]:
    """Every run of ``count`` consecutive sentences of the text that have words in them, each as one text, each run
    starting on the last sentence of the one before (so that every two neighbours share a run) and the last one ending
    where the text ends: what an order scorer reads of a story (``ending_reads: "runs"``). A text of ``count``
    sentences or fewer is one run."""
    if count < 2:
        raise ValueError(f"a run needs at least two sentences, got {count}")
    sentences = sentences_with_words(text)
    if len(sentences) <= count:
        return [" ".join(sentences)] if sentences else []
    return [" ".join(sentences[start:start + count]) for start in window_starts(len(sentences), count, count - 1)]


def tokenize(sentence: str, lowercase: bool = True) -> list[str]:
    """Penn-Treebank tokens, keeping name placeholders whole (and upper-case)."""
    tokens: list[str] = []
    for piece in _PLACEHOLDER_RE.split(sentence):
        if piece.upper() in NAME_PLACEHOLDERS:
            tokens.append(piece.upper())
        elif piece.strip():
            words = _TREEBANK.tokenize(piece)
            # Treebank writes quotes as `` and ''; the corpora here do too.
            tokens.extend(w.lower() if lowercase else w for w in words)
    return tokens


@functools.lru_cache(maxsize=1)
def _month_and_day_names() -> frozenset[str]:
    names = [m.lower() for m in calendar.month_name[1:]]
    names += [d.lower() for d in calendar.day_name]
    return frozenset(names)


# first names that lower-cased text masks although they are also words ("tom", "jack"): built from
# cased text by `python -m storyeval_training.data.lowercase_names`, and kept beside the NLTK data access it is built with
LOWERCASE_NAMES_FILE = Path(resources.__file__).resolve().parent / "lowercase_names.txt"


@functools.lru_cache(maxsize=1)
def lowercase_names() -> frozenset[str]:
    lines = LOWERCASE_NAMES_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


@functools.lru_cache(maxsize=200_000)
def name_gender(token: str, cased: bool) -> str | None:
    """The placeholder for ``token`` if it is a person's first name, else None.

    The NLTK ``names`` corpus gives the gender: male only -> [MALE], female
    only -> [FEMALE], both -> [NEUTRAL]. In lower-cased text a name cannot be
    told from a word by its capital, so names that are also English words in
    lemminflect's lexicon ("will", "mark", "hope") are left alone, except those
    that cased text writes capitalised nearly always (:func:`lowercase_names`:
    "tom", "jack"); month and day names and stopwords are always left alone. In
    cased text only capitalised tokens count.
    """
    if cased and not token[:1].isupper():
        return None
    word = token.lower()
    male, female = resources.first_names()
    in_male, in_female = word in male, word in female
    if not (in_male or in_female):
        return None
    if word in resources.stopwords() or word in _month_and_day_names():
        return None
    if not cased:
        from lemminflect import getAllLemmas

        if getAllLemmas(word) and word not in lowercase_names():
            return None
    if in_male and in_female:
        return "[NEUTRAL]"
    return "[MALE]" if in_male else "[FEMALE]"


def is_cased(sentence: str) -> bool:
    """Whether a sentence keeps its capitals, so that only capitalised words can be names.
    Placeholders do not count: "[MALE] met kate ." is lower-cased text."""
    return not _PLACEHOLDER_RE.sub(" ", sentence).islower()


def delexicalize(tokens: list[str], cased: bool = False) -> list[str]:
    """Replace person names with [MALE]/[FEMALE]/[NEUTRAL] placeholders."""
    return [name_gender(t, cased) or t for t in tokens]


_replace_names = delexicalize  # for normalize_story, whose flag of that name shadows the function


def count_words(sentence: str) -> int:
    """Whitespace tokens with a letter or digit (punctuation is free)."""
    return sum(any(c.isalnum() for c in token) for token in sentence.split())


def truncate_sentences(sentences: list[str], max_words: int) -> list[str]:
    """Keep whole sentences while the story has at most ``max_words`` words (:func:`count_words`).

    The first sentence is always kept, so a story never becomes empty.
    """
    kept, count = [], 0
    for sentence in sentences:
        n = count_words(sentence)
        if kept and count + n > max_words:
            break
        kept.append(sentence)
        count += n
    return kept


def normalize_story(story: str, delexicalize: bool = True) -> str:
    """The form the checkpoints were trained on: lower-cased Treebank tokens, names delexicalised (if asked)."""
    sentences = split_sentences(story) or [story]
    out = []
    for sentence in sentences:
        tokens = tokenize(sentence, lowercase=False)
        if delexicalize:
            tokens = _replace_names(tokens, cased=is_cased(sentence))
        out.append(" ".join(t if t in NAME_PLACEHOLDERS else t.lower() for t in tokens))
    return " ".join(out)


def leakage_key(text: str) -> str:
    """Normalised first sentence, used to match stories across corpora.

    Lower-cased, tokenised, with names and name placeholders folded into one
    symbol and punctuation dropped, so "Ken was driving." in one corpus and
    "[MALE] was driving ." in another give the same key.
    """
    sentences = split_sentences(text)
    if not sentences:
        return ""
    first = sentences[0]
    male, female = resources.first_names()
    # Fold every first name, even those that are also words ("ken"): a missed
    # leak costs more here than a spurious match.
    tokens = [t.lower() for t in tokenize(first, lowercase=False)]
    tokens = ["<name>" if t in male or t in female or t.upper() in NAME_PLACEHOLDERS else t for t in tokens]
    return " ".join(t for t in tokens if t == "<name>" or any(c.isalnum() for c in t))
