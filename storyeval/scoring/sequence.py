"""Batch scoring of stories with a sequence-level model, shared by the metrics.

Load once, score many times: a scorer keeps its model and tokenizer, sorts
its inputs by length so that batches waste little padding, and restores the
input order. A story longer than the model's window is never truncated: it is
cut into overlapping windows (:mod:`storyeval.scoring.windows`), every window is scored,
and the story's score is the mean over its windows, or their minimum where the
checkpoint's ``window_aggregation`` says so (a story is then as plausible as its
weakest part). A story that needs more than ``MAX_WINDOWS`` windows is refused
with an error naming the limit, before anything is scored.

Scores are computed in float32 by default. ``dtype="bfloat16"`` runs a
bfloat16 copy of the model instead: on some CPUs with bfloat16 instructions
(AVX512-BF16, AMX) it is much faster, on others slower, and scores move slightly (see
BENCHMARKS.md), so compare scores only within one dtype.
"""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import torch
from transformers import AutoTokenizer

from storyeval.checkpoints import bundled
from storyeval.checkpoints import resolution as checkpoints
from storyeval.checkpoints.registry import metric_spec
from storyeval.inputs import PROBE_STORY, check_batch_size, check_progress_bar, check_texts
from storyeval.scoring import windows
from storyeval.scoring.devices import DTYPES, resolve_device, resolve_dtype  # noqa: F401 (DTYPES: part of this module's API)
from storyeval.scoring.int8 import runtime as int8_runtime
from storyeval.scoring.loading import quiet_loading
from storyeval.scoring.signature import settings_string
from storyeval.scoring.windows import MAX_WINDOWS, WINDOW_AGGREGATIONS, StoryTooLongError  # noqa: F401 (part of this module's API)
from storyeval.text import normalize_story


class SequenceScorer:
    """Scores stories with a model whose forward returns one logit per sequence."""

    def __init__(self, model, tokenizer, max_length: int, window_stride: int, device=None, preprocess: bool = True,
                 delexicalize: bool = True, name: str = "unnamed", window_aggregation: str = "mean"):
        if not 0 < window_stride <= max_length - 2:
            raise ValueError(f"window_stride must be in 1..{max_length - 2}, got {window_stride}")
        if window_aggregation not in WINDOW_AGGREGATIONS:
            raise ValueError(f"window_aggregation must be one of {sorted(WINDOW_AGGREGATIONS)}, got {window_aggregation!r}")
        self.device = resolve_device(device)  # where the model loaded; a score(device=...) call never moves it
        self.model = model.to(self.device).eval()
        # copies on other devices or in lower precision, made on first use: the loaded scorers are cached and
        # shared, so one caller's device or dtype must not change another's, and self.model stays float32
        # so that switching back is exact
        self._models = {(self.device, torch.float32): self.model}
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.window_stride = window_stride
        self.preprocess = preprocess
        self.delexicalize = delexicalize
        self.window_aggregation = window_aggregation
        self._prefix, self._suffix = _special_token_frame(tokenizer)
        self.name = name  # the checkpoint's short name, for the settings string
        self.weights = None  # its scoring_digest, set by the loader that knows its folder

    def settings(self, dtype=None) -> str:
        """What a score from :meth:`score` with this ``dtype`` was computed with (see :mod:`storyeval.scoring.signature`):
        float32 for ``"int8"`` on a CPU without int8 instructions, which scores in float32."""
        if dtype is not None and resolve_dtype(dtype) == torch.int8 and self._int8_falls_back():
            dtype = "float32"
        return settings_string(self.name, dtype, self.weights)

    def _int8_falls_back(self) -> bool:
        """Whether ``dtype="int8"`` scores with the float32 model here: it did, or this CPU has no int8 instructions."""
        made = self._models.get((self.device, torch.int8))
        if made is not None:
            return made is self.model
        return int8_runtime.get_backend(getattr(self, "backend", None)).cpu_problem() is not None

    def windows(self, story: str) -> list[list[int]]:
        """Token-id windows of at most ``max_length`` tokens covering the whole story
        (a ValueError when it needs more than :data:`MAX_WINDOWS`)."""
        text = normalize_story(story, self.delexicalize) if self.preprocess else story
        ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return windows.split_into_windows(ids, self._prefix, self._suffix, self.max_length, self.window_stride)

    def reading_as_given(self) -> SequenceScorer:
        """This scorer, its model shared, reading texts as they are given: what a mix's second scorer reads is cut from
        the story as the mix prepared it, as its training pairs were, and normalising it again would change it (a
        closing quote '' becomes an opening one ``)."""
        reader = copy.copy(self)
        reader.preprocess = False
        return reader

    def model_in(self, dtype: torch.dtype, device: torch.device | None = None):
        """The model with weights in ``dtype`` on ``device`` (default: where the scorer loaded)."""
        key = (device or self.device, dtype)
        if key not in self._models and dtype == torch.int8:
            # an int8 runtime's copy; float32 on a CPU without int8 instructions
            self._models[key] = int8_runtime.int8_model(self.model, self.tokenizer, key[0])
        if key not in self._models:
            # copied outside inference mode, or the copy's weights would be inference tensors that forward rejects
            with torch.inference_mode(False):
                self._models[key] = copy.deepcopy(self.model).to(device=key[0], dtype=dtype).requires_grad_(False)
        return self._models[key]

    def score(self, stories, batch_size: int = 16, device=None, progress_bar: bool = False, dtype=None) -> list[float]:
        """One score in [0, 1] per story, in input order: its window scores aggregated as the checkpoint says."""
        return self.score_checked(check_texts(stories, "predictions"), batch_size, device, progress_bar, dtype)

    def score_checked(self, texts: list[str], batch_size: int = 16, device=None, progress_bar: bool = False, dtype=None,
                      story_windows: list[tuple[int, list[int]]] | None = None) -> list[float]:
        """:meth:`score` of texts that need no checks: stories a mix checked once for all its scorers, with their
        ``story_windows`` where it cut them already (:func:`windows.all_windows` with :meth:`windows`), or texts cut from
        such stories (a mix's endings or neighbouring pairs). A part is not held to a story's checks: two sentences of
        an English story may read as Spanish ("¿Qué? No sé."). A text too long for :data:`MAX_WINDOWS` raises
        :class:`StoryTooLongError` with its index in ``texts``."""
        aggregate = WINDOW_AGGREGATIONS[self.window_aggregation]
        return [aggregate(values) for values in self._window_scores(list(texts), batch_size, device, progress_bar, dtype, story_windows)]

    def window_scores(self, stories, batch_size: int = 16, device=None, progress_bar: bool = False, dtype=None) -> list[list[float]]:
        """Each story's window scores in [0, 1], in window order (one for a story that fits one window)."""
        return self._window_scores(check_texts(stories, "predictions"), batch_size, device, progress_bar, dtype)

    @torch.inference_mode()
    def _window_scores(self, stories: list[str], batch_size, device, progress_bar, dtype, story_windows=None) -> list[list[float]]:
        batch_size = check_batch_size(batch_size)
        check_progress_bar(progress_bar)
        dtype = resolve_dtype(dtype)
        device = self.device if device is None else resolve_device(device)
        model = self.model_in(dtype, device)
        if story_windows is None:
            story_windows = windows.all_windows(stories, self.windows)
        window_scores = [0.0] * len(story_windows)
        max_tokens = windows.CPU_BATCH_TOKENS if device.type == "cpu" else None  # a GPU takes big batches of long windows well
        for chunk, ids, mask in windows.padded_batches(story_windows, batch_size, self.tokenizer.pad_token_id or 0, progress_bar,
                                                       max_tokens):
            logits = model(input_ids=torch.from_numpy(ids).to(device), attention_mask=torch.from_numpy(mask).to(device)).logits
            # the sigmoid in float64, rounded to float32: exact to the last bit, so the int8 scorer without torch
            # (storyeval.scoring.int8.cached) gives the same scores
            for k, value in zip(chunk, torch.sigmoid(logits.double()).float().tolist()):
                window_scores[k] = value
        return windows.by_story(story_windows, window_scores, len(stories))


