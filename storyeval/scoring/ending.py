"""A story scorer and a scorer of some of its sentences as one scorer (``union`` ``wp-base-ending``, ``-ending-neighbours``, ``-complete``, ``-ordered``).

A story cut off part-way differs from the whole in where it stops. A scorer of whole stories taught to notice that
learned length with it (benchmarks/experiments/first_checks.md, runs T1-T5); an ending scorer reads only a story's last
few sentences, as many for any story, and was trained on a story's end against as many sentences before a cut in it
(``storyeval_training.data.ending_pairs``). A story's score is ``(1 - weight) * story score + weight * ending score``:
both are probabilities, so the mix is one too. The ending checkpoint's config names the story checkpoint it completes
(``ending_of``), the weight and how many sentences it reads; its folder is the ending scorer's weights alone.

:class:`NeighbourMixScorer` mixes in the mean score of every two neighbouring sentences instead, from a scorer trained
on two neighbours against a sentence followed by another story's or by itself (``storyeval_training.data.neighbour_pairs``):
a stray or repeated sentence breaks the pairs it is in, whatever the story's length. Its config says
``ending_reads: "neighbours"``, and ``ending_lowest_share`` how many of a story's pair scores are averaged, lowest first
(the default config: the lower half, so that one stray sentence among many pairs weighs; first_checks.md, E5).
:class:`OpeningEndingMixScorer` (``ending_reads: "opening_ending"``) reads the story's first sentence before its last
ones: what a story cut part-way lacks is an end to what its opening began (E6). :class:`RunsMixScorer`
(``ending_reads: "runs"``) reads every run of ``ending_sentences`` consecutive sentences with an order scorer, trained
on a window against its own shuffle (E8). :class:`TopicMixScorer` mixes in a sentence embedder's score of how well the
story's sentences fit one another (:mod:`storyeval.scoring.topic`; E17, measured with ``modern_breaks --topic`` and
not shipped: it prefers the longer of two LLM ROC windows).
"""
from __future__ import annotations

from storyeval.inputs import check_texts
from storyeval.scoring import windows
from storyeval.scoring.signature import settings_string
from storyeval.scoring.windows import StoryTooLongError
from storyeval.text import distinct_sentences, last_sentences, neighbouring_pairs, normalize_story, opening_and_ending, sentence_runs


def mixed(story: float, ending: float, weight: float) -> float:
    return (1 - weight) * story + weight * ending


def lowest_mean(scores: list[float], share: float = 1.0) -> float:
    """The mean of the lowest ``share`` of ``scores`` (1: all of them), the share counted in fractions of a score, so
    that it moves smoothly with the number of scores: one stray sentence among 29 pairs weighs on a quarter of them, not
    on all 29. Written out: ``scipy.stats.trim_mean`` trims whole scores from both ends, not a share from one."""
    if share == 1:
        return sum(scores) / len(scores)  # in the given order, as every mix has summed them
    ordered, wanted = sorted(scores), share * len(scores)
    whole = int(wanted)
    total = sum(ordered[:whole]) + (wanted - whole) * (ordered[whole] if whole < len(ordered) else 0.0)
    return total / wanted


class EndingMixScorer:
    """Scores as its story scorer does (the same inputs, options and errors) and mixes in its ending scorer's score of
    each story's last ``sentences`` sentences, cut from the story as the story scorer prepares it and read as they are
    (the ending scorer's pairs were cut so)."""

    def __init__(self, story_scorer, ending_scorer, weight: float, sentences: int, name: str = "unnamed", lowest_share: float = 1.0):
        if not 0 < weight < 1:
            raise ValueError(f"the ending weight must be between 0 and 1, got {weight}")
        if not 0 < lowest_share <= 1:
            raise ValueError(f"the lowest share must be in (0, 1], got {lowest_share}")
        # the parts are cut from the story as prepared here: read as they are, never normalised twice
        self.story_scorer, self.ending_scorer = story_scorer, ending_scorer.reading_as_given()
        self.reads = "ending"  # what the second scorer reads, for messages
        self.weight, self.sentences, self.name, self.lowest_share = weight, sentences, name, lowest_share
        self.weights = None  # its scoring_digest, set by the loader that knows its folder

    @property
    def delexicalize(self) -> bool:
        return self.story_scorer.delexicalize

    @property
    def preprocess(self) -> bool:
        return self.story_scorer.preprocess

    @property
    def device(self):
        return self.story_scorer.device

    def windows(self, story: str) -> list[list[int]]:
        """The story scorer's windows; a ValueError, as for a story too long, where a text the second scorer reads needs
        more windows than it may have (a story of few sentence ends)."""
        for part in self.parts(story):
            try:
                self.ending_scorer.windows(part)
            except ValueError as error:
                raise ValueError(f"has a part the {self.reads} scorer reads that {error}") from None
        return self.story_scorer.windows(story)

    def prepared(self, story: str) -> str:
        return normalize_story(story, self.delexicalize) if self.preprocess else story

    def tail(self, story: str) -> str:
        """What the ending scorer reads of ``story``."""
        return last_sentences(self.prepared(story), self.sentences)

    def parts(self, story: str) -> list[str]:
        """The texts of ``story`` the ending scorer reads; the mean of their scores is mixed in (none: the story score)."""
        return [self.tail(story)]

    def settings(self, dtype=None) -> str:
        # int8 scores nothing here that the story scorer would not refuse or score in float32 first
        if dtype is not None and self.story_scorer.settings(dtype) == self.story_scorer.settings("float32"):
            dtype = "float32"
        return settings_string(self.name, dtype, self.weights)

    def score(self, stories, batch_size: int = 16, device=None, progress_bar: bool = False, dtype=None) -> list[float]:
        """One score in [0, 1] per story, in input order."""
        # the stories are checked here, once: neither a part nor the story scorer checks again (score_checked)
        return self.score_checked(check_texts(stories, "predictions"), batch_size, device, progress_bar, dtype)

    def score_checked(self, stories: list[str], batch_size: int = 16, device=None, progress_bar: bool = False, dtype=None,
                      story_windows: list[tuple[int, list[int]]] | None = None) -> list[float]:
        """:meth:`score` of stories that passed its checks, with the story scorer's windows where a caller (an outer
        mix) cut them already."""
        if story_windows is None:  # a story too long: refused before anything is scored
            story_windows = windows.all_windows(stories, self.story_scorer.windows)
        parts = [self.parts(story) for story in stories]
        texts = sorted({text for story_parts in parts for text in story_parts})  # a repeated pair is scored once
        try:
            score_of = dict(zip(texts, self.ending_scorer.score_checked(texts, batch_size, device, progress_bar, dtype)))
        except StoryTooLongError as error:  # named by the story it is part of
            story = next(k for k, story_parts in enumerate(parts) if texts[error.index] in story_parts)
            raise StoryTooLongError(story, f"has a part the {self.reads} scorer reads that {error.problem}") from None
        plain = self.story_scorer.score_checked(stories, batch_size, device, progress_bar, dtype, story_windows)
        return [mixed(p, lowest_mean([score_of[t] for t in ts], self.lowest_share), self.weight) if ts else p
                for p, ts in zip(plain, parts)]


