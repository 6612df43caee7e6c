"""Negation alteration, one of UNION's negative-sampling operations.

UNION (Guan & Huang, EMNLP 2020) builds implausible stories partly by adding
or removing a negation in one sentence; its Table 8 gives a rule per verb type.
Sentences here are lower-cased Penn-Treebank token lists (``did n't``,
``ca n't``), so every short form is two tokens: the (possibly contracted)
auxiliary and a separate ``n't``.

Adding negation, by verb type (short form picked with probability 0.5 where
one exists):

=================  ==============  ==================================
type               example         negated
=================  ==============  ==================================
be                 was / am        was not, was n't / am not
modal              can / will      can not, ca n't / will not, wo n't
have + VBN         had gone        had not gone, had n't gone
do + base verb     did go          did not go, did n't go
base (VB, VBP)     go              do not go, do n't go
3rd person (VBZ)   goes            does not go, does n't go
past (VBD)         went            did not go, did n't go
bare participle    gone            had not gone, had n't gone
gerund (VBG)       going           not going
=================  ==============  ==================================

Choices where the paper is silent, made to keep outputs grammatical:

* Verbs inside a verb group (``could have gone``, ``was going``, ``did go``)
  are negated at their first auxiliary only.
* Base verbs of ``to``-infinitives are skipped (``do not`` would be wrong
  there, and ``to not go`` is not a Table 8 rule).  Other ``VB``-tagged verbs
  are negated only as imperatives (sentence start) or after ``i/you/we/they``,
  which excludes ``let him go`` and coordinated infinitives.
* The bare-participle rule (``gone`` -> ``had not gone``) applies only right
  after a subject-like token (a pronoun or noun), where the tagger has usually
  mislabelled a simple past; elsewhere a ``VBN`` is a modifier.
* Gerunds after a determiner, possessive or adjective (nominal uses) are skipped.
* After an inverted auxiliary (``did you go ?``) only the short form is
  grammatical (``did n't you go ?``); auxiliaries without one (``am i``) are skipped.
* Verbs already next to ``not``/``n't``/``never``/``cannot`` are skipped.

Removing negation undoes these: ``did n't go`` -> ``went``, ``does not like``
-> ``likes``, ``ca n't`` -> ``can``, ``wo n't`` -> ``will``, ``sha n't`` ->
``shall``, ``cannot`` -> ``can``, and any other ``not``/``n't``/``never`` is
deleted.  ``ai n't`` has no single positive form and is left alone, as is
``not`` in ``or not``/``if not``/``why not``.  Negative pronouns and determiners
are negations too: ``nobody``/``nothing``/``nowhere``/``no one`` become
``somebody``/``something``/``somewhere``/``someone``, ``no longer`` becomes
``still`` and ``no`` before a noun or adjective ``some``; a sentence holding any of
them (or ``none``, ``neither``, ``nor``) never gets a second negation added.
Polarity items the removed negation licensed are made positive with it, unless
another negation before them is left: ``any``/``anyone``/``anything`` become ``some``/``someone``/
``something``, ``ever``, ``anymore``, ``any longer`` and ``at all`` are dropped, a
closing ``yet`` is dropped and a closing ``either`` becomes ``too``; a sentence whose
``either``/``yet`` stands elsewhere ("either of them") keeps its negation.
"""
from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence

from lemminflect import getAllInflections, getAllLemmas, getInflection, getLemma

from storyeval.checkpoints import resources

Tagged = Sequence[str]  # Penn tags, parallel to the tokens

NEG_WORDS = frozenset({"not", "n't", "never", "cannot"})
ADVERB_TAGS = frozenset({"RB", "RBR", "RBS"})

# (long form, short form or None); the short form's first token replaces the aux.
_MODALS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "can": (("can", "not"), ("ca", "n't")),
    "could": (("could", "not"), ("could", "n't")),
    "will": (("will", "not"), ("wo", "n't")),
    "would": (("would", "not"), ("would", "n't")),
    "shall": (("shall", "not"), ("sha", "n't")),
    "should": (("should", "not"), ("should", "n't")),
    "may": (("may", "not"), None),
    "might": (("might", "not"), ("might", "n't")),
    "must": (("must", "not"), ("must", "n't")),
}
# Clitic modals: the tagger may call 'd a VBD, so they are matched by word.
_CLITIC_MODALS = frozenset({"'ll", "'d"})
_BE_FINITE = frozenset({"is", "are", "was", "were", "am", "'m", "'re", "'s"})
_BE_SHORT = frozenset({"is", "are", "was", "were"})  # "am n't", "'re n't" do not exist
_HAVE = frozenset({"have", "has", "had", "'ve"})
_DO = frozenset({"do", "does", "did"})
_DO_FOR_TAG = {"VB": "do", "VBP": "do", "VBZ": "does", "VBD": "did"}
_CONTRACTED = {"ca": "can", "wo": "will", "sha": "shall"}

