"""Data for the continuation-quality metric.

* :func:`read_rated_pairs`: the shape of Sagarkar et al.'s annotated pairs
  (``context``, ``continuation``, ``overall``, ``relevance``, ``interestingness``
  on 1-10), as ``.jsonl`` or ``.csv``, for users who have that data.
* :func:`read_deltascore`: the DeltaScore crowd ratings (1-5) we train on here,
  with the criteria mapped to ours (:data:`DELTASCORE_MAPPING`);
  :func:`read_deltascore_stories`: the same files' whole stories and raw aspects.
* :func:`read_story_cloze`: the Story Cloze test set (a test set only).
* :func:`cloze_pairs`: weak training signal built from ROC stories: the true
  fifth sentence should outrank the fifth sentence of another story.
"""
from __future__ import annotations

import csv
import hashlib
import json
import random
from pathlib import Path

import datasets

from storyeval import text as textlib
from storyeval.models.continuation.model import CRITERIA
from storyeval_training.data.builders.common import InputFormatError, require_file

# our criterion <- the DeltaScore ratings it averages
DELTASCORE_MAPPING = {
    "overall": ("fluency", "coherence", "logicality"),
    "relevance": ("relatedness",),
    "interestingness": ("interestingness",),
}
RATED_FEATURES = datasets.Features(
    {"context": datasets.Value("string"), "continuation": datasets.Value("string"), "source": datasets.Value("string"),
     **{c: datasets.Value("float32") for c in CRITERIA}}
)


def normalize(text: str) -> str:
    """The token form every component expects (lower-cased Treebank tokens, names delexicalised)."""
    from storyeval.scoring.sequence import normalize_story

    return normalize_story(text)


def _check_rating(value, path, lineno, name, low, high) -> float:
    try:
        rating = float(value)
    except (TypeError, ValueError):
        raise InputFormatError(path, lineno, f"{name} must be a number, got {value!r}") from None
    if not low <= rating <= high:
        raise InputFormatError(path, lineno, f"{name} must be in [{low}, {high}], got {rating}")
    return rating


def _check_texts(record: dict, fields: tuple[str, ...], path, lineno) -> None:
    for field in fields:
        if not isinstance(record.get(field), str) or not record[field].strip():
            raise InputFormatError(path, lineno, f"missing or empty {field!r}")


def _records(path: Path):
    """(line number, dict) from .jsonl or .csv."""
    if path.suffix == ".jsonl":
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as error:
                    raise InputFormatError(path, lineno, f"not JSON ({error.msg})") from None
    elif path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            for row in reader:
                yield reader.line_num, row
    else:
        raise ValueError(f"{path}: expected a .jsonl or .csv file")


def read_rated_pairs(path) -> datasets.Dataset:
    """Sagarkar et al.'s documented shape: context, continuation and three 1-10 ratings."""
    path = require_file(path)
    rows = []
    for lineno, record in _records(path):
        _check_texts(record, ("context", "continuation"), path, lineno)
        row = {"context": normalize(record["context"]), "continuation": normalize(record["continuation"]), "source": path.name}
        row.update({c: _check_rating(record.get(c), path, lineno, c, 1, 10) for c in CRITERIA})
        rows.append(row)
    return datasets.Dataset.from_list(rows, features=RATED_FEATURES)


def read_deltascore(path) -> datasets.Dataset:
    """DeltaScore crowd ratings: context = ``title``, continuation = ``story``, criteria mapped (1-5 scale)."""
    path = require_file(path)
    rows = []
    for lineno, record in _records(path):
        _check_texts(record, ("title", "story"), path, lineno)
        row = {"context": normalize(record["title"]), "continuation": normalize(record["story"]), "source": f"{path.stem}:{record.get('model', '')}"}
        for criterion, fields in DELTASCORE_MAPPING.items():
            row[criterion] = sum(_check_rating(record.get(f), path, lineno, f, 1, 5) for f in fields) / len(fields)
        rows.append(row)
    return datasets.Dataset.from_list(rows, features=RATED_FEATURES)


DELTASCORE_ASPECTS = ("fluency", "coherence", "relatedness", "logicality", "interestingness")


