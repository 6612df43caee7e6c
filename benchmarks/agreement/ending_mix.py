"""``--ending LABEL=STORY_FOLDER+ENDING_FOLDER:WEIGHT``: a candidate ending mix (first_checks.md, E1) from two folders and
a weight, before it ships as one checkpoint (:mod:`storyeval.scoring.ending`, where the mix and its reasons are);
``--neighbours LABEL=STORY_FOLDER+NEIGHBOUR_FOLDER:WEIGHT`` the same with a neighbour scorer (E2), which reads every two
neighbouring sentences of a story.
"""
from __future__ import annotations

import argparse

from ..common import weighted_spec

TAIL_SENTENCES = 2  # ending_pairs' default: what the ending scorer was trained to read


def mix_spec(value: str, part: str = "ending") -> tuple[str, str, str, float]:
    """argparse type of ``--ending LABEL=STORY_FOLDER+ENDING_FOLDER:WEIGHT`` (``part`` names the second folder)."""
    label, folders, number = weighted_spec(value)
    story, plus, ending = folders.rpartition("+")
    if not (plus and story and ending) or number is None or not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"expects label=story_folder+{part}_folder:weight with 0 < weight < 1, got {value!r}")
    return label, story, ending, number


def ending_spec(value: str) -> tuple[str, str, str, float]:
    return mix_spec(value, "ending")


def neighbour_spec(value: str) -> tuple[str, str, str, float]:
    return mix_spec(value, "neighbour")


def load_ending_scorer(folder: str):
    """The scorer of an ending (or neighbour) checkpoint folder on its own; a folder that ships as a mix already (its
    config names the story checkpoint it completes) is measured with ``--checkpoint`` instead: ValueError."""
    from storyeval.scoring.ending import EndingMixScorer
    from storyeval.scoring.sequence import load_story_classifier

    scorer = load_story_classifier(folder, device="cpu")
    if isinstance(scorer, EndingMixScorer):
        raise ValueError(f"{folder} is a shipped ending mix already: measure it as a --checkpoint")
    return scorer
