"""A story scorer's score mixed with an ending scorer's score of the story's last sentences (first_checks.md, E1).

A story cut at its half differs from the whole in where it stops. A scorer of whole stories that learns this learns
length with it (runs T1-T5); an ending scorer reads only the last ``TAIL_SENTENCES`` sentences, as many for any story,
and is trained on a story's end against the same number of sentences before a cut in it
(:mod:`storyeval_training.data.ending_pairs`). The mix is ``(1 - weight) * story + weight * ending``: both are
probabilities, so the mix is one too.
"""
from __future__ import annotations

import argparse

from storyeval.inputs import has_words
from storyeval.text import split_sentences

TAIL_SENTENCES = 2  # ending_pairs' default: what the ending scorer was trained to read


def last_sentences(text: str, count: int = TAIL_SENTENCES) -> str:
    """The text's last ``count`` sentences (all of a shorter text), as ending_pairs writes a side; where they are
    punctuation alone (a closing `` ... ``), which cannot be scored, the last ``count`` that have words in them."""
    sentences = split_sentences(text)
    tail = " ".join(sentences[-count:])
    return tail if has_words(tail) else " ".join([sentence for sentence in sentences if has_words(sentence)][-count:])


def mixed(story: float, ending: float, weight: float) -> float:
    return (1 - weight) * story + weight * ending


def ending_spec(value: str) -> tuple[str, str, str, float]:
    """argparse type of ``--ending LABEL=STORY_FOLDER+ENDING_FOLDER:WEIGHT``."""
    label, sep, spec = value.partition("=")
    folders, _, weight = spec.rpartition(":")
    story, plus, ending = folders.rpartition("+")
    try:
        number = float(weight)
    except ValueError:
        number = None
    if not (sep and label and plus and story and ending) or number is None or not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"expects label=story_folder+ending_folder:weight with 0 < weight < 1, got {value!r}")
    return label, story, ending, number


class EndingMixScorer:
    """A story scorer and an ending scorer as one ``score(stories)``, for the benchmarks that take a scorer (the human
    sets' ``cross_metric``): the ending scorer reads the last sentences of each story as the story scorer prepares it."""

    def __init__(self, story_scorer, ending_scorer, weight: float):
        self.story_scorer, self.ending_scorer, self.weight = story_scorer, ending_scorer, weight

    def score(self, stories: list[str], batch_size: int = 16) -> list[float]:
        from storyeval.text import normalize_story

        plain = self.story_scorer.score(stories, batch_size=batch_size)
        tails = [last_sentences(normalize_story(story, self.story_scorer.delexicalize)) for story in stories]
        endings = self.ending_scorer.score(tails, batch_size=batch_size)
        return [mixed(p, e, self.weight) for p, e in zip(plain, endings)]