def read_deltascore_stories(path) -> tuple[list[str], dict[str, list[float]]]:
    """DeltaScore's rated stories as a reader sees them (``title + " " + story``, raw text) and each of their
    five aspect ratings (1-5), unmapped: for judging whole-story metrics, which never train on them."""
    path = require_file(path)
    stories, ratings = [], {aspect: [] for aspect in DELTASCORE_ASPECTS}
    for lineno, record in _records(path):
        _check_texts(record, ("title", "story"), path, lineno)
        stories.append(f"{record['title']} {record['story']}")
        for aspect in DELTASCORE_ASPECTS:
            ratings[aspect].append(_check_rating(record.get(aspect), path, lineno, aspect, 1, 5))
    return stories, ratings


# The held-out test pairs are the test side of this split; training seeds must not move it.
HELDOUT_SPLIT_SEED = 42


def grouped_split(dataset: datasets.Dataset, test_percent: int = 30, validation_percent: int = 15, seed: int = HELDOUT_SPLIT_SEED) -> datasets.DatasetDict:
    """Split by context, so that no context appears on two sides."""

    def bucket(context: str) -> int:
        return int.from_bytes(hashlib.blake2b(f"{seed}:{context}".encode(), digest_size=8).digest(), "big") % 100

    buckets = [bucket(c) for c in dataset["context"]]
    test = [i for i, b in enumerate(buckets) if b < test_percent]
    validation = [i for i, b in enumerate(buckets) if test_percent <= b < test_percent + validation_percent]
    train = [i for i, b in enumerate(buckets) if b >= test_percent + validation_percent]
    return datasets.DatasetDict({"train": dataset.select(train), "validation": dataset.select(validation), "test": dataset.select(test)})


def read_story_cloze(path) -> datasets.Dataset:
    """Story Cloze: context (4 sentences), two endings, and the index (0/1) of the right one."""
    path = require_file(path)
    rows = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        needed = [f"InputSentence{i}" for i in range(1, 5)] + ["RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2", "AnswerRightEnding"]
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise InputFormatError(path, 1, f"missing columns {missing}")
        for row in reader:
            answer = row["AnswerRightEnding"].strip()
            if answer not in ("1", "2"):
                raise InputFormatError(path, reader.line_num, f"AnswerRightEnding must be 1 or 2, got {answer!r}")
            rows.append({
                "context": normalize(" ".join(row[f"InputSentence{i}"] for i in range(1, 5))),
                "ending_1": normalize(row["RandomFifthSentenceQuiz1"]),
                "ending_2": normalize(row["RandomFifthSentenceQuiz2"]),
                "right": int(answer) - 1,
            })
    return datasets.Dataset.from_list(rows)


def cloze_pairs(stories: datasets.Dataset, seed: int = 42, exclude_keys=frozenset(), lexicon=None, contradiction_share: float = 0.5) -> datasets.Dataset:
    """(context, right, wrong) from stories of 5 sentences.

    ``right`` is the true last sentence. ``wrong`` is, for a ``contradiction_share``
    of the stories, the true last sentence made to contradict itself (a negation
    added or removed, or keywords swapped for ConceptNet antonyms, with UNION's
    perturbation functions); for the rest, or when neither applies, the last
    sentence of another story. Off-topic endings teach relevance; contradicting
    ones teach what an on-topic but wrong ending looks like.
    """
    from storyeval_training.data.negatives.negation import alter_negation
    from storyeval_training.data.negatives.substitution import substitute_keywords

    usable = [s for s in stories["sentences"] if len(s) == 5 and textlib.leakage_key(s[0]) not in exclude_keys]
    rng = random.Random(seed)
    rows = []
    for index, sentences in enumerate(usable):
        ending = sentences[4].split()
        wrong, kind = None, "other_story"
        # no draw at share 0, so the default keeps the random stream of the
        # off-topic-only version that trained the bundled checkpoint
        if contradiction_share > 0 and rng.random() < contradiction_share:
            wrong = alter_negation(ending, rng)
            kind = "negation"
            if wrong is None and lexicon is not None:
                substituted = substitute_keywords([ending], 0, rng, lexicon)
                wrong, kind = (substituted[0], "antonym") if substituted else (None, kind)
        if wrong is None:
            other = rng.randrange(len(usable) - 1)
            other += other >= index  # never the story itself
            wrong, kind = usable[other][4].split(), "other_story"
        rows.append({"context": " ".join(sentences[:4]), "right": sentences[4], "wrong": " ".join(wrong), "kind": kind})
    return datasets.Dataset.from_list(rows)
