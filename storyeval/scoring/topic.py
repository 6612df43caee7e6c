"""How well a story's sentences fit one another, by a sentence embedder: a part a mix can read (first_checks.md, E17).

A sentence of another story set into one lies far, in a sentence embedder's space, from the story's own sentences
wherever it stands; a scorer of two neighbouring sentences sees it in only two of a long story's pairs (E5, E16). A
story's topic score is the mean cosine similarity of every two of its distinct sentences, each embedded as the
embedder's authors pool it (the mean of its token vectors, normalised), clipped to [0, 1]. A sentence said again counts
once and the order counts for nothing, so a repeat or a shuffle moves a mix only through its story score. The story is
read as given, in the sentences :func:`storyeval.text.split_sentences` finds: the embedder was trained on plain text.

Pooling is written out here because ``sentence-transformers`` is not a dependency; for ``all-MiniLM-L6-v2`` its
pooling config is this mean. A sentence longer than the embedder reads at once is read in consecutive pieces whose
token vectors are pooled together, so nothing is cut off.
"""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import numpy as np
import torch

from storyeval.scoring import windows
from storyeval.scoring.devices import resolve_device
from storyeval.scoring.loading import quiet_loading
from storyeval.scoring.signature import settings_string
from storyeval.text import distinct_sentences

DEFAULT_MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (its sentence_bert_config.json)


def mean_pairwise_cosine(embeddings: np.ndarray) -> float:
    """The mean cosine of every two rows of unit-length ``embeddings`` (at least two rows)."""
    count = len(embeddings)
    total = embeddings.sum(axis=0)
    # the sum of every two rows' dot products, each pair once, from the squared norm of their sum
    pairs = (float(total @ total) - count) / 2
    return pairs / (count * (count - 1) / 2)


class TopicScorer:
    """A sentence embedder that scores each text by how well its distinct sentences fit one another, in [0, 1]."""

    def __init__(self, model, tokenizer, max_tokens: int = DEFAULT_MAX_TOKENS, device=None, name: str = "unnamed"):
        if max_tokens < 3:
            raise ValueError(f"max_tokens must leave room for a token between the special ones, got {max_tokens}")
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval()
        self._models = {self.device: self.model}
        self.tokenizer, self.max_tokens, self.name = tokenizer, max_tokens, name
        self._prefix, self._suffix = windows.special_token_frame(lambda text, special: tokenizer(text, add_special_tokens=special)["input_ids"])

    def reading_as_given(self) -> TopicScorer:
        return self  # it always reads the text as given

    def settings(self, dtype=None) -> str:
        """What its scores were computed with: float32 always (:meth:`score_checked`)."""
        return settings_string(self.name, "float32")

    def windows(self, text: str) -> list:
        """Nothing is refused: a long sentence is read in pieces (what a mix asks of each part it will score)."""
        return []

    def pieces(self, sentence: str) -> list[list[int]]:
        """The sentence's token ids in consecutive pieces the embedder reads at once, each framed by its special tokens."""
        ids = self.tokenizer(sentence, add_special_tokens=False, verbose=False)["input_ids"]
        width = self.max_tokens - len(self._prefix) - len(self._suffix)
        return [[*self._prefix, *ids[start:start + width], *self._suffix] for start in range(0, max(len(ids), 1), width)]

    @torch.inference_mode()
    def embed(self, sentences: list[str], batch_size: int = 16, device=None, progress_bar: bool = False) -> np.ndarray:
        """One unit-length vector per sentence: the mean of its token vectors over all its pieces."""
        device = self.device if device is None else resolve_device(device)
        if device not in self._models:  # a copy: the loaded scorers are cached and shared, as the story scorers are
            self._models[device] = copy.deepcopy(self.model).to(device)
        model = self._models[device]
        pieces = [(k, piece) for k, sentence in enumerate(sentences) for piece in self.pieces(sentence)]
        sums = np.zeros((len(sentences), self.model.config.hidden_size))
        counts = np.zeros(len(sentences))
        max_tokens = windows.CPU_BATCH_TOKENS if device.type == "cpu" else None
        for chunk, ids, mask in windows.padded_batches(pieces, batch_size, self.tokenizer.pad_token_id or 0, progress_bar, max_tokens):
            mask_t = torch.from_numpy(mask).to(device)
            hidden = model(input_ids=torch.from_numpy(ids).to(device), attention_mask=mask_t).last_hidden_state
            summed = (hidden.double() * mask_t.unsqueeze(-1)).sum(dim=1).cpu().numpy()
            for row, k in enumerate(chunk):
                sums[pieces[k][0]] += summed[row]
                counts[pieces[k][0]] += mask[row].sum()
        vectors = sums / counts[:, None]
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def score_checked(self, texts: list[str], batch_size: int = 16, device=None, progress_bar: bool = False, dtype=None) -> list[float]:
        """Each text's topic score (a text needs two distinct sentences with words: a ValueError otherwise). The
        embedder runs in float32 whatever ``dtype`` the story scorer beside it runs in: it is small, and the score is a
        mean of many similarities."""
        per_text = [distinct_sentences(text) for text in texts]
        if short := [k for k, sentences in enumerate(per_text) if len(sentences) < 2]:
            raise ValueError(f"text {short[0]} has fewer than two distinct sentences: no two to compare")
        unique = sorted({sentence for sentences in per_text for sentence in sentences})  # a sentence two texts share: embedded once
        vector_of = dict(zip(unique, self.embed(unique, batch_size, device, progress_bar)))
        return [min(max(mean_pairwise_cosine(np.stack([vector_of[s] for s in sentences])), 0.0), 1.0) for sentences in per_text]


def embedder_max_tokens(folder: Path, model_config) -> int:
    """How many tokens the embedder's authors have it read at once (their ``sentence_bert_config.json``), within its
    position table; :data:`DEFAULT_MAX_TOKENS` where the folder does not say."""
    config_file = folder / "sentence_bert_config.json"
    wanted = json.loads(config_file.read_text()).get("max_seq_length", DEFAULT_MAX_TOKENS) if config_file.is_file() else DEFAULT_MAX_TOKENS
    return min(wanted, getattr(model_config, "max_position_embeddings", wanted))


def load_topic_scorer(folder: str | Path, device=None) -> TopicScorer:
    """The topic scorer of a sentence embedder's folder (a backbone folder, as :func:`storyeval.checkpoints.backbones.resolve_backbone` gives it)."""
    return _load_topic_scorer(str(folder), str(resolve_device(device)))


@functools.lru_cache(maxsize=4)
def _load_topic_scorer(folder: str, device: str) -> TopicScorer:
    from transformers import AutoModel, AutoTokenizer

    with quiet_loading():
        model = AutoModel.from_pretrained(folder, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    return TopicScorer(model, tokenizer, embedder_max_tokens(Path(folder), model.config), device, name=Path(folder).name)