_SUBJECTS = frozenset({"i", "you", "he", "she", "it", "we", "they"})
_PLACEHOLDERS = frozenset({"[male]", "[female]", "[neutral]"})
_NON_3RD_SUBJECTS = frozenset({"i", "you", "we", "they"})
_IMPERATIVE_OPENERS = frozenset({"``", ":", "--", "("})
_NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
_NOT_SUBJECT_TAGS = frozenset({"DT", "PRP$", "IN", "CC", "TO", "WDT", "WRB", "EX"})
_NOMINAL_GERUND_PREV = frozenset({"DT", "PRP$", "POS", "JJ", "JJR", "JJS", "CD"})
_KEEP_NOT_AFTER = frozenset({"or", "if", "why"})
# Negative pronouns and determiners. A sentence holding one gets no second negation ("nobody
# did not come"); the ones with a positive counterpart are flipped instead.
_NEGATIVE_PRONOUNS = {"nobody": "somebody", "nothing": "something", "nowhere": "somewhere"}
_NEGATIVE_WORDS = frozenset({*_NEGATIVE_PRONOUNS, "no", "none", "neither", "nor"})
_NO_BEFORE_TAGS = frozenset({"NN", "NNS", "JJ", "JJR", "JJS", "CD"})  # "no idea", "no more", "no two"

# An edit: replace tokens[start:end] with the given tokens.
Edit = tuple[int, int, tuple[str, ...]]
# An auxiliary: (index of the verb it governs or -1, inverted?, negated forms)
_Aux = tuple[int, bool, list[tuple[str, ...]]]


# --- lexical helpers (cached: the same verbs recur across ~150k sentences) ---


@functools.lru_cache(maxsize=65536)
def _lemma(word: str) -> str | None:
    lemmas = getLemma(word, upos="VERB")
    return lemmas[0] if lemmas else None


@functools.lru_cache(maxsize=65536)
def _inflect(lemma: str, tag: str) -> str | None:
    forms = getInflection(lemma, tag=tag)
    return forms[0] if forms else None


@functools.lru_cache(maxsize=65536)
def _is_known_base_verb(word: str) -> bool:
    """True if lemminflect's lexicon lists ``word`` as a verb lemma."""
    return word in getAllLemmas(word, upos="VERB").get("VERB", ())


@functools.lru_cache(maxsize=65536)
def _finite_tag(word: str, tag: str) -> str:
    """Correct a VB/VBP tag from the word's form: the tagger calls "he ate" VB."""
    if tag not in ("VB", "VBP"):
        return tag
    lemma = _lemma(word)
    if not lemma or lemma == word:
        return tag
    forms = getAllInflections(lemma, upos="VERB")
    for form_tag in ("VBD", "VBZ"):
        if word in forms.get(form_tag, ()):
            return form_tag
    return tag


def _is_base_verb(word: str, tag: str) -> bool:
    # The tagger often misreads a base verb after "did"/"does not" ("like" -> IN).
    if tag in ("VB", "VBP"):
        return _finite_tag(word, tag) == tag
    return tag in ("IN", "NN") and _is_known_base_verb(word)


def _match_case(original: str, new: Sequence[str]) -> tuple[str, ...]:
    """Give ``new``'s first token the capitalisation of the token it replaces."""
    out = list(new)
    if out and len(original) > 1 and original.isupper():
        out = [t.upper() for t in out]
    elif out and original[:1].isupper():
        out[0] = out[0][:1].upper() + out[0][1:]
    return tuple(out)


def _apply(tokens: Sequence[str], edit: Edit) -> list[str]:
    start, end, new = edit
    return [*tokens[:start], *new, *tokens[end:]]


# --- adding negation ---


def _skip_adverbs(lower: Sequence[str], tags: Tagged, i: int, step: int) -> int:
    """First index from ``i`` (moving by ``step``) that is not an adverb or negator."""
    while 0 <= i < len(lower) and (tags[i] in ADVERB_TAGS or lower[i] in NEG_WORDS):
        i += step
    return i


def _near_negation(lower: Sequence[str], i: int, tags: Tagged) -> bool:
    """A negator sits next to token ``i``, possibly across adverbs."""
    for step in (-1, 1):
        j = i + step
        while 0 <= j < len(lower) and (tags[j] in ADVERB_TAGS or lower[j] in NEG_WORDS):
            if lower[j] in NEG_WORDS:
                return True
            j += step
    return False


