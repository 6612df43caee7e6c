"""Plots extracted from story text, for stories that come without one.

ROCStories: storylines in the style of Yao et al. (2019), a few keyword phrases
per sentence. Yao et al. used RAKE; here the maintained ``yake`` package ranks
the phrases (one or two words) of each sentence on its own, with NLTK's
English stopwords; a phrase sharing a word with a better one is dropped, and
name placeholders (``[MALE]``) are never keywords.

WritingPrompts: an approximation of the SRL plots of Fan et al. (2019) built
from POS tags alone. For every verb of a sentence it emits, in order,

* ARG0: the nearest noun phrase or pronoun before the verb, searched back to
  the previous verb;
* the verb itself;
* ARG1: the first noun phrase after the verb, searched up to the next verb or
  clause punctuation.

A phrase shared by two verbs ("let *you* know") is written once, so a sentence
reads like the release's ``wp_valid.source``: ``you  know  our office
received  a crank call``. What real SRL does and this does not:

* roles come from position only: a passive subject is still ARG0, and no
  ARG2..ARG5 or ARGM (time, place, manner, negation) is ever produced;
* arguments are bare noun-phrase chunks (determiner, possessives, adjectives,
  numbers, nouns): no prepositional phrases ("from this number"), clausal or
  infinitival arguments ("to see anymore"), adjective complements or
  relative clauses;
* no implicit arguments: the controller of an infinitive ("I wanted to *let*")
  or the shared subject of coordinated verbs gets no ARG0;
* no coreference and no predicate sense; auxiliaries (have / do before another
  verb) and every form of *be* are dropped rather than analysed, so copular
  sentences ("it was green") give no predicate;
* the tagger's mistakes propagate (a noun tagged as a verb becomes a predicate).
"""
from __future__ import annotations

import functools

from storyeval import text as textlib
from storyeval.checkpoints import resources

DEFAULT_KEYWORDS_PER_SENTENCE = 3
MAX_KEYWORD_WORDS = 2  # ROC storylines are single words and short phrases
_BE_FORMS = frozenset({"be", "am", "is", "are", "was", "were", "been", "being", "'s", "'re", "'m"})
_AUXILIARY_FORMS = _BE_FORMS | {"have", "has", "had", "having", "'ve", "'d", "do", "does", "did"}
# an ARG1 search stops here: past it the words belong to another clause
_CLAUSE_BREAKS = frozenset({",", ";", ":", ".", "!", "?", "--", "-", "``", "''", '"'})
_NP_MODIFIER_TAGS = ("DT", "PDT", "PRP$", "POS", "CD", "JJ", "JJR", "JJS")
_NOUN_TAGS = ("NN", "NNS", "NNP", "NNPS")
_CHUNK_TAGS = frozenset(_NP_MODIFIER_TAGS + _NOUN_TAGS)
_PRONOUN_TAGS = ("PRP", "EX")


@functools.lru_cache(maxsize=8)
def _keyword_extractor(top: int):
    import yake

    # ask for more than needed: phrases overlapping a better one are dropped afterwards
    return yake.KeywordExtractor(lan="en", n=MAX_KEYWORD_WORDS, top=2 * top, stopwords=set(resources.stopwords()))


def extract_keywords(sentence: str, max_keywords: int = DEFAULT_KEYWORDS_PER_SENTENCE) -> list[str]:
    """The ``max_keywords`` best yake phrases of one sentence, lower-cased, in sentence order."""
    if max_keywords < 1:
        raise ValueError(f"max_keywords must be positive, got {max_keywords}")
    for placeholder in textlib.NAME_PLACEHOLDERS:
        # a delexicalised name says nothing about the plot; the comma keeps its neighbours from pairing up
        sentence = sentence.replace(placeholder, " , ")
    text = " ".join(sentence.lower().split())
    ranked = _keyword_extractor(max_keywords).extract_keywords(text)
    # yake ties are common on short texts: break them by position so the result is stable
    best = sorted(ranked, key=lambda pair: (round(float(pair[1]), 12), _position(text, pair[0]), pair[0]))
    kept: list[str] = []
    for phrase, _ in best:
        if len(kept) == max_keywords:
            break
        # "bob" adds nothing next to "bob tried", nor "man calling" next to "fedex man"
        if not any(set(phrase.split()) & set(other.split()) for other in kept):
            kept.append(phrase)
    return sorted(kept, key=lambda phrase: _position(text, phrase))


