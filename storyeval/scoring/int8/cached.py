"""Int8 scoring from a cached export, without importing torch or transformers.

``dtype="int8"`` exports a checkpoint once (:mod:`storyeval.scoring.int8.runtime`; tracing the
model needs torch) and caches the export. From then on, scoring needs only the int8
runtime, the checkpoint's ``tokenizer.json`` (read by ``tokenizers``, the library
behind transformers' fast tokenizers) and NumPy, and those import in a fraction of
torch's and transformers' time. ``storyeval score --dtype int8`` therefore loads
:class:`CachedInt8Scorer` when :func:`load_cached_int8_scorer` finds everything it needs,
and the torch scorer otherwise: the first run, which exports; a checkpoint whose files
changed since; an encoder that ``dtype="int8"`` refuses; a CPU without int8 instructions.
Both cut, batch and aggregate with :mod:`storyeval.scoring.windows` and run the same export,
so they give the same scores.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from storyeval.checkpoints import resolution as checkpoints
from storyeval.inputs import check_batch_size, check_progress_bar, check_texts
from storyeval.scoring import windows
from storyeval.scoring.int8 import runtime as int8_runtime
from storyeval.scoring.signature import settings_string
from storyeval.text import normalize_story

# the scoring settings of a UNION-architecture checkpoint's config.json, and the defaults that
# storyeval.models.UnionConfig gives those it leaves out (a test keeps the two equal)
SCORING_DEFAULTS = {"max_length": 512, "window_stride": 256, "window_aggregation": "mean", "delexicalize": True}


class CachedInt8Scorer:
    """Scores stories with a cached int8 export, like a :class:`~storyeval.scoring.sequence.SequenceScorer` with ``dtype="int8"``."""

    def __init__(self, run, tokenizer, pad_id: int, settings: dict, name: str, backend: str, folder: Path,
                 num_threads: int | None, preprocess: bool = True):
        self._run, self.tokenizer, self._pad_id, self.name = run, tokenizer, pad_id, name
        self.max_length, self.window_stride = settings["max_length"], settings["window_stride"]
        self.window_aggregation, self.delexicalize = settings["window_aggregation"], settings["delexicalize"]
        self.backend, self.folder, self.num_threads, self.preprocess = backend, folder, num_threads, preprocess
        self.weights = None  # the checkpoint's scoring_digest, as its torch scorer says: set by the loader
        self._prefix, self._suffix = windows.special_token_frame(
            lambda text, special: tokenizer.encode(text, add_special_tokens=special).ids)

    def settings(self, dtype="int8") -> str:
        return settings_string(self.name, _int8_only(dtype), self.weights)

    def windows(self, story: str) -> list[list[int]]:
        text = normalize_story(story, self.delexicalize) if self.preprocess else story
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return windows.split_into_windows(ids, self._prefix, self._suffix, self.max_length, self.window_stride)

    def score(self, stories, batch_size: int = 16, device=None, progress_bar: bool = False, dtype="int8") -> list[float]:
        aggregate = windows.WINDOW_AGGREGATIONS[self.window_aggregation]
        return [aggregate(values) for values in self.window_scores(stories, batch_size, device, progress_bar, dtype)]

    def window_scores(self, stories, batch_size: int = 16, device=None, progress_bar: bool = False, dtype="int8") -> list[list[float]]:
        stories = check_texts(stories, "predictions")
        batch_size = check_batch_size(batch_size)
        check_progress_bar(progress_bar)
        _int8_only(dtype)
        if device not in (None, "cpu"):
            raise ValueError(f"dtype='int8' runs on the CPU only, not on {device}; pass device='cpu'")
        story_windows = windows.all_windows(stories, self.windows)
        window_scores = [0.0] * len(story_windows)
        for chunk, ids, mask in windows.padded_batches(story_windows, batch_size, self._pad_id, progress_bar, windows.CPU_BATCH_TOKENS):
            logits = np.asarray(self._run(ids, mask), dtype=np.float32).reshape(-1)
            for k, value in zip(chunk, _sigmoid(logits).tolist()):
                window_scores[k] = value
        return windows.by_story(story_windows, window_scores, len(stories))


def _int8_only(dtype) -> str:
    if dtype not in ("int8", None):
        raise ValueError(f"this scorer scores in int8 only, not {dtype!r}")
    return "int8"


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    # in float64, rounded to float32, as the torch scorer computes it: the same bits
    return (1.0 / (1.0 + np.exp(-logits.astype(np.float64)))).astype(np.float32)


def load_cached_int8_scorer(checkpoint: str | Path, num_threads: int | None = None, backend: str | None = None,
                            preprocess: bool = True) -> CachedInt8Scorer | None:
    """A :class:`CachedInt8Scorer` for a UNION or plot-coherence checkpoint folder whose int8 export is cached,
    or None where the torch scorer has to score (and export) instead: see the module's docstring.

    ``num_threads`` defaults to ``OMP_NUM_THREADS`` when set (as torch's does), else the runtime's own default,
    one thread per physical core, which is also torch's."""
    folder = Path(checkpoint)
    runtime = int8_runtime.get_backend(backend)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        encoder_type = config["encoder"]["model_type"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a folder this reads: the torch loader says what is wrong
    if (int8_runtime.checkpoint_int8_problem(folder, encoder_type) is not None or not (folder / "tokenizer.json").is_file()
            or not int8_runtime.cpu_has_int8_dot_product_by_flags() or not _installed(runtime)):
        return None
    export = int8_runtime.find_export(folder, runtime)
    if export is None:
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    # as transformers' tokenizer runs it unless asked otherwise: stories are cut into windows and padded here,
    # never truncated or padded by the tokenizer (a tokenizer.json may ask for both)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    threads = num_threads or (int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS", "").isdigit() else None)
    settings = {key: config.get(key, default) for key, default in SCORING_DEFAULTS.items()}
    scorer = CachedInt8Scorer(runtime.load(export, threads), tokenizer, _pad_id(folder, tokenizer), settings,
                              checkpoints.checkpoint_name(folder), runtime.name, export, threads, preprocess)
    scorer.weights = checkpoints.scoring_digest(folder)
    return scorer


def _pad_id(folder: Path, tokenizer) -> int:
    """The padding id transformers' tokenizer gives (its ``pad_token``), 0 without one, as the torch scorer pads."""
    try:
        token = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("pad_token")
    except (OSError, ValueError):
        token = None
    token = token.get("content") if isinstance(token, dict) else token
    return (tokenizer.token_to_id(token) if token else None) or 0


def _installed(runtime) -> bool:
    try:
        runtime.check_installed()
    except int8_runtime.Int8RuntimeMissingError:
        return False
    return True
