"""The shared body of the storyeval `evaluate` modules.

The modules under ``metrics/`` only declare their texts and checkpoint family;
checkpoint resolution, loading (once, in ``_download_and_prepare``), input
checks and batching live here.
"""
from __future__ import annotations

import hashlib
import inspect
import logging
import math
import os
import re

import datasets
import evaluate

from storyeval.checkpoints import resolution as checkpoints
from storyeval.checkpoints.registry import default_note, metric_spec
from storyeval.inputs import (
    DTYPE_NAMES,
    FLOAT_DTYPE_NAMES,
    check_batch_size,
    check_on_invalid,
    check_progress_bar,
    check_same_length,
    check_strings,
    check_texts,
    rows_by_reason,
    unscorable,
    with_nan_at,
)

logger = logging.getLogger(__name__)


INT8_DOC = """    "int8" (CPU only) runs an int8 copy of the model in OpenVINO
        (`pip install openvino nncf onnx`; exported once and cached). Its Spearman
        with float32 is 0.9992 on 1,000 ROC stories; scores move by 0.004 on average.
"""


def runtime_options_doc(batch_size: int, unit: str, int8: bool = True) -> str:
    """The ``compute()`` options every metric takes, for the modules' argument descriptions;
    ``int8``: whether the metric's scorer runs in int8 too (the story classifiers)."""
    names, int8_doc = ('"bfloat16", "float16" or "int8"', INT8_DOC) if int8 else ('"bfloat16" or "float16"', "")
    return f"""    batch_size (`int`, defaults to {batch_size}): {unit} scored per forward pass.
    device (`str`, optional): e.g. "cpu", "cuda:1"; defaults to CUDA when available.
    progress_bar (`bool`, defaults to False): show a progress bar.
    dtype (`str`, optional): "float32" (default), {names}. bfloat16 is
        about 2x faster on some CPUs with bfloat16 instructions, slower on others (time it); scores move slightly, so
        compare scores computed in one dtype only (the settings string records it).
{int8_doc}    on_invalid (`str`, defaults to "raise"): what a text that cannot be scored does (no
        letters, or clearly not English: the checkpoints are trained on English stories only):
        "raise" stops with an error naming it; "nan" scores the others, gives it NaN and
        logs a warning with its row and why.
"""


def say_default(metric: str, default: str, fast: str | None) -> None:
    """A load of the default config: where a faster config exists, one line that names it (a warning, so that it
    shows at evaluate's default verbosity); else the config at INFO, so a normal load does not read like a problem."""
    note = default_note(metric, default, fast)
    if note:
        logger.warning(note)
    else:
        logger.info("%s: config 'default' is '%s'", metric, default)


class CheckpointMetric(evaluate.Metric):
    """A metric backed by one checkpoint chosen by ``config_name``.

    Subclasses set ``METRIC`` (a key of :data:`storyeval.checkpoints.resolution.REGISTRY`),
    the module texts and ``INPUTS`` (the string columns ``compute`` takes); the
    scorer comes from :func:`storyeval.scoring.sequence.load_scorer`.
    """

    METRIC: str = ""
    CITATION = DESCRIPTION = KWARGS_DESCRIPTION = ""
    REFERENCE_URLS: list[str] = []
    INPUTS: tuple[str, ...] = ("predictions",)
    DTYPES: tuple[str, ...] = DTYPE_NAMES  # the precisions its scorer runs in

    def _info(self) -> evaluate.MetricInfo:
        if self.config_name == "default":
            spec = metric_spec(self.METRIC)
            say_default(spec.name, spec.default, spec.fast)
        return evaluate.MetricInfo(
            description=self.DESCRIPTION,
            citation=self.CITATION,
            inputs_description=self.KWARGS_DESCRIPTION,
            features=datasets.Features({name: datasets.Value("string") for name in self.INPUTS}),
            reference_urls=self.REFERENCE_URLS,
        )

    def _build_data_dir(self):
        # evaluate joins config_name onto its cache dir, so a folder config ('/abs/ckpt', '../ckpt')
        # put its Arrow and lock files in or beside the checkpoint: give such names a safe folder instead
        if self.config_name == "default" or self.config_name in checkpoints.REGISTRY.get(self.METRIC, {}):
            return super()._build_data_dir()
        readable = re.sub(r"[^\w.-]+", "_", self.config_name).strip("._")[-60:]
        digest = hashlib.sha256(self.config_name.encode()).hexdigest()[:12]
        data_dir = os.path.join(self._data_dir_root, self.name, f"{readable}-{digest}")
        os.makedirs(data_dir, exist_ok=True)
        return data_dir

    def _download_and_prepare(self, dl_manager):
        # unknown names raise ValueError here, at load time, listing the choices
        from storyeval.scoring.sequence import load_scorer

        # evaluate.load(..., download_config=datasets.DownloadConfig(local_files_only=True)) keeps the checkpoint
        # offline too; otherwise HF_HUB_OFFLINE decides
        local_only = True if getattr(dl_manager.download_config, "local_files_only", False) else None
        self.checkpoint_path = checkpoints.resolve_checkpoint(self.METRIC, self.config_name, local_files_only=local_only)
        self.scorer = load_scorer(self.METRIC, self.checkpoint_path)  # refuses another metric's checkpoint

    def check_reference_free(self, references) -> None:
        if references is not None:
            raise ValueError(f"{self.METRIC} is reference-free: pass {' and '.join(self.INPUTS)} only")

    def has_queued_inputs(self) -> bool:
        """Whether ``add``/``add_batch`` queued inputs that ``compute`` has not consumed yet."""
        return self.writer is not None

    def check_runtime_options(self, options: dict) -> None:
        """Reject an option ``_compute`` does not take, or a bad value, before evaluate consumes the queued inputs."""
        from storyeval.scoring.devices import resolve_device, resolve_dtype

        accepted = [name for name in inspect.signature(self._compute).parameters if name not in self.INPUTS]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise TypeError(f"{self.METRIC}.compute got unknown option(s) {unknown}; it takes {accepted}")
        if "batch_size" in options:
            check_batch_size(options["batch_size"])
        if "progress_bar" in options:
            check_progress_bar(options["progress_bar"])
        if options.get("device") is not None:
            resolve_device(options["device"])
        if options.get("dtype") is not None:
            resolve_dtype(options["dtype"], self.DTYPES)
        if "on_invalid" in options:
            check_on_invalid(options["on_invalid"])


