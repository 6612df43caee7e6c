"""Load-once scorer for continuation quality: (context, continuation) -> overall, relevance, interestingness."""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from storyeval.checkpoints.resolution import checkpoint_name, scoring_digest
from storyeval.inputs import FLOAT_DTYPE_NAMES, check_batch_size, check_progress_bar, check_same_length, check_texts
from storyeval.models.continuation.cooccurrence import CooccurrenceStats
from storyeval.models.continuation.encoder import load_learned_encoder
from storyeval.models.continuation.features import FeatureExtractor
from storyeval.models.continuation.model import CRITERIA, ContinuationModel
from storyeval.models.continuation.ngram_lm import NgramLM
from storyeval.scoring.devices import resolve_device, resolve_dtype
from storyeval.scoring.signature import settings_string
from storyeval.text import normalize_story


class ContinuationScorer:
    def __init__(self, folder, device=None, preprocess: bool = True):
        folder = Path(folder)
        config = json.loads((folder / "scorer_config.json").read_text())
        groups = tuple(config["feature_groups"])
        self.device = resolve_device(device)
        self.extractor = FeatureExtractor(
            lm=NgramLM.load(folder / "lm.npz") if "lm" in groups else None,
            cooccurrence=CooccurrenceStats.load(folder / "cooccurrence.npz") if "pmi" in groups else None,
            groups=groups,
            version=config.get("feature_version", 1),  # checkpoints from before versions had 1
            encoder=load_learned_encoder(folder, config, self.device),
        )
        self.model = ContinuationModel.load(folder).to(self.device)
        self._models = {(self.device, torch.float32): self.model}
        self.preprocess = preprocess
        self.name, self.weights = checkpoint_name(folder), scoring_digest(folder)  # for the settings string

    def settings(self, dtype=None) -> str:
        """What a score from :meth:`score` with this ``dtype`` was computed with (see :mod:`storyeval.scoring.signature`)."""
        return settings_string(self.name, dtype, self.weights)

    def model_in(self, dtype: torch.dtype, device: torch.device):
        """The model in ``dtype`` on ``device``: a copy, made on first use, where it is not how the scorer loaded
        (loaded scorers are cached and shared, so one caller's device or dtype must not change another's model)."""
        if (device, dtype) not in self._models:
            with torch.inference_mode(False):
                self._models[device, dtype] = copy.deepcopy(self.model).to(device=device, dtype=dtype)
        return self._models[device, dtype]

    @torch.inference_mode()
    def score(self, contexts, continuations, batch_size: int = 256, device=None, progress_bar: bool = False,
              dtype=None) -> dict[str, list[float]]:
        continuations = check_texts(continuations, "predictions")
        contexts = check_texts(contexts, "contexts")
        check_same_length(predictions=continuations, contexts=contexts)
        batch_size = check_batch_size(batch_size)
        check_progress_bar(progress_bar)
        dtype = resolve_dtype(dtype, FLOAT_DTYPE_NAMES)  # int8 runs the story classifiers only
        device = self.device if device is None else resolve_device(device)
        model = self.model_in(dtype, device)
        if self.preprocess:
            contexts = [normalize_story(c) for c in contexts]
            continuations = [normalize_story(c) for c in continuations]
        outputs = []
        for begin in tqdm(range(0, len(contexts), batch_size), disable=not progress_bar, desc="scoring", unit="batch"):
            ctx, cont = contexts[begin : begin + batch_size], continuations[begin : begin + batch_size]
            # the learned encoder, where there is one, runs on the same device and in the same dtype as the head
            features = self.extractor([c.split() for c in ctx], [c.split() for c in cont], device=device, dtype=dtype)
            features = torch.from_numpy(features).to(device=device, dtype=dtype)
            outputs.append(model(ctx, cont, features).float().cpu().numpy())
        scores = np.concatenate(outputs) if outputs else np.zeros((0, len(CRITERIA)))
        return {criterion: scores[:, i].tolist() for i, criterion in enumerate(CRITERIA)}


@functools.lru_cache(maxsize=4)
def load_continuation_scorer(folder: str, device: str | None = None) -> ContinuationScorer:
    return ContinuationScorer(folder, device)