def _complement(lower: Sequence[str], tags: Tagged, i: int, inverted: bool) -> int:
    """Index of the verb an auxiliary at ``i`` governs (after the subject if inverted)."""
    return _skip_adverbs(lower, tags, i + (2 if inverted else 1), 1)


def _is_inverted(lower: Sequence[str], i: int) -> bool:
    # "did you go ?", "is he ..." -- aux directly followed by a subject.
    return i + 1 < len(lower) and (lower[i + 1] in _SUBJECTS or lower[i + 1] in _PLACEHOLDERS)


def _aux_options(word: str, short: str | None) -> list[tuple[str, ...]]:
    opts = [(word, "not")]
    if short is not None:
        opts.append((short, "n't"))
    return opts


def _auxiliary(lower: Sequence[str], tags: Tagged, i: int) -> _Aux | None:
    """If token ``i`` is an auxiliary: (governed verb or -1, inverted?, negated forms)."""
    w, tag, n = lower[i], tags[i], len(lower)

    def verb_at(j: int, ok: Callable[[str, str], bool]) -> int:
        return j if j < n and ok(lower[j], tags[j]) else -1

    if (tag == "MD" and w in _MODALS) or w in _CLITIC_MODALS:
        long, short = _MODALS.get(w, ((w, "not"), None))
        inverted = _is_inverted(lower, i)
        j = verb_at(_complement(lower, tags, i, inverted), lambda _w, t: t.startswith("VB"))
        opts = [long] + ([short] if short else [])
        return j, inverted, opts
    if w in _BE_FINITE and (w != "'s" or tag.startswith("VB")):
        inverted = _is_inverted(lower, i)
        j = verb_at(_complement(lower, tags, i, inverted), lambda _w, t: t in ("VBG", "VBN", "VBD"))
        return j, inverted, _aux_options(w, w if w in _BE_SHORT else None)
    if w in ("be", "been", "being"):
        # never a site itself, but it makes the following participle part of its group
        j = verb_at(_complement(lower, tags, i, False), lambda _w, t: t in ("VBG", "VBN", "VBD"))
        return (j, False, []) if j >= 0 else None
    if w in _HAVE:
        # "had gone" (tagger may say VBD for regular "-ed" participles)
        j = verb_at(
            _complement(lower, tags, i, False),
            lambda cw, t: t == "VBN" or (t == "VBD" and cw.endswith("ed")),
        )
        if j >= 0:
            return j, False, _aux_options(w, None if w == "'ve" else w)
        return None
    if w in _DO:
        for inverted in (False, True):
            if inverted and not _is_inverted(lower, i):
                continue
            j = verb_at(_complement(lower, tags, i, inverted), _is_base_verb)
            if j >= 0:
                return j, inverted, _aux_options(w, w)
        return None
    return None


def _main_verb_options(lower: Sequence[str], tags: Tagged, i: int) -> list[tuple[str, ...]]:
    """Negated forms for a main verb at ``i`` that heads its own verb group."""
    w, tag = lower[i], _finite_tag(lower[i], tags[i])
    if w in _BE_FINITE or w in _CLITIC_MODALS or w in ("'ve", "ai") or w in _CONTRACTED:
        return []
    if w in _SUBJECTS or w in _PLACEHOLDERS:
        return []  # lower-cased "i" is sometimes tagged VBZ
    p = _skip_adverbs(lower, tags, i - 1, -1)
    prev_word = lower[p] if p >= 0 else None
    prev_tag = tags[p] if p >= 0 else None
    if tag == "VB" and not (
        prev_word is None or prev_word in _IMPERATIVE_OPENERS or prev_word in _NON_3RD_SUBJECTS
    ):
        return []  # "let him go", "sing and dance": "do not" would be ungrammatical
    if tag in ("VB", "VBP"):
        return [("do", "not", w), ("do", "n't", w)]
    if tag in ("VBZ", "VBD"):
        lemma = _lemma(w)
        if not lemma:
            return []
        aux = _DO_FOR_TAG[tag]
        return [(aux, "not", lemma), (aux, "n't", lemma)]
    if tag == "VBN":
        subject_like = (
            prev_word is not None
            and (prev_word in _SUBJECTS or prev_word in _PLACEHOLDERS or prev_tag in _NOUN_TAGS)
        ) or (
            # "billy liked ...": lower-cased names at the start get odd tags (RB, JJ)
            i == 1 and lower[0].isalpha() and tags[0] not in _NOT_SUBJECT_TAGS
        )
        return [("had", "not", w), ("had", "n't", w)] if subject_like else []
    if tag == "VBG":
        return [] if prev_tag in _NOMINAL_GERUND_PREV else [("not", w)]
    return []


