"""Substitution (UNION): swap keywords for antonyms, or a sentence for another story's.

Keywords are the words that appear in ConceptNet (UNION's antonym lexicon and
the ConceptNet-100K concepts). A chosen keyword is replaced by a ConceptNet
Antonym / NotDesires / NotCapableOf / NotHasProperty target of the same part
of speech, inflected like the original; a keyword without one is replaced by
another keyword of the same Penn POS tag, drawn by its corpus frequency. An
article before a replaced word is made to agree with it ("an friend" would be a
cue that no human story has).
"""
from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import random
from collections import Counter
from pathlib import Path
from typing import Iterable

import inflect
from lemminflect import getAllLemmas, getInflection
from wordfreq import word_frequency

from storyeval.checkpoints import resources
from storyeval_training.data.builders.common import InputFormatError, open_lines
from storyeval_training.data.negatives.repetition import Sentences

KEYWORD_FRACTION = 0.15
ANTONYM_RELATIONS = ("/r/Antonym", "/r/NotDesires", "/r/NotCapableOf", "/r/NotHasProperty")
_UPOS = {"NN": "NOUN", "VB": "VERB", "JJ": "ADJ", "RB": "ADV"}


def _upos(tag: str) -> str | None:
    return _UPOS.get(tag[:2])


_ARTICLES = frozenset({"a", "an"})


@functools.lru_cache(maxsize=1)
def _inflect_engine() -> inflect.engine:
    return inflect.engine()


@functools.lru_cache(maxsize=100_000)
def indefinite_article(word: str) -> str:
    """"a" or "an" before ``word``, by its sound ("an hour", "a university"), not its first letter."""
    return _inflect_engine().a(word).split(" ", 1)[0]


@functools.lru_cache(maxsize=100_000)
def _lemmas(token: str, upos: str) -> tuple[str, ...]:
    return getAllLemmas(token).get(upos, ())


def read_antonyms(path, relations: Iterable[str] = ANTONYM_RELATIONS) -> dict[str, list[str]]:
    """``word|||/r/Relation|||target target ...`` -> {word: [single-word targets of ``relations``]}."""
    relations = frozenset(relations)
    antonyms: dict[str, list[str]] = {}
    for lineno, line in open_lines(path):
        if not line.strip():
            continue
        fields = line.split("|||")
        if len(fields) != 3:
            raise InputFormatError(path, lineno, "expected 'word|||/r/Relation|||targets'")
        word, relation, targets = fields
        if relation not in ANTONYM_RELATIONS:
            raise InputFormatError(path, lineno, f"unknown relation {relation!r}")
        if relation not in relations:
            continue
        found = antonyms.setdefault(word, [])
        found.extend(t for t in targets.split() if t.isalpha() and t != word and t not in found)
    return antonyms


def inflected_antonyms(token: str, tag: str, antonyms: dict[str, list[str]]) -> list[str]:
    """Antonyms of ``token`` (as it stands or by its lemma) with the part of speech of Penn ``tag``, inflected to it."""
    upos = _upos(tag)
    if upos is None:
        return []
    options = []
    for lemma in dict.fromkeys((token, *_lemmas(token, upos))):
        for target in antonyms.get(lemma, ()):
            # inflect the target's lemma: targets can be inflected already ("lost", "going"),
            # and inflecting those again gives non-words ("losted", "goinging")
            for target_lemma in getAllLemmas(target).get(upos, ()):
                inflected = getInflection(target_lemma, tag=tag)
                form = inflected[0] if inflected else target_lemma
                # lemminflect inflects by rule, so "poorly" gives "poorliest": keep forms English text uses
                if form != token and form not in options and word_frequency(form, "en") > 0:
                    options.append(form)
    return options


def read_concept_words(paths: Iterable) -> set[str]:
    """Single-word concepts (heads and tails) of ConceptNet ``relation\\thead\\ttail`` triples."""
    words = set()
    for path in paths:
        for lineno, line in open_lines(path):
            fields = line.split("\t")
            if len(fields) != 3:
                raise InputFormatError(path, lineno, "expected 'relation<TAB>head<TAB>tail'")
            words.update(concept for concept in fields[1:] if concept.isalpha())
    return words