class NeighbourMixScorer(EndingMixScorer):
    """An :class:`EndingMixScorer` whose second scorer reads every two neighbouring sentences of a story (a story of one
    sentence has none, and scores as its story scorer does)."""

    def __init__(self, story_scorer, neighbour_scorer, weight: float, name: str = "unnamed", lowest_share: float = 1.0):
        super().__init__(story_scorer, neighbour_scorer, weight, 2, name, lowest_share)
        self.reads = "neighbour"

    def parts(self, story: str) -> list[str]:
        return neighbouring_pairs(self.prepared(story))


class OpeningEndingMixScorer(EndingMixScorer):
    """An :class:`EndingMixScorer` whose ending scorer reads a story's first sentence and its last ``sentences``
    (:func:`storyeval.text.opening_and_ending`)."""

    def __init__(self, story_scorer, ending_scorer, weight: float, sentences: int, name: str = "unnamed", lowest_share: float = 1.0):
        super().__init__(story_scorer, ending_scorer, weight, sentences, name, lowest_share)
        self.reads = "opening-and-ending"

    def tail(self, story: str) -> str:
        return opening_and_ending(self.prepared(story), self.sentences)


class RunsMixScorer(EndingMixScorer):
    """An :class:`EndingMixScorer` whose second scorer, an order scorer, reads every run of ``sentences`` consecutive
    sentences of a story (:func:`storyeval.text.sentence_runs`): a shuffled story has its sentences out of order in
    every run, whatever its length."""

    def __init__(self, story_scorer, order_scorer, weight: float, sentences: int, name: str = "unnamed", lowest_share: float = 1.0):
        super().__init__(story_scorer, order_scorer, weight, sentences, name, lowest_share)
        self.reads = "order"

    def parts(self, story: str) -> list[str]:
        return sentence_runs(self.prepared(story), self.sentences)


class TopicMixScorer(EndingMixScorer):
    """An :class:`EndingMixScorer` whose second scorer, a sentence embedder, scores how well a story's distinct sentences
    fit one another (:mod:`storyeval.scoring.topic`), reading the story as given; a story of fewer than two distinct
    sentences scores as its story scorer does."""

    def __init__(self, story_scorer, topic_scorer, weight: float, name: str = "unnamed"):
        super().__init__(story_scorer, topic_scorer, weight, 1, name)
        self.reads = "topic"

    def parts(self, story: str) -> list[str]:
        return [story] if len(distinct_sentences(story)) > 1 else []


def mix_scorer(reads: str, story_scorer, part_scorer, weight: float, sentences: int = 2, name: str = "unnamed",
               lowest_share: float = 1.0) -> EndingMixScorer:
    """The mix whose second scorer reads what ``reads`` (a config's ``ending_reads``) names: the last ``sentences``
    sentences, the first sentence and the last ``sentences``, every two neighbouring sentences, every run of
    ``sentences``, or (``"topic"``, a sentence embedder) how well the story's sentences fit one another."""
    if reads == "neighbours":
        return NeighbourMixScorer(story_scorer, part_scorer, weight, name, lowest_share)
    if reads == "topic":
        return TopicMixScorer(story_scorer, part_scorer, weight, name)
    if reads == "runs":
        return RunsMixScorer(story_scorer, part_scorer, weight, sentences, name, lowest_share)
    mix = OpeningEndingMixScorer if reads == "opening_ending" else EndingMixScorer
    return mix(story_scorer, part_scorer, weight, sentences, name, lowest_share)
