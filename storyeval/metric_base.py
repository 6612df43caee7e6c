"""The shared body of the storyeval `evaluate` modules.

The modules under ``metrics/`` only declare their texts and checkpoint family;
checkpoint resolution, loading (once, in ``_download_and_prepare``), input
checks and batching live here.
"""
from __future__ import annotations

import logging
import math

import datasets
import evaluate

from storyeval import checkpoints
from storyeval.inputs import check_same_length, check_texts

logger = logging.getLogger(__name__)


class CheckpointMetric(evaluate.Metric):
    """A metric backed by one checkpoint chosen by ``config_name``.

    Subclasses set ``METRIC`` (a key of :data:`storyeval.checkpoints.REGISTRY`),
    the module texts, ``INPUTS`` (the string columns ``compute`` takes) and
    ``load_scorer(path)``.
    """

    METRIC: str = ""
    CITATION = DESCRIPTION = KWARGS_DESCRIPTION = ""
    REFERENCE_URLS: list[str] = []
    INPUTS: tuple[str, ...] = ("predictions",)

    def _info(self) -> evaluate.MetricInfo:
        if self.config_name == "default":
            logger.warning("%s: config 'default' is '%s'", self.METRIC, checkpoints.DEFAULT_CONFIG[self.METRIC])
        return evaluate.MetricInfo(
            description=self.DESCRIPTION,
            citation=self.CITATION,
            inputs_description=self.KWARGS_DESCRIPTION,
            features=datasets.Features({name: datasets.Value("string") for name in self.INPUTS}),
            reference_urls=self.REFERENCE_URLS,
        )

    def _download_and_prepare(self, dl_manager):
        # unknown names raise KeyError here, at load time, listing the choices
        self.checkpoint_path = checkpoints.resolve_checkpoint(self.METRIC, self.config_name)
        self.scorer = self.load_scorer(self.checkpoint_path)

    def load_scorer(self, path):
        raise NotImplementedError


class StoryScoreMetric(CheckpointMetric):
    """Scores each story in ``predictions``: ``{"scores": [...], "mean_score": x}``."""

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Score ``predictions`` (a list of stories); see the module description below."""
        # our checks first: evaluate's own are about Arrow types, not about what went wrong
        if references is not None:
            raise ValueError(f"{self.METRIC} is reference-free: pass only predictions")
        predictions = check_texts(predictions, "predictions")
        if not predictions:
            return {"scores": [], "mean_score": math.nan}
        return super().compute(predictions=predictions, **kwargs)

    def _compute(self, predictions, batch_size: int = 16, device=None, progress_bar: bool = False, dtype=None):
        scores = self.scorer.score(predictions, batch_size=batch_size, device=device, progress_bar=progress_bar, dtype=dtype)
        return {"scores": scores, "mean_score": sum(scores) / len(scores)}


class ContinuationMetric(CheckpointMetric):
    """Scores each continuation in ``predictions`` given its ``contexts`` on several criteria."""

    INPUTS = ("predictions", "contexts")
    CRITERIA: tuple[str, ...] = ()

    def compute(self, *, predictions=None, contexts=None, references=None, **kwargs):
        """Score ``predictions`` (continuations) given ``contexts``; see the module description below."""
        if references is not None:
            raise ValueError(f"{self.METRIC} is reference-free: pass predictions and contexts")
        predictions = check_texts(predictions, "predictions")
        contexts = check_texts(contexts, "contexts")
        check_same_length(predictions=predictions, contexts=contexts)
        if not predictions:
            return {**{c: [] for c in self.CRITERIA}, **{f"mean_{c}": math.nan for c in self.CRITERIA}}
        return super().compute(predictions=predictions, contexts=contexts, **kwargs)

    def _compute(self, predictions, contexts, batch_size: int = 256, device=None, progress_bar: bool = False):
        scores = self.scorer.score(contexts, predictions, batch_size=batch_size, device=device, progress_bar=progress_bar)
        return {**scores, **{f"mean_{c}": sum(v) / len(v) for c, v in scores.items()}}
