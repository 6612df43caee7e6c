"""The plot manipulations of Ghazarian et al. (2021), Sec. 3.

A plot is a list of sentence plots, each a list of phrases (ROC keywords or WP
verbs and arguments). Every technique takes a plot and a ``random.Random`` and
returns a new plot, or None when it cannot apply; the number of sentence plots
never changes, since the generator writes one sentence per sentence plot.

* :func:`reorder_nonlogically` -- the paper asks COMET for concept pairs linked
  by HasPrerequisite / HasFirstSubevent / Causes / HasLastSubevent; here the
  ConceptNet-100K triples of those relations stand in. A pair that the plot
  mentions in its logical order is flipped, sometimes with a connective
  ("then", "later", "subsequently") before the concept that now comes too late.
  Plots with no such pair (most of them: the triples are few) fall back to
  :func:`swap_sentence_plots`, which swaps two different sentence plots so the
  order really changes; :func:`manipulate_plot` records that fallback as
  ``reorder_fallback`` rather than ``reorder_nonlogically``.
* :func:`insert_contradiction` -- a copy of a phrase with one word turned into
  a ConceptNet antonym of the same part of speech, inflected alike, or a
  NotDesires / NotCapableOf / NotHasProperty tail of a plot concept, inserted
  right after the phrase it contradicts.
* :func:`insert_repetition` -- copies of random phrases at random positions, or
  one sentence plot copied over another.
* :func:`substitute_randomly` -- sentence plots replaced by other stories'.

Concepts are matched on content lemmas: stopwords are dropped and a plot word
matches a concept word through any of its lemminflect lemmas ("made
breakfast" matches ``make breakfast``). A concept may span several phrases of
one sentence plot (WP plots keep verbs and arguments apart).
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from lemminflect import getAllInflections, getAllLemmas

from storyeval.checkpoints import resources
from storyeval_training.data.builders.common import InputFormatError, open_lines
from storyeval_training.data.negatives.substitution import inflected_antonyms, read_antonyms

Plot = list[list[str]]
Concept = tuple[str, ...]  # content lemmas of a ConceptNet concept

# relation -> True when the head happens first (Causes: head then tail),
# False when the tail does (HasPrerequisite: "eat breakfast" needs "make breakfast" first)
TEMPORAL_RELATIONS = {"Causes": True, "HasLastSubevent": True, "HasPrerequisite": False, "HasFirstSubevent": False}
NEGATED_RELATIONS = ("NotDesires", "NotCapableOf", "NotHasProperty")
CONNECTIVES = ("then", "later", "subsequently")
CONNECTIVE_PROBABILITY = 0.5
SENTENCE_REPETITION_PROBABILITY = 0.3  # the paper's examples mostly repeat single phrases
MAX_CONCEPT_WORDS = 4  # longer concepts never match keyword phrases
TECHNIQUES = ("reorder_nonlogically", "insert_contradiction", "insert_repetition", "substitute_randomly")
REORDER_FALLBACK = "reorder_fallback"
NUM_TECHNIQUES = (2, 3, 4)
MAX_ATTEMPTS = 10


@functools.lru_cache(maxsize=200_000)
def _word_forms(token: str) -> tuple[str, ...]:
    """The token (lower-cased) and its lemmas under every part of speech."""
    word = token.lower()
    lemmas = {lemma.lower() for forms in getAllLemmas(word).values() for lemma in forms}
    return (word, *sorted(lemmas - {word}))


@functools.lru_cache(maxsize=200_000)
def _penn_tags(token: str) -> tuple[str, ...]:
    """The Penn tags ``token`` can carry as an inflection of one of its lemmas ("won": VBD, VBN)."""
    word = token.lower()
    tags = []
    for upos, lemmas in getAllLemmas(word).items():
        for lemma in lemmas:
            # only a tag's usual form: lemminflect also lists "dog" as a rare plural of "dog"
            tags.extend(tag for tag, forms in getAllInflections(lemma, upos).items() if forms[0] == word)
    return tuple(dict.fromkeys(tags))


def _antonyms_like(token: str, antonyms: dict[str, list[str]]) -> list[str]:
    """Antonyms sharing a part of speech with ``token``, inflected like it ("won" -> "lost").

    Plot phrases are keywords out of their sentence, so every tag the word can
    carry is tried rather than a tagger's guess.
    """
    options = (inflected_antonyms(token.lower(), tag, antonyms) for tag in _penn_tags(token))
    return list(dict.fromkeys(itertools.chain.from_iterable(options)))


@dataclasses.dataclass
class PlotLexicon:
    """ConceptNet resources for the manipulations, loaded once."""

    # concept -> concepts that logically come after it
    followers: dict[Concept, frozenset[Concept]]
    # word -> its ConceptNet antonyms (only /r/Antonym: a NotDesires tail such as
    # "person" -> "pain" is no opposite of the word; negated relations go through ``negated``)
    antonyms: dict[str, list[str]]
    # concept -> tails of its NotDesires / NotCapableOf / NotHasProperty triples
    negated: dict[Concept, list[str]]
    stopwords: frozenset[str]

    @classmethod
    def from_triples(
        cls, triples: Iterable[tuple[str, str, str]], antonyms: dict[str, list[str]], stopwords: Iterable[str] | None = None
    ) -> PlotLexicon:
        """Build from ``(relation, head, tail)`` triples and a ``read_antonyms`` dict."""
        stop = frozenset(resources.stopwords() if stopwords is None else stopwords)
        followers: dict[Concept, set[Concept]] = {}
        negated: dict[Concept, list[str]] = {}
        for relation, head, tail in triples:
            head_key, tail_key = _concept_key(head, stop), _concept_key(tail, stop)
            if not head_key or not tail_key or head_key == tail_key:
                continue
            if relation in TEMPORAL_RELATIONS:
                first, then = (head_key, tail_key) if TEMPORAL_RELATIONS[relation] else (tail_key, head_key)
                followers.setdefault(first, set()).add(then)
            elif relation in NEGATED_RELATIONS and tail not in negated.setdefault(head_key, []):
                negated[head_key].append(tail)
        # "in"/"out" and "up"/"down" are antonyms, but no contradiction a reader would notice
        kept = {word: [t for t in targets if t not in stop] for word, targets in antonyms.items() if word not in stop}
        return cls(
            followers={first: frozenset(then) for first, then in followers.items()},
            antonyms={word: targets for word, targets in kept.items() if targets},
            negated=negated,
            stopwords=stop,
        )

    @classmethod
    def from_files(cls, antonym_path, triple_paths: Sequence) -> PlotLexicon:
        for path in (antonym_path, *triple_paths):
            _require(path)
        triples = [triple for path in triple_paths for triple in read_triples(path)]
        return cls.from_triples(triples, read_antonyms(antonym_path, relations=("/r/Antonym",)))

    @classmethod
    def from_data_dir(cls, data_dir) -> PlotLexicon:
        """From a data root laid out like ``shared/data`` (``lexicon/...``)."""
        lexicon = Path(data_dir) / "lexicon"
        selected = lexicon / "conceptnet100k" / "selected_relations_all_splits.tsv"
        # the selected file is the relevant relations of train/valid/test.txt: read those if it is absent
        splits = [lexicon / "conceptnet100k" / f"{split}.txt" for split in ("train", "valid", "test")]
        return cls.from_files(lexicon / "conceptnet_antonym.txt", [selected] if selected.is_file() else splits)

    @functools.cached_property
    def ordered_concepts(self) -> frozenset[Concept]:
        return frozenset(self.followers) | frozenset(itertools.chain.from_iterable(self.followers.values()))

    def find_concepts(self, plot: Plot, concepts: frozenset[Concept]) -> list[tuple[Span, Concept]]:
        """Every mention of one of ``concepts`` in ``plot``, in plot order."""
        found = []
        for index, sentence in enumerate(plot):
            words = [
                (position, forms)
                for position, phrase in enumerate(sentence)
                for forms in map(_word_forms, phrase.split())
                if any(form not in self.stopwords and form.isalnum() for form in forms)
            ]
            for start in range(len(words)):
                for length in range(1, min(MAX_CONCEPT_WORDS, len(words) - start) + 1):
                    window = words[start : start + length]
                    span = Span(index, window[0][0], window[-1][0])
                    for key in itertools.product(*(forms for _, forms in window)):
                        if key in concepts:
                            found.append((span, key))
        return found


@dataclasses.dataclass(frozen=True, order=True)
class Span:
    """Phrases ``first..last`` (inclusive) of one sentence plot."""

    sentence: int
    first: int
    last: int

    def precedes(self, other: Span) -> bool:
        return self.sentence < other.sentence or (self.sentence == other.sentence and self.last < other.first)


def _concept_key(concept: str, stopwords: frozenset[str]) -> Concept:
    words = tuple(w for w in concept.lower().split() if w not in stopwords)
    return words if len(words) <= MAX_CONCEPT_WORDS else ()


def _require(path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"ConceptNet file not found: {path}. Plot manipulation needs the lexicon/ folder of the "
            "shared data (set STORYEVAL_DATA to the data root)."
        )
    return path


def read_triples(path) -> Iterable[tuple[str, str, str]]:
    """``relation \\t head \\t tail [\\t split]`` lines -> (relation, head, tail)."""
    for lineno, line in open_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (3, 4):
            raise InputFormatError(path, lineno, "expected 'relation<TAB>head<TAB>tail[<TAB>split]'")
        yield fields[0], fields[1], fields[2]


def _copy(plot: Plot) -> Plot:
    return [list(sentence) for sentence in plot]


def _swap_spans(plot: Plot, early: Span, late: Span, connective: str | None) -> Plot:
    """``plot`` with the phrases of two non-overlapping spans exchanged (``early`` precedes ``late``)."""
    moved_late = list(plot[early.sentence][early.first : early.last + 1])
    moved_early = list(plot[late.sentence][late.first : late.last + 1])
    if connective:
        moved_late[0] = f"{connective} {moved_late[0]}"
    out = _copy(plot)
    # replace the later span first so the earlier span's indices stay valid
    out[late.sentence][late.first : late.last + 1] = moved_late
    out[early.sentence][early.first : early.last + 1] = moved_early
    return out


def reorder_nonlogically(plot: Plot, rng: random.Random, lexicon: PlotLexicon) -> Plot | None:
    """Flip a ConceptNet-ordered concept pair ("make breakfast" ... "eat breakfast"); None if the plot has none.

    Pairs that ConceptNet orders both ways (listen / hear) are skipped, as their flip is logical too;
    a flip that leaves another mention of the pair in logical order (a later "remember" still after
    "forget") is refused; pairs in different sentence plots come first, since two phrases swapped
    inside one sentence plot give the generator the same sentence.
    """
    mentions = lexicon.find_concepts(plot, lexicon.ordered_concepts)
    pairs = sorted({
        (early, late, first, then)
        for (early, first), (late, then) in itertools.permutations(mentions, 2)
        if early.precedes(late) and then in lexicon.followers.get(first, ()) and first not in lexicon.followers.get(then, ())
    })
    rng.shuffle(pairs)
    pairs.sort(key=lambda pair: pair[0].sentence == pair[1].sentence)  # stable: the shuffle decides within each kind
    connective = rng.choice(CONNECTIVES) if rng.random() < CONNECTIVE_PROBABILITY else None
    for early, late, first, then in pairs:
        flipped = _swap_spans(plot, early, late, connective)
        if flipped != plot and not _in_logical_order(flipped, first, then, lexicon):  # same words swap to no change
            return flipped
    return None


def _in_logical_order(plot: Plot, first: Concept, then: Concept, lexicon: PlotLexicon) -> bool:
    """Whether some mention of ``first`` still comes before some mention of ``then``."""
    mentions = lexicon.find_concepts(plot, frozenset({first, then}))
    return any(a.precedes(b) for a, concept_a in mentions if concept_a == first for b, concept_b in mentions if concept_b == then)


def swap_sentence_plots(plot: Plot, rng: random.Random) -> Plot | None:
    """Swap two different sentence plots (the reordering fallback); None if all are equal."""
    pairs = [(i, j) for i, j in itertools.combinations(range(len(plot)), 2) if plot[i] != plot[j]]
    if not pairs:
        return None
    i, j = rng.choice(pairs)
    out = _copy(plot)
    out[i], out[j] = out[j], out[i]
    return out


def insert_contradiction(plot: Plot, rng: random.Random, lexicon: PlotLexicon) -> Plot | None:
    """Insert, right after a phrase, the phrase with a word turned into its antonym, or a concept it negates."""
    options: list[tuple[int, int, str]] = []
    for s, sentence in enumerate(plot):
        for p, phrase in enumerate(sentence):
            words = phrase.split()
            for w, word in enumerate(words):
                for antonym in _antonyms_like(word, lexicon.antonyms):
                    options.append((s, p, " ".join(words[:w] + [antonym] + words[w + 1 :])))
    for span, head in lexicon.find_concepts(plot, frozenset(lexicon.negated)):
        options.extend((span.sentence, span.last, tail) for tail in lexicon.negated[head])
    options = list(dict.fromkeys(options))
    if not options:
        return None
    s, p, contradiction = rng.choice(options)
    out = _copy(plot)
    out[s].insert(p + 1, contradiction)
    return out


def insert_repetition(plot: Plot, rng: random.Random, protected: Collection[int] = ()) -> Plot | None:
    """Repeat one or two random phrases at random positions, or copy a sentence plot over another.

    A copy never lands on a ``protected`` sentence plot (one an earlier technique changed).
    """
    phrases = [phrase for sentence in plot for phrase in sentence]
    if not phrases:
        return None
    out = _copy(plot)
    # sentence plots that can be copied over a different, unprotected one
    sources = [i for i, sentence in enumerate(plot)
               if sentence and any(other != sentence and j not in protected for j, other in enumerate(plot))]
    if sources and rng.random() < SENTENCE_REPETITION_PROBABILITY:
        source = rng.choice(sources)
        target = rng.choice([j for j, other in enumerate(plot) if other != plot[source] and j not in protected])
        out[target] = list(plot[source])
        return out
    for _ in range(rng.randint(1, 2)):
        sentence = rng.randrange(len(out))
        out[sentence].insert(rng.randint(0, len(out[sentence])), rng.choice(phrases))
    return out


def substitute_randomly(
    plot: Plot, rng: random.Random, pool: Sequence[list[str]], protected: Collection[int] = (), original: Plot = ()
) -> Plot | None:
    """Replace about a fifth of the sentence plots (at least one) with sentence plots from ``pool``.

    ``protected`` sentence plots (changed by an earlier technique) are never replaced; None if all are.
    Neither this plot's sentence plots nor those of the ``original`` story (before earlier
    techniques changed it) are drawn: a substitute comes from another story.
    """
    own = {tuple(sentence) for sentence in [*plot, *original]}
    free = [i for i in range(len(plot)) if i not in protected]
    if not free or not pool:
        return None
    out = _copy(plot)
    changed = False
    for index in rng.sample(free, min(len(free), max(1, round(0.2 * len(plot))))):
        for _ in range(10):  # a small pool may mostly hold this story's own sentence plots
            other = rng.choice(pool)
            if other and tuple(other) not in own:
                out[index] = list(other)
                changed = True
                break
    return out if changed else None


def apply_technique(
    name: str, plot: Plot, rng: random.Random, pool: Sequence[list[str]], lexicon: PlotLexicon,
    protected: Collection[int] = (), original: Plot = (),
) -> tuple[Plot | None, str]:
    """Apply one technique; returns (new plot or None, the name to record).

    ``protected``: sentence plots that earlier techniques changed; the techniques
    that overwrite whole sentence plots leave them alone. ``original``: the story's
    plot before any technique, whose sentence plots substitution never draws.
    """
    if name == "reorder_nonlogically":
        reordered = reorder_nonlogically(plot, rng, lexicon)
        if reordered is not None:
            return reordered, name
        return swap_sentence_plots(plot, rng), REORDER_FALLBACK
    if name == "insert_contradiction":
        return insert_contradiction(plot, rng, lexicon), name
    if name == "insert_repetition":
        return insert_repetition(plot, rng, protected), name
    if name == "substitute_randomly":
        return substitute_randomly(plot, rng, pool, protected, original), name
    raise KeyError(f"unknown technique {name!r}; choose from {TECHNIQUES}")


def sentences_to_protect(before: Plot, after: Plot) -> set[int]:
    """Sentence plots a later overwrite must leave alone: those a technique changed, and every one
    holding a phrase it added another copy of (otherwise substituting away the first copy of a
    repeated phrase would undo the repetition)."""
    changed = {i for i, (old, new) in enumerate(zip(before, after)) if old != new}
    had = Counter(phrase for sentence in before for phrase in sentence)
    has = Counter(phrase for sentence in after for phrase in sentence)
    repeated = {phrase for phrase, count in has.items() if count > max(had[phrase], 1)}
    return changed | {i for i, sentence in enumerate(after) if repeated.intersection(sentence)}


def check_techniques(techniques: Sequence[str]) -> list[int]:
    """How many of ``techniques`` one plot may get; raises on unknown or repeated names."""
    unknown = [name for name in techniques if name not in TECHNIQUES]
    if unknown:
        raise KeyError(f"unknown technique {unknown[0]!r}; choose from {TECHNIQUES}")
    if not techniques or len(set(techniques)) != len(techniques):
        raise ValueError(f"techniques must be distinct names from {TECHNIQUES}, got {list(techniques)}")
    return [n for n in NUM_TECHNIQUES if n <= len(techniques)] or [len(techniques)]


def manipulate_plot(
    plot: Plot, rng: random.Random, pool: Sequence[list[str]], lexicon: PlotLexicon, techniques: Sequence[str] = TECHNIQUES
) -> tuple[Plot, list[str]]:
    """Apply 2-4 distinct techniques, chosen and ordered at random; returns (new plot, names applied).

    ``techniques`` limits the choice, for the paper's leave-one-out ablation
    (with three left, 2-3 are applied). A technique that cannot apply is
    replaced by one not yet tried. Sentence plots a technique changed, and those
    holding the first copy of a phrase it repeated, are protected from later
    overwrites (substitution, a copied sentence plot), so every recorded
    technique stays visible in the result. A draw that ends
    with fewer than two techniques is drawn again; only a plot that admits a
    single technique (one phrase, no pool, no lexicon match) keeps fewer.
    The result always differs from ``plot``.
    """
    if not any(plot):
        raise ValueError("cannot manipulate a plot without phrases")
    counts = check_techniques(techniques)
    best = None
    for _ in range(MAX_ATTEMPTS):
        wanted = rng.choice(counts)
        order = list(techniques)
        rng.shuffle(order)
        current, applied, touched = plot, [], set()
        for name in order:
            if len(applied) == wanted:
                break
            result, label = apply_technique(name, current, rng, pool, lexicon, touched, plot)
            if result is not None:
                touched.update(sentences_to_protect(current, result))
                current, applied = result, applied + [label]
        if current == plot:  # a repetition the reordering swapped back, say: draw again
            continue
        if len(applied) >= min(counts):
            return current, applied
        # protection can leave one technique where the order was unlucky: try another order
        best = best if best is not None and len(best[1]) >= len(applied) else (current, applied)
    if best is not None:
        return best
    raise ValueError(f"no manipulation changed the plot in {MAX_ATTEMPTS} attempts: {plot!r}")
