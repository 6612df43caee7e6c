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
from storyeval.inputs import check_texts

logger = logging.getLogger(__name__)


class StoryScoreMetric(evaluate.Metric):
    """A metric that scores each story in ``predictions`` with one checkpoint.

    Subclasses set ``METRIC`` (a key of :data:`storyeval.checkpoints.REGISTRY`),
    the three module texts, and ``load_scorer(path)``.
    """

    METRIC: str = ""
    CITATION = DESCRIPTION = KWARGS_DESCRIPTION = ""
    REFERENCE_URLS: list[str] = []

    def _info(self) -> evaluate.MetricInfo:
        self._check_config_name()
        return evaluate.MetricInfo(
            description=self.DESCRIPTION,
            citation=self.CITATION,
            inputs_description=self.KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string")}),
            reference_urls=self.REFERENCE_URLS,
        )

    def _check_config_name(self) -> None:
        # fail at load time, before anything is downloaded; resolve_checkpoint repeats the full check
        name = self.config_name
        if name == "default":
            logger.warning("%s: config 'default' is '%s'", self.METRIC, checkpoints.DEFAULT_CONFIG[self.METRIC])

    def _download_and_prepare(self, dl_manager):
        path = checkpoints.resolve_checkpoint(self.METRIC, self.config_name)
        self.checkpoint_path = path
        self.scorer = self.load_scorer(path)

    def load_scorer(self, path):
        raise NotImplementedError

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Score ``predictions`` (a list of stories); see the module description below."""
        # our checks first: evaluate's own are about Arrow types, not about what went wrong
        if references is not None:
            raise ValueError(f"{self.METRIC} is reference-free: pass only predictions")
        predictions = check_texts(predictions, "predictions")
        if not predictions:
            return {"scores": [], "mean_score": math.nan}
        return super().compute(predictions=predictions, **kwargs)

    def _compute(self, predictions, batch_size: int = 16, device=None, progress_bar: bool = False):
        scores = self.scorer.score(predictions, batch_size=batch_size, device=device, progress_bar=progress_bar)
        return {"scores": scores, "mean_score": sum(scores) / len(scores)}
