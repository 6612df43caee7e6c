"""``--ending LABEL=STORY_FOLDER+ENDING_FOLDER:WEIGHT``: a candidate ending mix (first_checks.md, E1) from two folders and
a weight, before it ships as one checkpoint (:mod:`storyeval.scoring.ending`, where the mix and its reasons are);
``--neighbours LABEL=STORY_FOLDER+NEIGHBOUR_FOLDER:WEIGHT`` the same with a neighbour scorer (E2), which reads every two
neighbouring sentences of a story; ``--opening-ending LABEL=STORY_FOLDER+PART_FOLDER:WEIGHT`` with an ending scorer that
reads the story's first sentence before its last two (E6); ``--runs LABEL=STORY_FOLDER+ORDER_FOLDER:WEIGHT`` with an
order scorer that reads every run of five consecutive sentences (E8); ``--topic LABEL=STORY_FOLDER+EMBEDDER_FOLDER:WEIGHT``
with a sentence embedder's mean similarity of every two of the story's distinct sentences (E17). ``--part-lowest-share LABEL=SHARE`` mixes in the
mean of a row's lowest part scores instead of all of them (E5); ``--part-sentences LABEL=N`` has a row's part scorer
read N sentences instead of its option's (E12: an ending scorer of a story's last five).
"""
from __future__ import annotations

import argparse

from ..common import weighted_spec

TAIL_SENTENCES = 2  # ending_pairs' default: what the ending scorer was trained to read
RUN_SENTENCES = 5  # a ROC story's length: the windows the order scorer was trained on (first_checks.md, E8)


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


def opening_ending_spec(value: str) -> tuple[str, str, str, float]:
    return mix_spec(value, "part")


def runs_spec(value: str) -> tuple[str, str, str, float]:
    return mix_spec(value, "order")


def topic_spec(value: str) -> tuple[str, str, str, float]:
    return mix_spec(value, "embedder")


# option (--KIND) -> its argparse type, its part folder's name and what the part scorer reads, for the help
MIX_OPTIONS = {"ending": (ending_spec, "ENDING", "an ending checkpoint's score of the story's last two sentences"),
               "neighbours": (neighbour_spec, "NEIGHBOUR", "the mean of a neighbour checkpoint's scores of every two neighbouring sentences"),
               "opening-ending": (opening_ending_spec, "PART", "an ending checkpoint's score of the story's first sentence and its last two"),
               "runs": (runs_spec, "ORDER", f"the mean of an order checkpoint's scores of every run of {RUN_SENTENCES} consecutive sentences"),
               "topic": (topic_spec, "EMBEDDER", "a sentence embedder's mean cosine of every two of the story's distinct sentences")}
# option -> the shipped config's ``ending_reads`` for that mix (storyeval.scoring.ending.mix_scorer)
MIX_READS = {"ending": "last_sentences", "neighbours": "neighbours", "opening-ending": "opening_ending", "runs": "runs", "topic": "topic"}
# option -> how many sentences its part scorer reads (``ending_sentences``) and what a results file records of that
PART_READING = {"ending": (TAIL_SENTENCES, {"last_sentences": TAIL_SENTENCES}), "neighbours": (TAIL_SENTENCES, {}),
                "opening-ending": (TAIL_SENTENCES, {"last_sentences": TAIL_SENTENCES}),
                "runs": (RUN_SENTENCES, {"sentences": RUN_SENTENCES}), "topic": (1, {})}
# options whose part is scored once per story, so that neither a share of its parts nor a count of sentences applies
WHOLE_STORY_PARTS = ("topic",)


def add_mix_arguments(parser: argparse.ArgumentParser) -> None:
    """``--ending``, ``--neighbours``, ``--opening-ending``, ``--runs``, ``--topic`` and ``--part-lowest-share``, as both tools take them."""
    for kind, (spec, part, reads) in MIX_OPTIONS.items():
        parser.add_argument(f"--{kind}", action="append", default=[], type=spec, metavar=f"LABEL=STORY_FOLDER+{part}_FOLDER:WEIGHT",
                            help=f"(1 - WEIGHT) times a checkpoint's score plus WEIGHT times {reads} "
                                 "(benchmarks/agreement/ending_mix.py); repeatable")
    parser.add_argument("--part-lowest-share", action="append", default=[], type=share_spec, metavar="LABEL=SHARE", help=PART_SHARE_HELP)
    parser.add_argument("--part-sentences", action="append", default=[], type=sentences_spec, metavar="LABEL=N", help=PART_SENTENCES_HELP)


def mix_rows(args: argparse.Namespace) -> tuple[dict[str, tuple[str, str, str, float]], list[str]]:
    """label -> (the option's kind, story folder, part folder, weight) for every mix row given, and every label given
    (a label given twice: twice)."""
    given = [(label, (kind, story, part, weight)) for kind in MIX_OPTIONS
             for label, story, part, weight in getattr(args, kind.replace("-", "_"))]
    return dict(given), [label for label, _ in given]