def _add_sites(tokens: Sequence[str], tags: Tagged) -> list[tuple[int, list[tuple[str, ...]]]]:
    """Every (index, negated forms) where a negation can be added."""
    lower = [t.lower() for t in tokens]
    dependent: set[int] = set()  # verbs governed by an earlier auxiliary or "to"
    sites: list[tuple[int, list[tuple[str, ...]]]] = []
    for i, (w, tag) in enumerate(zip(lower, tags)):
        if w in NEG_WORDS:
            continue
        if tag == "TO":
            j = _skip_adverbs(lower, tags, i + 1, 1)
            # a real gerund after "to" ("looking forward to going") stays a site;
            # anything else verbal is an infinitive (the tagger may call it VBG)
            if j < len(lower) and tags[j].startswith("VB") and not (
                tags[j] == "VBG" and lower[j].endswith("ing")
            ):
                dependent.add(j)
            continue
        aux = _auxiliary(lower, tags, i)
        if aux is not None:
            j, inverted, opts = aux
            if j >= 0:
                dependent.add(j)
            if i in dependent or not opts:
                continue
            if _near_negation(lower, i, tags) or (j >= 0 and _near_negation(lower, j, tags)):
                continue
            if inverted:
                opts = [o for o in opts if o[-1] == "n't"]
            if opts:
                sites.append((i, opts))
            continue
        if i in dependent or not tag.startswith("VB") or _near_negation(lower, i, tags):
            continue
        opts = _main_verb_options(lower, tags, i)
        if opts:
            sites.append((i, opts))
    return sites


def _choose_addition(tokens: Sequence[str], tags: Tagged, rng: random.Random) -> list[str] | None:
    if any(t.lower() in _NEGATIVE_WORDS for t in tokens):
        return None  # a second negation: "he had no idea" -> "he did not have no idea"
    sites = _add_sites(tokens, tags)
    if not sites:
        return None
    i, opts = sites[rng.randrange(len(sites))]
    # long form first, short form (if any) second: each with probability 0.5
    form = opts[1] if len(opts) > 1 and rng.random() < 0.5 else opts[0]
    return _apply(tokens, (i, i + 1, _match_case(tokens[i], form)))


# --- removing negation ---


def _removal_edits(tokens: Sequence[str], tags: Callable[[], Tagged]) -> list[Callable[[], Edit]]:
    """One thunk per removable negation; tags are only computed if a thunk needs them."""
    lower = [t.lower() for t in tokens]
    edits: list[Callable[[], Edit]] = []
    for k, w in enumerate(lower):
        following = lower[k + 1] if k + 1 < len(lower) else None
        if w in _NEGATIVE_PRONOUNS:
            edits.append(lambda k=k, w=w: (k, k + 1, _match_case(tokens[k], (_NEGATIVE_PRONOUNS[w],))))
        elif w == "no" and following == "one":
            edits.append(lambda k=k: (k, k + 2, _match_case(tokens[k], ("someone",))))
        elif w == "no" and following == "longer":
            edits.append(lambda k=k: (k, k + 2, _match_case(tokens[k], ("still",))))
        elif w == "no" and following is not None:
            # a determiner before a noun or adjective ("no idea" -> "some idea"); "no ," is an answer
            edits.append(lambda k=k: (k, k + 1, _match_case(tokens[k], ("some",))) if tags()[k + 1] in _NO_BEFORE_TAGS else None)
        if w not in NEG_WORDS:
            continue
        prev = lower[k - 1] if k > 0 else None
        if w == "cannot":
            edits.append(lambda k=k: (k, k + 1, _match_case(tokens[k], ("can",))))
        elif w == "never":
            edits.append(lambda k=k: (k, k + 1, ()))
        elif prev == "ai" or (w == "not" and prev in _KEEP_NOT_AFTER):
            continue  # no single positive form / fixed phrase
        elif prev in _CONTRACTED:
            full = (_CONTRACTED[prev],)
            edits.append(lambda k=k, full=full: (k - 1, k + 1, _match_case(tokens[k - 1], full)))
        elif prev in _DO:
            edits.append(lambda k=k: _remove_do_support(tokens, lower, tags(), k))
        else:
            edits.append(lambda k=k: (k, k + 1, ()))
    return edits


