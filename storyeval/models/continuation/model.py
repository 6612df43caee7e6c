"""The continuation scorer of Sagarkar et al. (2018): charagram encodings + features -> O, R, I.

Text is encoded charagram-style: every word (with ``#`` boundary marks) is cut
into character n-grams, each n-gram is hashed into one of ``buckets`` embedding
rows (CRC32, so ids are stable across runs and machines), and the rows are
averaged into a ``dim``-dimensional vector.

Inputs: ``cont`` = [v_c]; ``sim+cont`` = [v_b * v_c, |v_b - v_c|, v_c], where
v_b encodes the context and v_c the continuation; the standardised features
are appended. ``features`` reads the standardised features alone: no charagram
embeddings, the small head for a checkpoint whose learned encoder carries the
text, when about 200 ratings are all there is to fit. One ReLU hidden layer, then
3 outputs: overall, relevance, interestingness.
"""
from __future__ import annotations

import functools
import json
import zlib
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

CRITERIA = ("overall", "relevance", "interestingness")
INPUT_MODES = ("cont", "sim+cont", "features")


@functools.lru_cache(maxsize=200_000)
def _word_ngram_ids(word: str, orders: tuple[int, ...], buckets: int) -> tuple[int, ...]:
    # cached per word: words recur across texts far more often than whole texts do
    marked = f"#{word}#"
    return tuple(
        zlib.crc32(marked[i : i + n].encode()) % buckets for n in orders for i in range(max(len(marked) - n + 1, 1))
    )


@functools.lru_cache(maxsize=200_000)
def char_ngram_ids(text: str, orders=(2, 3, 4), buckets: int = 1 << 13) -> tuple[int, ...]:
    """Hashed character n-grams of every word; cached, since training revisits the same texts."""
    ids = [i for word in text.lower().split() for i in _word_ngram_ids(word, tuple(orders), buckets)]
    return tuple(ids) or (0,)


class ContinuationModel(nn.Module):
    def __init__(self, num_features: int, input_mode: str = "sim+cont", dim: int = 300, hidden: int = 300,
                 buckets: int = 1 << 13, orders=(2, 3, 4)):
        super().__init__()
        if input_mode not in INPUT_MODES:
            raise KeyError(f"unknown input mode {input_mode!r}; choose from {INPUT_MODES}")
        self.config = {"num_features": num_features, "input_mode": input_mode, "dim": dim, "hidden": hidden,
                       "buckets": buckets, "orders": list(orders)}
        if input_mode != "features":
            self.embeddings = nn.EmbeddingBag(buckets, dim, mode="mean")
        width = {"sim+cont": 3 * dim, "cont": dim, "features": 0}[input_mode] + num_features
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, len(CRITERIA)))
        # standardisation of the features, set from the training data
        self.register_buffer("feature_mean", torch.zeros(num_features))
        self.register_buffer("feature_std", torch.ones(num_features))

    def encode(self, texts: list[str]) -> torch.Tensor:
        ids = [char_ngram_ids(t, tuple(self.config["orders"]), self.config["buckets"]) for t in texts]
        offsets = torch.tensor(np.cumsum([0] + [len(i) for i in ids[:-1]]), dtype=torch.long)
        flat = torch.tensor([i for row in ids for i in row], dtype=torch.long)
        return self.embeddings(flat.to(self.feature_mean.device), offsets.to(self.feature_mean.device))

    def forward(self, contexts: list[str], continuations: list[str], features: torch.Tensor) -> torch.Tensor:
        if self.config["input_mode"] == "sim+cont":
            v_b, v_c = self.encode(contexts), self.encode(continuations)
            parts = [v_b * v_c, (v_b - v_c).abs(), v_c]
        elif self.config["input_mode"] == "cont":
            parts = [self.encode(continuations)]
        else:
            parts = []
        # a missing feature (NaN: an IDF with no word to average) takes the training mean
        features = torch.where(torch.isnan(features), self.feature_mean, features)
        features = (features - self.feature_mean) / self.feature_std
        return self.mlp(torch.cat(parts + [features], dim=1))

    def save(self, folder) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        # fp16 on disk halves the checkpoint; load() restores float32
        save_file({k: v.detach().half().contiguous() for k, v in self.state_dict().items()}, folder / "model.safetensors")
        (folder / "model_config.json").write_text(json.dumps(self.config, indent=2) + "\n")

    @classmethod
    def load(cls, folder) -> "ContinuationModel":
        folder = Path(folder)
        config = json.loads((folder / "model_config.json").read_text())
        model = cls(**config)
        state = {k: v.float() for k, v in load_file(folder / "model.safetensors").items()}
        model.load_state_dict(state)
        return model.eval()