def unscorable_rows(on_invalid: str, warn: bool = True, **columns: list[str]) -> list[int]:
    """Rows where a text of any column cannot be scored: an error naming the first (on_invalid="raise"),
    or their indices ("nan"), with a warning naming them unless ``warn`` is False: the checks made before
    inputs are queued pass False, so that the warning comes once, from ``_compute``, which writes the NaNs."""
    check_on_invalid(on_invalid)
    if on_invalid == "raise":
        for name, texts in columns.items():
            check_texts(texts, name)
        return []
    reasons: dict[int, str] = {}
    for texts in columns.values():
        for i, text in enumerate(texts):
            if i not in reasons and (found := unscorable(text)):
                reasons[i] = found[0]
    rows = sorted(reasons)
    if rows and warn:
        grouped: dict[str, list[int]] = {}
        for i in rows:
            grouped.setdefault(reasons[i], []).append(i)
        logger.warning("%d input(s) cannot be scored and score NaN: %s", len(rows), rows_by_reason(grouped))
    return rows


def nothing_to_score(unit: str) -> ValueError:
    """The error of a ``compute()`` with nothing passed or queued to score: an empty input is refused, as
    ``storyeval score`` refuses an empty file, rather than answered with a mean of nothing."""
    return ValueError(f"predictions is empty: no {unit} to score")


