"""Hand-built features of a (context, continuation) pair, after Sagarkar et al. (2018).

Each feature family is a function over tokenised text; :class:`FeatureExtractor`
stacks the enabled families into one vector per pair, so the paper's feature
ablation is a matter of switches.

Entity mentions approximate CoreNLP's coreference with what runs offline:
person mentions are name placeholders (``[MALE]``...), NLTK first names and
personal pronouns; other mentions are nouns (NLTK POS tags on the continuation).
A mention is *old* if the context already has it (the same name or placeholder,
a pronoun whose gender/number the context can resolve, a noun whose lemma
occurs in the context) and *new* otherwise; *new names* are names or
placeholders absent from the context. Two different people delexicalised to the
same placeholder cannot be told apart.

Feature versions (a checkpoint's ``scorer_config.json`` names its own; none means 1):

* 1 -- IDF looks Treebank clitics up on their own, so "n't" counts as a rare word,
  and the PMI scores divide by word counts that include placeholders, clitics and
  numbers, which the co-occurrence statistics never hold.
* 2 -- IDF rejoins clitics to their word ("did n't" -> "didn't", as wordfreq counts
  it) and PMI counts only the words its statistics are fitted on.

The ``encoder`` group (:data:`LEARNED_GROUPS`) is the logit of a trained cross-encoder
(:mod:`storyeval.models.continuation.encoder`), given to the extractor as ``encoder``; the
count-based groups need no model.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from lemminflect import getLemma

from storyeval import text as textlib
from storyeval.checkpoints import resources
from storyeval.models.continuation.cooccurrence import WINDOWS, CooccurrenceStats
from storyeval.models.continuation.ngram_lm import NgramLM

_PRONOUN_GROUPS = {
    "male": {"he", "him", "his", "himself"},
    "female": {"she", "her", "hers", "herself"},
    "plural": {"they", "them", "their", "theirs", "themselves"},
    "first": {"i", "me", "my", "mine", "myself"},
    "first_plural": {"we", "us", "our", "ours", "ourselves"},
    "second": {"you", "your", "yours", "yourself"},
}
_PRONOUN_GROUP = {p: g for g, ps in _PRONOUN_GROUPS.items() for p in ps}
_GROUP_ANTECEDENTS = {"male": {"[MALE]", "[NEUTRAL]"}, "female": {"[FEMALE]", "[NEUTRAL]"}}
MIN_FREQUENCY = 1e-8  # wordfreq's floor for unseen words, so IDF stays finite
FEATURE_VERSION = 2
FEATURE_VERSIONS = (1, 2)
CLITICS = frozenset({"n't", "'s", "'m", "'re", "'ve", "'ll", "'d"})  # what Treebank splits off the word before


@functools.lru_cache(maxsize=200_000)
def is_word(token: str) -> bool:
    """Whether a token has a letter or digit; cached, since the same tokens recur in every batch."""
    return any(c.isalnum() for c in token)


def words(tokens: list[str]) -> list[str]:
    return [t for t in tokens if is_word(t)]


def cooccurrence_words(tokens: list[str]) -> list[str]:
    """The words co-occurrence statistics count: alphabetic, not stopwords (no placeholders, clitics or numbers)."""
    stop = resources.stopwords()
    return [t for t in tokens if t.isalpha() and t not in stop]


def idf_words(tokens: list[str]) -> list[str]:
    """Words for the IDF lookup, clitics rejoined to their word ("ca n't" -> "can't"); placeholders left out."""
    joined: list[list[str]] = []
    for token in tokens:
        if joined and token in CLITICS:
            joined[-1].append(token)
        else:
            joined.append([token])
    return ["".join(parts) for parts in joined if parts[0] not in textlib.NAME_PLACEHOLDERS and is_word(parts[0])]


def length_features(context: list[str], continuation: list[str]) -> list[float]:
    """[continuation length in words, that length / context length]."""
    n_cont, n_ctx = len(words(continuation)), len(words(context))
    return [float(n_cont), n_cont / max(n_ctx, 1)]


@functools.lru_cache(maxsize=200_000)
def idf(word: str) -> float:
    """-ln of the word's frequency in wordfreq's English corpus (Wikipedia, books, web, subtitles...)."""
    from wordfreq import word_frequency

    return -math.log(max(word_frequency(word, "en"), MIN_FREQUENCY))


def idf_features(continuation: list[str], version: int = FEATURE_VERSION) -> list[float]:
    """[mean IDF of the continuation's words]; NaN (missing) when it has none but placeholders,
    which the model reads as the training mean: 0 would be rarer-than-common by 9 standard deviations."""
    if version == 1:
        ws = [w for w in words(continuation) if w not in textlib.NAME_PLACEHOLDERS]
    else:
        ws = idf_words(continuation)
    return [float(np.mean([idf(w) for w in ws])) if ws else math.nan]


def _person_key(token: str) -> str | None:
    if token in textlib.NAME_PLACEHOLDERS:
        return token
    gender = textlib.name_gender(token, cased=token[:1].isupper())
    return token.lower() if gender else None


@functools.lru_cache(maxsize=100_000)
def _noun_lemma(word: str) -> str:
    lemmas = getLemma(word, upos="NOUN")
    return lemmas[0] if lemmas else word


def mention_features(context: list[str], continuation: list[str], continuation_tags: list[str] | None = None) -> list[float]:
    """[has old, #old, has new, #new, has new name, #new names] mentions in the continuation."""
    lowered_context = [t if t in textlib.NAME_PLACEHOLDERS else t.lower() for t in context]
    context_people = {k for k in map(_person_key, context) if k}
    context_placeholders = {t for t in context if t in textlib.NAME_PLACEHOLDERS}
    context_groups = {_PRONOUN_GROUP[t] for t in lowered_context if t in _PRONOUN_GROUP}
    context_nouns = {_noun_lemma(t) for t in lowered_context}
    if continuation_tags is None:
        continuation_tags = [tag for _, tag in resources.pos_tag(continuation)]
    old = new = new_names = 0
    for token, tag in zip(continuation, continuation_tags):
        word = token if token in textlib.NAME_PLACEHOLDERS else token.lower()
        person = _person_key(token)
        if person is not None:
            if person in context_people:
                old += 1
            else:
                new += 1
                new_names += 1
        elif word in _PRONOUN_GROUP:
            group = _PRONOUN_GROUP[word]
            # a third-person pronoun is old if the context has someone it can refer to
            if group in context_groups or context_placeholders & _GROUP_ANTECEDENTS.get(group, set()) or (group == "plural" and context_people):
                old += 1
            else:
                new += 1
        elif tag.startswith("NN") and word.isalpha():
            if _noun_lemma(word) in context_nouns:
                old += 1
            else:
                new += 1
    return [float(old > 0), float(old), float(new > 0), float(new), float(new_names > 0), float(new_names)]


FEATURE_GROUPS = {
    "length": ["length", "relative_length"],
    "lm": ["lm_score"],
    "idf": ["idf"],
    "pmi": [f"pmi_{w}" for w in WINDOWS] + [f"ppmi_{w}" for w in WINDOWS],
    "mentions": ["has_old_mention", "old_mentions", "has_new_mention", "new_mentions", "has_new_name", "new_names"],
}
# groups read off a trained model; optional, so FEATURE_GROUPS stays the count-based default
LEARNED_GROUPS = {"encoder": ["encoder_logit"]}
ALL_GROUPS = {**FEATURE_GROUPS, **LEARNED_GROUPS}


@dataclasses.dataclass
class FeatureExtractor:
    """Stacks the enabled feature groups; the LM and co-occurrence statistics are fitted on a story corpus."""

    lm: NgramLM | None = None
    cooccurrence: CooccurrenceStats | None = None
    groups: tuple[str, ...] = tuple(FEATURE_GROUPS)
    version: int = FEATURE_VERSION
    encoder: object | None = None  # a ContinuationEncoder (anything with .logits(contexts, candidates)), for the 'encoder' group

    def __post_init__(self):
        if self.version not in FEATURE_VERSIONS:
            raise ValueError(f"unknown feature version {self.version!r}; this storyeval knows {list(FEATURE_VERSIONS)}: upgrade it")
        unknown = set(self.groups) - set(ALL_GROUPS)
        if unknown:
            raise KeyError(f"unknown feature groups {sorted(unknown)}; choose from {list(ALL_GROUPS)}")
        if len(set(self.groups)) != len(self.groups):
            raise ValueError(f"feature groups repeat: {list(self.groups)}")
        if "lm" in self.groups and self.lm is None:
            raise ValueError("the 'lm' feature group needs a fitted NgramLM")
        if "pmi" in self.groups and self.cooccurrence is None:
            raise ValueError("the 'pmi' feature group needs fitted CooccurrenceStats")
        if "encoder" in self.groups and self.encoder is None:
            raise ValueError("the 'encoder' feature group needs a trained ContinuationEncoder")

    @property
    def names(self) -> list[str]:
        """Column names, in the fixed order __call__ builds the columns in, whatever the order of ``groups``."""
        return [name for group in ALL_GROUPS if group in self.groups for name in ALL_GROUPS[group]]

    def __call__(self, contexts: list[list[str]], continuations: list[list[str]], **encoder_options) -> np.ndarray:
        """(pairs, features) float32 matrix for tokenised, lower-cased pairs; ``encoder_options`` (``device``,
        ``dtype``) go to the learned encoder, where there is one."""
        columns: list[np.ndarray] = []
        if "length" in self.groups:
            columns.append(np.array([length_features(c, n) for c, n in zip(contexts, continuations)]))
        if "lm" in self.groups:
            columns.append(np.array(self.lm.score_batch(continuations, contexts))[:, None])
        if "idf" in self.groups:
            columns.append(np.array([idf_features(n, self.version) for n in continuations]))
        if "pmi" in self.groups:
            if self.version == 1:
                stop = resources.stopwords()
                ctx_words = [[w for w in words(c) if w not in stop] for c in contexts]
                cont_words = [[w for w in words(n) if w not in stop] for n in continuations]
            else:
                ctx_words, cont_words = list(map(cooccurrence_words, contexts)), list(map(cooccurrence_words, continuations))
            pmi, ppmi = self.cooccurrence.pair_scores(ctx_words, cont_words)
            columns.append(np.stack([pmi[w] for w in WINDOWS] + [ppmi[w] for w in WINDOWS], axis=1))
        if "mentions" in self.groups:
            columns.append(np.array([mention_features(c, n) for c, n in zip(contexts, continuations)]))
        if "encoder" in self.groups:
            logits = self.encoder.logits([" ".join(c) for c in contexts], [" ".join(n) for n in continuations], **encoder_options)
            columns.append(np.array(logits)[:, None])
        if not columns:
            return np.zeros((len(contexts), 0), dtype=np.float32)
        return np.concatenate(columns, axis=1).astype(np.float32)