def _special_token_frame(tokenizer) -> tuple[list[int], list[int]]:
    return windows.special_token_frame(lambda text, special: tokenizer(text, add_special_tokens=special)["input_ids"])


def load_story_classifier(checkpoint: str | Path, device=None, preprocess: bool = True) -> SequenceScorer:
    """A scorer for a UNION-architecture checkpoint folder (UNION and plot coherence; see :mod:`storyeval.checkpoints.resolution`).

    It does not check which metric the folder belongs to, so benchmarks can score one metric's
    checkpoint with the other on purpose; :func:`load_scorer` checks.
    """
    return _load_story_classifier(str(checkpoint), str(resolve_device(device)), preprocess)


# the names the training code and benchmarks know the loader by
load_union_scorer = load_plot_coherence_scorer = load_story_classifier


@functools.lru_cache(maxsize=8)
def _load_story_classifier(checkpoint: str, device: str, preprocess: bool) -> SequenceScorer:
    from storyeval.models import UnionModel

    folder = Path(checkpoint)
    files = bundled.folder_stamp(folder) if folder.is_dir() else None  # before the load: a file changed during it shows
    with quiet_loading():
        model = UnionModel.from_pretrained(checkpoint, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    if files is not None:
        int8_runtime.record_checkpoint(model, folder, files)  # so its int8 export is found by the folder's files
    if model.config.has_reconstruction_head:
        model.drop_reconstruction_head()  # scoring never needs it
    config = model.config
    scorer = SequenceScorer(model, tokenizer, config.max_length, config.window_stride, device, preprocess, config.delexicalize,
                            name=checkpoints.checkpoint_name(checkpoint), window_aggregation=config.window_aggregation)
    if config.ending_of is not None:
        from storyeval.scoring.ending import mix_scorer

        # an ending scorer completes a story checkpoint (itself a mix, maybe), loaded (and cached) as any other
        story = _load_story_classifier(str(checkpoints.resolve_named(config.ending_of)), device, preprocess)
        scorer = mix_scorer(config.ending_reads, story, scorer, config.ending_weight, config.ending_sentences,
                            scorer.name, config.ending_lowest_share)
    if files is not None:
        scorer.weights = checkpoints.scoring_digest(folder)
    return scorer


def clear_loaded_scorers() -> None:
    """Forget the scorers loaded so far, so that a checkpoint folder changed since is read again."""
    _load_story_classifier.cache_clear()


def load_scorer(metric: str, checkpoint: str | Path, device=None):
    """The scorer for ``metric`` from a checkpoint folder, loaded once per folder and device.

    The folder must belong to ``metric`` (its own files say which). The scorer runs
    through its text side once, so that missing NLTK data is an error here and not at
    the first ``score``, by which time evaluate has taken the queued inputs.
    """
    spec = metric_spec(metric)
    checkpoints.check_metric(metric, checkpoint)
    scorer = spec.load(str(checkpoint), None if device is None else str(device))
    if spec.takes_contexts:
        context, continuation = PROBE_STORY.split(". ", 1)
        scorer.score([context + "."], [continuation])
    else:
        scorer.windows(PROBE_STORY)
    return scorer