def _remove_do_support(tokens: Sequence[str], lower: Sequence[str], tags: Tagged, k: int) -> Edit:
    """``did n't go`` -> ``went``; falls back to deleting the negator alone."""
    d = k - 1
    v = _skip_adverbs(lower, tags, k + 1, 1)
    drop_negator = (k, k + 1, ())
    if v >= len(lower) or lower[v] in NEG_WORDS or not _is_base_verb(lower[v], tags[v]):
        return drop_negator  # "i did n't .", "did n't you go ?"
    if lower[d] == "do":
        verb = lower[v]
    else:
        verb = _inflect(lower[v], "VBZ" if lower[d] == "does" else "VBD")
        if not verb:
            return drop_negator  # "he does like it" is still a grammatical positive
    middle = tuple(tokens[k + 1 : v])  # adverbs between negator and verb stay
    return d, v + 1, _match_case(tokens[d], (*middle, verb))


# Negative-polarity items a removed negation leaves without a licence ("he did n't sleep at all" ->
# "he slept at all"), with the positive form each takes; () drops the word.
_NPI_POSITIVE = {
    "any": ("some",), "anyone": ("someone",), "anybody": ("somebody",), "anything": ("something",),
    "anywhere": ("somewhere",), "anymore": (), "ever": (),
}
_NPI_BEFORE_END = {"yet": (), "either": ("too",)}  # only as a closing adverb ("me either", "not done yet")
_NPI_PHRASES = {("at", "all"): (), ("any", "longer"): (), ("any", "more"): ("some", "more")}
# words that still license the polarity items after them once the removed negation is gone
_LICENSORS = NEG_WORDS | _NEGATIVE_WORDS | {"without", "hardly", "barely", "scarcely"}


def _relicense(tokens: Sequence[str], start: int) -> list[str] | None:
    """``tokens`` with the polarity items after ``start`` made positive where no negation left
    before them licenses them; None where one has no positive form here ("either of them")."""
    lower = [t.lower() for t in tokens]
    licensed = any(w in _LICENSORS for w in lower[:start])  # a negation left earlier still scopes over the rest
    out: list[str] = list(tokens[:start])
    k = start
    while k < len(tokens):
        w, following = lower[k], lower[k + 1] if k + 1 < len(lower) else None
        closing = following is None or not following[:1].isalnum()  # end of sentence or clause
        licensed = licensed or w in _LICENSORS
        if licensed:
            out.append(tokens[k])
        elif (w, following) in _NPI_PHRASES:
            out += _match_case(tokens[k], _NPI_PHRASES[w, following])
            k += 2
            continue
        elif w in _NPI_POSITIVE:
            out += _match_case(tokens[k], _NPI_POSITIVE[w])
        elif w in _NPI_BEFORE_END:
            if not closing:
                return None
            out += _match_case(tokens[k], _NPI_BEFORE_END[w])
        else:
            out.append(tokens[k])
        k += 1
    return out


def _choose_removal(
    tokens: Sequence[str], tags: Callable[[], Tagged], rng: random.Random
) -> list[str] | None:
    edits = _removal_edits(tokens, tags)
    rng.shuffle(edits)
    for edit in edits:  # an edit may turn out not to apply once the tags are known ("no ,")
        chosen = edit()
        if chosen is not None:
            relicensed = _relicense(_apply(tokens, chosen), chosen[0])
            if relicensed is not None:
                return relicensed
    return None


def _lazy_tags(tokens: Sequence[str]) -> Callable[[], Tagged]:
    cache: list[Tagged] = []

    def get() -> Tagged:
        if not cache:
            cache.append([tag for _, tag in resources.pos_tag(list(tokens))])
        return cache[0]

    return get


# --- public API ---


def add_negation(tokens: list[str], rng: random.Random) -> list[str] | None:
    """Negate one randomly chosen verb (Table 8 rules); a new list, or None if no verb applies."""
    if not tokens:
        return None
    return _choose_addition(tokens, _lazy_tags(tokens)(), rng)


def remove_negation(tokens: list[str], rng: random.Random) -> list[str] | None:
    """Remove one randomly chosen negation, restoring the verb form; None if there is none."""
    if not tokens:
        return None
    return _choose_removal(tokens, _lazy_tags(tokens), rng)


def alter_negation(tokens: list[str], rng: random.Random) -> list[str] | None:
    """UNION's negation alteration: flip the polarity of one verb in the sentence.

    If the sentence has a removable negation, one is removed; otherwise one is
    added.  (Removing first keeps a sentence from gaining a second negation,
    which would often read as the same meaning.)  The result always differs
    from the input; None if neither operation applies.
    """
    if not tokens:
        return None
    tags = _lazy_tags(tokens)  # tagged at most once, shared by both operations
    removed = _choose_removal(tokens, tags, rng)
    if removed is not None:
        return removed
    return _choose_addition(tokens, tags(), rng)
