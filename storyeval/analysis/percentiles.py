"""A readable scale: a score as a percentile of human-written stories.

Each checkpoint folder can carry ``reference_scores.json``: the checkpoint's own
scores of the human-written stories in the held-out test split of its corpus
(the ``storyeval_training`` builders' split, never used for training or for
choosing a checkpoint), sorted, with their provenance (split, number of items,
commit, storyeval version, command). ``python -m benchmarks.checkpoints.reference_scores``
writes it.

``percentile(score)`` is the share, in percent, of those human-written stories
that score strictly lower: 30 reads "scores lower than 70% of human-written
ROC stories". The scale says where a score falls among human stories of that
corpus; it is not a probability, and a percentile from one corpus's reference
is not comparable with one from another's.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from storyeval.checkpoints.registry import CORPORA

REFERENCE_FILE = "reference_scores.json"
FORMAT_VERSION = 1


@dataclasses.dataclass
class ReferenceDistribution:
    """One checkpoint's sorted scores of one corpus's human-written test items, per criterion."""

    metric: str
    corpus: str
    scores: dict[str, np.ndarray]  # criterion -> sorted scores
    provenance: dict

    def criterion(self, name: str | None) -> str:
        if name is None:
            if len(self.scores) != 1:
                raise ValueError(f"{self.metric} has several criteria; name one of {sorted(self.scores)}")
            return next(iter(self.scores))
        if name not in self.scores:
            raise KeyError(f"no {self.corpus} reference for criterion {name!r}; it has {sorted(self.scores)}")
        return name

    def percentile(self, scores: Sequence[float], criterion: str | None = None) -> list[float]:
        """Per score, the percentage of reference items that score strictly lower (0-100)."""
        reference = self.scores[self.criterion(criterion)]
        values = np.asarray(scores, dtype=float)
        if values.ndim != 1:
            raise ValueError(f"scores must be a flat list of numbers, got shape {values.shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError("scores must be finite numbers")
        # searchsorted on the sorted reference counts the items below each score (what
        # scipy.stats.percentileofscore(kind="strict") does, without re-sorting per call)
        return (100.0 * np.searchsorted(reference, values, side="left") / len(reference)).tolist()


def reference_path(folder: str | Path) -> Path:
    return Path(folder) / REFERENCE_FILE


def load_reference(folder: str | Path, corpus: str | None = None) -> ReferenceDistribution:
    """The reference distribution stored with a checkpoint; ``corpus`` may be left out when it has one only."""
    path = reference_path(folder)
    if not path.is_file():
        raise FileNotFoundError(
            f"{folder} has no {REFERENCE_FILE}, so its scores have no percentile scale; build it from a source checkout "
            f"(benchmarks/ is not installed with the package) with `python -m benchmarks.checkpoints.reference_scores --checkpoint <name>={folder}`"
        )
    payload = json.loads(path.read_text(encoding="utf-8"))
    if payload.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}: unknown format {payload.get('format')!r}; this storyeval reads format {FORMAT_VERSION}")
    references = payload["references"]
    if corpus is None:
        if len(references) != 1:
            raise ValueError(f"{path} holds references for {sorted(references)}; name the corpus")
        corpus = next(iter(references))
    if corpus not in references:
        raise KeyError(f"{path} has no {corpus!r} reference; it has {sorted(references)}")
    entry = references[corpus]
    provenance = {key: value for key, value in entry.items() if key != "scores"} | {"provenance": payload["provenance"]}
    scores = {name: np.asarray(values, dtype=float) for name, values in entry["scores"].items()}
    return ReferenceDistribution(payload["metric"], corpus, scores, provenance)


def percentile(scores: Sequence[float], checkpoint: str | Path, corpus: str | None = None, criterion: str | None = None) -> list[float]:
    """``scores`` of the checkpoint in ``checkpoint`` (a folder) as percentiles of its human reference."""
    return load_reference(checkpoint, corpus).percentile(scores, criterion)


def build_reference(metric: str, corpus: str, scores: dict[str, Sequence[float]], description: dict, decimals: int = 6) -> dict:
    """One corpus's entry of ``reference_scores.json``: the scores sorted (rounded to ``decimals``)
    and what they are (``description``: builder, split, items, what was scored)."""
    if corpus not in CORPORA:
        raise KeyError(f"unknown corpus {corpus!r}; choose from {CORPORA}")
    if not scores or any(len(values) == 0 for values in scores.values()):
        raise ValueError(f"no {metric} reference scores for {corpus}")
    return {**description, "scores": {name: sorted(round(float(v), decimals) for v in values) for name, values in scores.items()}}


def write_reference(folder: str | Path, metric: str, references: dict[str, dict], provenance: dict) -> Path:
    """Write ``reference_scores.json`` (``references``: corpus -> :func:`build_reference` entry)."""
    path = reference_path(folder)
    payload = {"format": FORMAT_VERSION, "metric": metric, "provenance": provenance, "references": references}
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


CORPUS_TITLES = {"roc": "ROCStories", "wp": "WritingPrompts"}


def describe(percentile_value: float, corpus: str) -> str:
    """A percentile in words: "scores higher than 62% of human-written ROCStories test stories"."""
    return f"scores higher than {percentile_value:.0f}% of human-written {CORPUS_TITLES.get(corpus, corpus)} test stories"


def percentile_note(folder: str | Path, score: float, criterion: str | None = None, corpus: str | None = None) -> str:
    """``describe`` for one score of the checkpoint in ``folder`` against its reference of ``corpus`` (None: its only
    one, or ROC where it has several); empty when the checkpoint has no such reference (a user's own checkpoint, say)."""
    try:
        reference = _cached_reference(str(folder), corpus)
    except (FileNotFoundError, KeyError):
        return ""
    return describe(reference.percentile([score], criterion)[0], reference.corpus)


@functools.lru_cache(maxsize=16)
def _cached_reference(folder: str, corpus: str | None = None) -> ReferenceDistribution:
    if corpus is None:
        references = json.loads(reference_path(folder).read_text(encoding="utf-8"))["references"] if reference_path(folder).is_file() else {}
        corpus = "roc" if "roc" in references else None  # continuation quality carries both
    return load_reference(folder, corpus)