@dataclasses.dataclass
class KeywordLexicon:
    """Antonyms, the keyword vocabulary and per-POS keyword frequencies."""

    antonyms: dict[str, list[str]]
    vocabulary: frozenset[str]
    # Penn tag -> (keywords, cumulative counts) for frequency-weighted draws
    by_tag: dict[str, tuple[list[str], list[int]]] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_conceptnet(cls, antonym_path, concept_paths: Iterable = ()) -> "KeywordLexicon":
        antonyms = read_antonyms(antonym_path)
        vocabulary = (set(antonyms) | read_concept_words(concept_paths)) - resources.stopwords()
        return cls(antonyms=antonyms, vocabulary=frozenset(w for w in vocabulary if w.isalpha()))

    @classmethod
    def from_data_dir(cls, data_dir) -> "KeywordLexicon":
        lexicon = Path(data_dir) / "lexicon"
        return cls.from_conceptnet(lexicon / "conceptnet_antonym.txt", sorted((lexicon / "conceptnet100k").glob("[tv]*.txt")))

    def is_keyword(self, token: str, tag: str) -> bool:
        """In ConceptNet as it stands or by its lemma ("loved" counts through "love")."""
        if token in self.vocabulary:
            return True
        upos = _upos(tag)
        return upos is not None and any(lemma in self.vocabulary for lemma in _lemmas(token, upos))

    def count_mentions(self, tagged_sentences: Iterable[list[tuple[str, str]]]) -> None:
        """Fill the per-tag frequency tables from a POS-tagged corpus."""
        counts: dict[str, Counter] = {}
        for tagged in tagged_sentences:
            for token, tag in tagged:
                if _upos(tag) and self.is_keyword(token, tag):
                    counts.setdefault(tag, Counter())[token] += 1
        self.by_tag = {}
        for tag, counter in counts.items():
            words = sorted(counter)
            self.by_tag[tag] = (words, list(itertools.accumulate(counter[w] for w in words)))

    def antonym(self, token: str, tag: str, rng: random.Random) -> str | None:
        """A ConceptNet antonym of the same part of speech, inflected like ``token``."""
        options = inflected_antonyms(token, tag, self.antonyms)
        return rng.choice(options) if options else None

    def same_tag_keyword(self, token: str, tag: str, rng: random.Random) -> str | None:
        """Another keyword with the same Penn tag, drawn by corpus frequency."""
        words, cumulative = self.by_tag.get(tag, ([], []))
        if len(words) < 2:
            return None
        for _ in range(10):  # a frequent keyword may draw itself; retry a few times
            word = words[bisect.bisect_right(cumulative, rng.random() * cumulative[-1])]
            if word != token:
                return word
        return None


def substitute_keywords(
    sentences: Sentences, start: int, rng: random.Random, lexicon: KeywordLexicon, tags: list[list[str]] | None = None
) -> Sentences | None:
    """Replace 15% of the keywords after the context (at least one).

    ``tags`` are the Penn tags of ``sentences`` if already computed.
    """
    if tags is None:
        tags = [[tag for _, tag in resources.pos_tag(s)] for s in sentences]
    positions = [
        (i, j)
        for i in range(start, len(sentences))
        for j, token in enumerate(sentences[i])
        if _upos(tags[i][j]) and lexicon.is_keyword(token, tags[i][j])
    ]
    if not positions:
        return None
    count = max(1, round(KEYWORD_FRACTION * len(positions)))
    result = [list(s) for s in sentences]
    changed = False
    for i, j in rng.sample(positions, count):
        token, tag = sentences[i][j], tags[i][j]
        replacement = lexicon.antonym(token, tag, rng) or lexicon.same_tag_keyword(token, tag, rng)
        if replacement is not None:
            result[i][j] = replacement
            if j > 0 and result[i][j - 1].lower() in _ARTICLES:
                article = indefinite_article(replacement)
                result[i][j - 1] = article.capitalize() if result[i][j - 1][0].isupper() else article
            changed = True
    return result if changed else None


def substitute_sentence(sentences: Sentences, start: int, rng: random.Random, pool: list[list[str]]) -> Sentences | None:
    """Replace a random sentence after the context with a sentence from another story."""
    if start >= len(sentences) or not pool:
        return None
    index = rng.randrange(start, len(sentences))
    own = {tuple(s) for s in sentences}
    for _ in range(10):
        other = rng.choice(pool)
        if tuple(other) not in own:
            return sentences[:index] + [list(other)] + sentences[index + 1 :]
    return None


def substitution(
    sentences: Sentences,
    start: int,
    rng: random.Random,
    lexicon: KeywordLexicon,
    pool: list[list[str]],
    tags: list[list[str]] | None = None,
) -> Sentences | None:
    """Keyword-level or sentence-level substitution, at random; the other if the first cannot apply."""
    forms = [
        lambda: substitute_keywords(sentences, start, rng, lexicon, tags),
        lambda: substitute_sentence(sentences, start, rng, pool),
    ]
    if rng.random() < 0.5:
        forms.reverse()
    for form in forms:
        result = form()
        if result is not None:
            return result
    return None
