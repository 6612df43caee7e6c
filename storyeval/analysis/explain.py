"""Which sentence drags a story's score down: leave-one-out sentence blame.

    from storyeval.analysis.explain import explain
    result = explain("Ken went home. He was tired. He was not tired. He slept.", scorer)
    result.ranking()          # sentence indices, most blamed first

The story is split into sentences and rescored once with each sentence left
out. A sentence's ``change`` is the score without it minus the score of the
whole story: positive means the story scores higher without that sentence, so
the model objects to it; the most positive change is the most blamed sentence.
A ``context`` (a prompt or opening) is kept in every variant and never blamed.

What it costs: one extra forward pass per sentence (per window, for stories
longer than the model's window), all variants of all stories scored together in
the scorer's usual length-sorted batches. What it means: the blame says what
the scorer reacts to, which is not always what a reader would fault; removing a
sentence also shortens the story, and a story of one sentence has nothing to
compare with (its blame is empty).

It works with the story scorers (UNION, plot coherence); continuation quality
scores a continuation given a context, so it has no leave-one-out here.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from storyeval import text as textlib
from storyeval.files import Row
from storyeval.inputs import check_texts

FIELD = "explanation"  # the JSONL field storyeval score --explain adds


@dataclasses.dataclass
class SentenceBlame:
    index: int  # 0-based position in the story's sentences
    sentence: str
    score_without: float
    change: float  # score_without - score of the whole story


@dataclasses.dataclass
class Explanation:
    score: float  # the whole story (context first), as the variants are built
    sentences: list[SentenceBlame]

    def ranking(self) -> list[int]:
        """Sentence indices, most blamed (largest change) first; ties keep story order."""
        return [blame.index for blame in sorted(self.sentences, key=lambda b: -b.change)]

    def to_dict(self) -> dict:
        return {"score": self.score, "sentences": [dataclasses.asdict(b) for b in self.sentences]}


def story_sentences(story: str) -> list[str]:
    """The sentences that can be left out: a "sentence" of punctuation alone ("...") has no words."""
    return textlib.sentences_with_words(story)


def _check_scorer(scorer) -> None:
    from storyeval.scoring.continuation import ContinuationScorer

    if isinstance(scorer, ContinuationScorer):
        raise TypeError("explain needs a story scorer (union, plot_coherence); continuation quality scores pairs, not stories")
    if not callable(getattr(scorer, "score", None)):
        raise TypeError(f"explain needs a scorer with a score(stories) method, got {type(scorer).__name__}")


def explain_sentences(sentence_lists: Sequence[Sequence[str]], scorer, contexts: Sequence[str | None] | None = None,
                      batch_size: int = 16, dtype=None, max_blamed: int | None = None) -> list[Explanation]:
    """Leave-one-out blame for stories already split into sentences, all scored in one batched call.
    ``max_blamed``: leave out only each story's first that many sentences (None: every one); the score is
    always the whole story's."""
    _check_scorer(scorer)
    contexts = [None] * len(sentence_lists) if contexts is None else list(contexts)
    if len(contexts) != len(sentence_lists):
        raise ValueError(f"{len(contexts)} contexts for {len(sentence_lists)} stories")
    variants, spans = [], []
    for sentences, context in zip(sentence_lists, contexts):
        opening = [context] if context else []
        start = len(variants)
        variants.append(" ".join(opening + list(sentences)))
        if len(sentences) > 1:
            blamed = len(sentences) if max_blamed is None else min(len(sentences), max_blamed)
            variants += [" ".join(opening + list(sentences[:i]) + list(sentences[i + 1:])) for i in range(blamed)]
        spans.append((start, len(variants)))
    scores = scorer.score(variants, batch_size=batch_size, dtype=dtype) if variants else []
    explanations = []
    for sentences, (start, end) in zip(sentence_lists, spans):
        whole = scores[start]
        blames = [SentenceBlame(i, sentence, without, without - whole)
                  for i, (sentence, without) in enumerate(zip(sentences, scores[start + 1:end]))]
        explanations.append(Explanation(whole, blames))
    return explanations


def explain_many(stories: Sequence[str], scorer, contexts: Sequence[str] | None = None, batch_size: int = 16, dtype=None) -> list[Explanation]:
    """:func:`explain` for many stories, their variants scored together."""
    stories = check_texts(stories, "stories")
    if contexts is not None:
        contexts = check_texts(contexts, "contexts")
        if len(contexts) != len(stories):
            raise ValueError(f"{len(contexts)} contexts for {len(stories)} stories")
    sentence_lists = [story_sentences(story) for story in stories]
    return explain_sentences(sentence_lists, scorer, contexts, batch_size=batch_size, dtype=dtype)


def explain(story: str, scorer, context: str | None = None, batch_size: int = 16, dtype=None) -> Explanation:
    """Per-sentence score changes of ``story`` under ``scorer`` (a loaded union or plot_coherence scorer)."""
    if not isinstance(story, str):
        raise TypeError(f"story must be a string, got {type(story).__name__}")
    return explain_many([story], scorer, None if context is None else [context], batch_size=batch_size, dtype=dtype)[0]


def with_explanations(rows: Sequence[Row], scorer, field: str, batch_size: int = 16, dtype=None) -> list[Row]:
    """``storyeval score``'s JSONL rows, each record given the blame of its story (``field``) under :data:`FIELD`."""
    explanations = explain_many([row.texts[field] for row in rows], scorer, batch_size=batch_size, dtype=dtype)
    return [dataclasses.replace(row, record={**row.record, FIELD: explanation.to_dict()["sentences"]})
            for row, explanation in zip(rows, explanations)]