def _position(text: str, phrase: str) -> int:
    index = f" {text} ".find(f" {phrase} ")
    return index if index >= 0 else len(text)


def extract_storyline(sentences: list[str], max_keywords_per_sentence: int = DEFAULT_KEYWORDS_PER_SENTENCE) -> list[list[str]]:
    """A ROC-style storyline: one list of keyword phrases per sentence (possibly empty)."""
    return [extract_keywords(sentence, max_keywords_per_sentence) for sentence in sentences]


def _noun_phrases(tagged: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """[start, end) spans of noun-phrase chunks ("our ship 's robotic arm", "a crank call") and pronouns."""
    spans, i = [], 0
    while i < len(tagged):
        if tagged[i][1] in _PRONOUN_TAGS:
            spans.append((i, i + 1))
            i += 1
            continue
        j = i
        while j < len(tagged) and tagged[j][1] in _CHUNK_TAGS and not (j == i and tagged[j][1] == "POS"):
            j += 1
        nouns = [k for k in range(i, j) if tagged[k][1] in _NOUN_TAGS]
        if nouns:  # a chunk ends at its last noun: "the big" alone is no chunk
            spans.append((i, nouns[-1] + 1))
            i = nouns[-1] + 1
        else:
            i = max(j, i + 1)
    return spans


def _is_auxiliary(tagged: list[tuple[str, str]], index: int) -> bool:
    """A form of be / have / do followed (past adverbs and negation) by another verb."""
    if tagged[index][0].lower() not in _AUXILIARY_FORMS:
        return False
    for token, tag in tagged[index + 1 :]:
        if tag.startswith("VB"):
            return True
        if not (tag.startswith("RB") or token.lower() in ("n't", "not")):
            return False
    return False


_PLACEHOLDER_STAND_INS = {"[MALE]": "John", "[FEMALE]": "Mary", "[NEUTRAL]": "Alex"}


def verb_argument_plot(sentence: str) -> list[str]:
    """One sentence's ``[ARG0] verb [ARG1]`` phrases, in sentence order (see the module docstring)."""
    tokens = textlib.tokenize(sentence, lowercase=False)
    if not tokens:
        return []
    # the tagger calls a lower-cased "i" an adverb or a verb (the corpora here are lower-cased), and a
    # name placeholder sometimes a verb: it tags stand-ins, the plot keeps the tokens
    stand_ins = {"i": "I", **_PLACEHOLDER_STAND_INS}
    tagged = resources.pos_tag([stand_ins.get(token, token) for token in tokens])
    tagged = [(token, tag) for token, (_, tag) in zip(tokens, tagged)]
    verbs = [
        i
        for i, (token, tag) in enumerate(tagged)
        if tag.startswith("VB") and token.lower() not in _BE_FORMS and not _is_auxiliary(tagged, i)
    ]
    phrases = _noun_phrases(tagged)
    items: list[tuple[int, int]] = []  # token spans, so a shared argument is written once
    for n, verb in enumerate(verbs):
        previous_verb = verbs[n - 1] if n else -1
        next_verb = verbs[n + 1] if n + 1 < len(verbs) else len(tagged)
        arg0 = next((span for span in reversed(phrases) if previous_verb < span[0] and span[1] <= verb), None)
        stop = next((i for i in range(verb + 1, next_verb) if tagged[i][0] in _CLAUSE_BREAKS), next_verb)
        arg1 = next((span for span in phrases if verb < span[0] and span[1] <= stop), None)
        for span in (arg0, (verb, verb + 1), arg1):
            if span is not None and span not in items:
                items.append(span)
    return [" ".join(tokens[start:end]) for start, end in sorted(items)]


def extract_verb_argument_plot(sentences: list[str]) -> list[list[str]]:
    """A WP-style plot: one list of verb / argument phrases per sentence (possibly empty)."""
    return [verb_argument_plot(sentence) for sentence in sentences]


def extract_plot(dataset: str, sentences: list[str]) -> list[list[str]]:
    """The plot the paper used for ``dataset``: storylines for 'roc', verb-argument plots for 'wp'."""
    if dataset == "roc":
        return extract_storyline(sentences)
    if dataset == "wp":
        return extract_verb_argument_plot(sentences)
    raise KeyError(f"no plot extractor for dataset {dataset!r}; choose 'roc' or 'wp'")