PART_SHARE_HELP = ("LABEL=SHARE: the --ending, --neighbours, --opening-ending or --runs row LABEL mixes in the mean of the lowest SHARE of its part "
                   "scores (0 < SHARE <= 1; default 1, the mean of all; storyeval.scoring.ending.lowest_mean); repeatable")


def share_spec(value: str) -> tuple[str, float]:
    """argparse type of ``--part-lowest-share LABEL=SHARE``."""
    label, sep, number = value.partition("=")
    try:
        share = float(number)
    except ValueError:
        share = None
    if not (sep and label) or share is None or not 0 < share <= 1:
        raise argparse.ArgumentTypeError(f"expects label=share with 0 < share <= 1, got {value!r}")
    return label, share


def share_field(share: float) -> dict:
    """A mix row's ``lowest_share`` field, left out at 1 (every part), as rows measured before it was an option."""
    return {} if share == 1 else {"lowest_share": share}


def part_shares(parser: argparse.ArgumentParser, given: list[tuple[str, float]], mix_labels) -> dict[str, float]:
    """label -> its lowest share, for every mix row (1 where none is given); a label of no mix row: a parser error."""
    shares = dict(given)
    if unknown := sorted(set(shares) - set(mix_labels)):
        parser.error(f"--part-lowest-share {unknown}: not the label of an --ending, --neighbours, --opening-ending or --runs row")
    if whole := sorted(label for label in shares if mix_labels[label][0] in WHOLE_STORY_PARTS):
        parser.error(f"--part-lowest-share {whole}: a --topic row scores each story once")
    return {label: shares.get(label, 1.0) for label in mix_labels}


PART_SENTENCES_HELP = ("LABEL=N: the --ending, --opening-ending or --runs row LABEL's part scorer reads N sentences (the last N; "
                       "runs of N) instead of the option's 2 (5 for --runs), as a part trained on N-sentence pairs must; repeatable")


def sentences_spec(value: str) -> tuple[str, int]:
    """argparse type of ``--part-sentences LABEL=N``."""
    label, sep, number = value.partition("=")
    if not (sep and label and number.isdigit() and int(number) >= 1):
        raise argparse.ArgumentTypeError(f"expects label=n with a whole n of at least 1, got {value!r}")
    return label, int(number)


def part_sentences(parser: argparse.ArgumentParser, given: list[tuple[str, int]], mixes: dict) -> dict[str, int | None]:
    """label -> the sentences its part scorer reads where ``--part-sentences`` names it (else None: the option's own);
    a label of no mix row, or of a neighbour row (which reads two neighbouring sentences by what it is): a parser error."""
    counts = dict(given)
    if unknown := sorted(set(counts) - set(mixes)):
        parser.error(f"--part-sentences {unknown}: not the label of an --ending, --opening-ending or --runs row")
    if neighbours := sorted(label for label in counts if mixes[label][0] == "neighbours"):
        parser.error(f"--part-sentences {neighbours}: a --neighbours row's part reads two neighbouring sentences")
    if whole := sorted(label for label in counts if mixes[label][0] in WHOLE_STORY_PARTS):
        parser.error(f"--part-sentences {whole}: a --topic row reads every sentence of the story")
    return {label: counts.get(label) for label in mixes}


def part_reading(kind: str, sentences: int | None = None) -> tuple[int, dict]:
    """How many sentences the ``--KIND`` option's part scorer reads and what a results file records of that:
    :data:`PART_READING`'s, or ``sentences`` in their place."""
    default, fields = PART_READING[kind]
    if sentences is None:
        return default, fields
    return sentences, {name: sentences for name in fields}


def load_part_scorer(kind: str, folder: str):
    """The part scorer of the ``--KIND`` option ``kind``: a sentence embedder's folder for ``--topic``, else a checkpoint
    folder (:func:`load_ending_scorer`)."""
    if kind in WHOLE_STORY_PARTS:
        from storyeval.scoring.topic import load_topic_scorer

        return load_topic_scorer(folder, device="cpu")
    return load_ending_scorer(folder)


def load_ending_scorer(folder: str):
    """The scorer of an ending (or neighbour) checkpoint folder on its own; a folder that ships as a mix already (its
    config names the story checkpoint it completes) is measured with ``--checkpoint`` instead: ValueError."""
    from storyeval.scoring.ending import EndingMixScorer
    from storyeval.scoring.sequence import load_story_classifier

    scorer = load_story_classifier(folder, device="cpu")
    if isinstance(scorer, EndingMixScorer):
        raise ValueError(f"{folder} is a shipped ending mix already: measure it as a --checkpoint")
    return scorer
