"""A scorer that scores in int8 by default, with its own int8 backend and thread count.

Any :class:`~storyeval.scoring.sequence.SequenceScorer` scores in int8 with ``dtype="int8"``
(see :mod:`storyeval.scoring.int8.runtime`), on torch's thread count and the default
backend; :func:`load_int8_scorer` chooses both and exports (or finds the cached
export) at load, so the first ``score`` call does not pay for it.
"""
from __future__ import annotations

from pathlib import Path

import torch

from storyeval.scoring.int8.runtime import get_backend, int8_model, scheme_float_patterns
from storyeval.scoring.sequence import SequenceScorer, load_union_scorer

INT8 = torch.int8  # the dtype the scorers resolve "int8" to


class Int8Scorer(SequenceScorer):
    """A :class:`SequenceScorer` that scores in int8 by default, with a chosen backend and thread count."""

    def __init__(self, *args, backend: str | None = None, num_threads: int | None = None, scheme: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        get_backend(backend)  # an unknown name fails here, not at the first score
        if scheme is not None:
            scheme_float_patterns(scheme)  # and an unknown scheme
        self.backend, self.num_threads, self.scheme = backend, num_threads, scheme

    def model_in(self, dtype: torch.dtype, device: torch.device | None = None):
        key = (device or self.device, dtype)
        if dtype == INT8 and key not in self._models:
            # this scorer is asked for int8 by name (the benchmarks measure with it): a checkpoint that dtype="int8"
            # refuses elsewhere (its int8 copy misses the fidelity rule, or was not measured) gets a warning here
            self._models[key] = int8_model(self.model, self.tokenizer, key[0], self.backend, self.num_threads, require_drift_bound=False,
                                           scheme=self.scheme)
        return super().model_in(dtype, device)

    def score(self, stories, batch_size: int = 16, device=None, progress_bar: bool = False, dtype="int8") -> list[float]:
        return super().score(stories, batch_size=batch_size, device=device, progress_bar=progress_bar, dtype=dtype)


def load_int8_scorer(checkpoint: str | Path, backend: str | None = None, num_threads: int | None = None, preprocess: bool = True,
                     scheme: str | None = None) -> Int8Scorer:
    """An :class:`Int8Scorer` for a UNION or plot-coherence checkpoint folder, exported (or found in the cache) now, by
    ``scheme`` (default: the checkpoint's measured one; :func:`storyeval.scoring.int8.runtime.scheme_float_patterns`)."""
    loaded = load_union_scorer(checkpoint, device="cpu", preprocess=preprocess)
    scorer = Int8Scorer(
        loaded.model, loaded.tokenizer, loaded.max_length, loaded.window_stride, "cpu", loaded.preprocess, loaded.delexicalize,
        name=loaded.name, window_aggregation=loaded.window_aggregation, backend=backend, num_threads=num_threads, scheme=scheme,
    )
    scorer.weights = loaded.weights
    scorer.model_in(INT8)
    return scorer