def mean(values: list[float]) -> float:
    """The mean over the scored rows (NaN when none was)."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


class StoryScoreMetric(CheckpointMetric):
    """Scores each story in ``predictions``: ``{"scores": [...], "mean_score": x, "settings": "..."}``.

    Stories can also be queued with ``add``/``add_batch`` and scored by a
    ``compute()`` without ``predictions``, as with any ``evaluate`` metric.
    ``contexts`` are accepted and ignored, so that ``evaluate.combine`` can pass
    the same inputs to this metric and to continuation quality.
    """

    def add_batch(self, *, predictions=None, references=None, contexts=None, on_invalid: str = "raise", **kwargs):
        """Queue a list of stories for the next ``compute()``; see the module description below."""
        self.check_reference_free(references)
        predictions = check_strings(predictions, "predictions")
        self.check_ignored_contexts(contexts, predictions)
        unscorable_rows(on_invalid, False, predictions=predictions)  # raises now, not at compute, unless NaN was asked for
        super().add_batch(predictions=predictions, **kwargs)

    def add(self, *, prediction=None, reference=None, context=None, on_invalid: str = "raise", **kwargs):
        """Queue one story for the next ``compute()``; see the module description below."""
        # evaluate.combine's add hands each module its item under the feature's name, as evaluate's own add takes it
        prediction = kwargs.pop("predictions", prediction)
        self.check_reference_free(reference)
        (prediction,) = check_strings([prediction], "prediction")
        unscorable_rows(on_invalid, False, prediction=[prediction])
        super().add(prediction=prediction, **kwargs)

    @staticmethod
    def check_ignored_contexts(contexts, predictions) -> None:
        # ignored, but a list of another length means the caller's columns do not line up
        if contexts is not None and predictions is not None:
            check_same_length(predictions=predictions, contexts=check_strings(contexts, "contexts"))

    def compute(self, *, predictions=None, references=None, contexts=None, **kwargs):
        """Score ``predictions`` (a list of stories) and any stories queued by ``add``/``add_batch``."""
        # our checks first: evaluate's own are about Arrow types, not about what went wrong
        self.check_reference_free(references)
        self.check_runtime_options(kwargs)
        if predictions is None and self.has_queued_inputs():
            return super().compute(**kwargs)
        predictions = check_strings(predictions, "predictions")
        self.check_ignored_contexts(contexts, predictions)
        unscorable_rows(kwargs.get("on_invalid", "raise"), False, predictions=predictions)
        if not predictions and not self.has_queued_inputs():
            raise nothing_to_score("stories")
        # queued past our add_batch, which would check them again without on_invalid (evaluate's compute does the same)
        super().add_batch(predictions=predictions)
        return super().compute(**kwargs)

    def empty_result(self, dtype=None) -> dict:
        return {"scores": [], "mean_score": math.nan, "settings": self.scorer.settings(dtype)}

    def _compute(self, predictions, batch_size: int = 16, device=None, progress_bar: bool = False, dtype=None,
                 on_invalid: str = "raise"):
        if not predictions:  # only empty batches were queued
            raise nothing_to_score("stories")
        skipped = unscorable_rows(on_invalid, predictions=predictions)
        skipped_rows = set(skipped)
        kept = [p for i, p in enumerate(predictions) if i not in skipped_rows]
        if not kept:  # nothing could be scored (on_invalid="nan")
            return {**self.empty_result(dtype), "scores": [math.nan] * len(predictions)}
        scores = self.scorer.score(kept, batch_size=batch_size, device=device, progress_bar=progress_bar, dtype=dtype)
        scores = with_nan_at(skipped, len(predictions), scores)
        return {"scores": scores, "mean_score": mean(scores), "settings": self.scorer.settings(dtype)}


class ContinuationMetric(CheckpointMetric):
    """Scores each continuation in ``predictions`` given its ``contexts`` on several criteria."""

    INPUTS = ("predictions", "contexts")
    DTYPES = FLOAT_DTYPE_NAMES
    CRITERIA: tuple[str, ...] = ()

    def add_batch(self, *, predictions=None, contexts=None, references=None, on_invalid: str = "raise", **kwargs):
        """Queue continuations and their contexts for the next ``compute()``; see the module description below."""
        self.check_reference_free(references)
        predictions, contexts = self.check_pairs(predictions, contexts, on_invalid)
        super().add_batch(predictions=predictions, contexts=contexts, **kwargs)

    def add(self, *, prediction=None, context=None, reference=None, on_invalid: str = "raise", **kwargs):
        """Queue one continuation and its context for the next ``compute()``; see the module description below."""
        # evaluate.combine's add hands each module its items under the features' names, as evaluate's own add takes them
        prediction, context = kwargs.pop("predictions", prediction), kwargs.pop("contexts", context)
        self.check_reference_free(reference)
        (prediction,), (context,) = self.check_pairs([prediction], [context], on_invalid)
        super().add(prediction=prediction, contexts=context, **kwargs)  # evaluate keys extra inputs by feature name

    def compute(self, *, predictions=None, contexts=None, references=None, **kwargs):
        """Score ``predictions`` (continuations) given ``contexts``, and any pairs queued by ``add``/``add_batch``."""
        self.check_reference_free(references)
        self.check_runtime_options(kwargs)
        if predictions is None and contexts is None and self.has_queued_inputs():
            return super().compute(**kwargs)
        predictions, contexts = self.check_pairs(predictions, contexts, kwargs.get("on_invalid", "raise"))
        if not predictions and not self.has_queued_inputs():
            raise nothing_to_score("continuations")
        super().add_batch(predictions=predictions, contexts=contexts)  # as above, checked already
        return super().compute(**kwargs)

    def empty_result(self, dtype=None) -> dict:
        return {**{c: [] for c in self.CRITERIA}, **{f"mean_{c}": math.nan for c in self.CRITERIA},
                "settings": self.scorer.settings(dtype)}

    @staticmethod
    def check_pairs(predictions, contexts, on_invalid: str = "raise") -> tuple[list[str], list[str]]:
        predictions = check_strings(predictions, "predictions")
        contexts = check_strings(contexts, "contexts")
        check_same_length(predictions=predictions, contexts=contexts)
        unscorable_rows(on_invalid, False, predictions=predictions, contexts=contexts)
        return predictions, contexts

    def _compute(self, predictions, contexts, batch_size: int = 256, device=None, progress_bar: bool = False, dtype=None,
                 on_invalid: str = "raise"):
        if not predictions:  # only empty batches were queued
            raise nothing_to_score("continuations")
        skipped = set(unscorable_rows(on_invalid, predictions=predictions, contexts=contexts))
        kept = [i for i in range(len(predictions)) if i not in skipped]
        if not kept:  # nothing could be scored (on_invalid="nan")
            return {**self.empty_result(dtype), **{c: [math.nan] * len(predictions) for c in self.CRITERIA}}
        scores = self.scorer.score([contexts[i] for i in kept], [predictions[i] for i in kept], batch_size=batch_size,
                                   device=device, progress_bar=progress_bar, dtype=dtype)
        scores = {c: with_nan_at(sorted(skipped), len(predictions), v) for c, v in scores.items()}
        return {**scores, **{f"mean_{c}": mean(v) for c, v in scores.items()}, "settings": self.scorer.settings(dtype)}
