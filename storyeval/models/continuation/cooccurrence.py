"""Word co-occurrence statistics for the (P)PMI features, stored as sparse matrices.

``C_w[u, v]`` counts how often word ``v`` occurs within ``w`` tokens after word
``u`` in the same story. The tokens are what ``fit`` is given: the training code and
the feature extractor give it content words (stopwords and punctuation removed), so
the windows of 10/25/50 span about twice as many running words.
PMI(u, v) = log(C_w[u, v] * N^2 / (T_w * c(u) * c(v))) with N the number of tokens and T_w the number of counted pairs; only pairs seen
more than ``min_pair_count`` times (10, as in Sagarkar et al.) are kept.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
from scipy import sparse

from storyeval.models.continuation.arrays import load_npz, words_from_array, words_to_array

WINDOWS = (10, 25, 50)


class CooccurrenceStats:
    def __init__(self, windows=WINDOWS, min_pair_count: int = 10, min_word_count: int = 5):
        self.windows = tuple(sorted(windows))
        self.min_pair_count = min_pair_count
        self.min_word_count = min_word_count
        self.vocab: dict[str, int] = {}
        self.pmi: dict[int, sparse.csr_matrix] = {}

    def fit(self, documents: Iterable[list[str]]) -> "CooccurrenceStats":
        documents = [list(d) for d in documents]
        counts: dict[str, int] = {}
        for doc in documents:
            for word in doc:
                counts[word] = counts.get(word, 0) + 1
        words = sorted(w for w, c in counts.items() if c >= self.min_word_count)
        self.vocab = {w: i for i, w in enumerate(words)}
        size = len(words)
        # one stream of ids: -1 marks a word out of vocabulary (it still takes its place in the window),
        # -2 ends a document; only the end marker starts a new document
        stream = np.concatenate([np.append(np.array([self.vocab.get(w, -1) for w in d], dtype=np.int64), -2) for d in documents] or [np.array([-2])])
        doc_id = np.cumsum(stream == -2)
        unigram = np.bincount(stream[stream >= 0], minlength=size).astype(np.float64)
        total_tokens = unigram.sum()
        pair_counts = sparse.csr_matrix((size, size), dtype=np.float64)
        for offset in range(1, self.windows[-1] + 1):
            left, right = stream[:-offset], stream[offset:]
            keep = (left >= 0) & (right >= 0) & (doc_id[:-offset] == doc_id[offset:])
            pair_counts = pair_counts + sparse.csr_matrix(
                (np.ones(keep.sum()), (left[keep], right[keep])), shape=(size, size)
            )
            if offset in self.windows:
                self.pmi[offset] = self._pmi(pair_counts, unigram, total_tokens)
        return self

    def _pmi(self, pair_counts: sparse.csr_matrix, unigram: np.ndarray, total_tokens: float) -> sparse.csr_matrix:
        counts = pair_counts.tocoo()
        total_pairs = counts.data.sum()
        keep = counts.data > self.min_pair_count
        rows, cols, values = counts.row[keep], counts.col[keep], counts.data[keep]
        pmi = np.log(values * total_tokens**2 / (total_pairs * unigram[rows] * unigram[cols]))
        return sparse.csr_matrix((pmi.astype(np.float32), (rows, cols)), shape=pair_counts.shape)

    def scores(self, contexts: list[list[str]], continuations: list[list[str]], positive: bool = False) -> dict[int, np.ndarray]:
        """window -> s per pair: sum of (P)PMI(u, v) over context u and continuation v, / (N_context * N_continuation)."""
        return self.pair_scores(contexts, continuations)[1 if positive else 0]

    def pair_scores(self, contexts: list[list[str]], continuations: list[list[str]]) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """(PMI, PPMI): window -> s per pair, as :meth:`scores`, both from one lookup of every (u, v) pair.

        Each pair's (context word, continuation word) entries are read straight out of the sparse matrices,
        a few hundred per pair; a product of word-count rows with the matrices did the same sums with much
        more work, which made these features a third of the count-only scoring time.
        """
        pair_index, context_ids, continuation_ids = [], [], []
        for i, (context, continuation) in enumerate(zip(contexts, continuations)):
            u = [self.vocab[w] for w in context if w in self.vocab]
            v = [self.vocab[w] for w in continuation if w in self.vocab]
            context_ids.append(np.repeat(np.array(u, dtype=np.int64), len(v)))
            continuation_ids.append(np.tile(np.array(v, dtype=np.int64), len(u)))
            pair_index.append(np.full(len(u) * len(v), i, dtype=np.int64))
        pair_index, rows, cols = (np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
                                  for ids in (pair_index, context_ids, continuation_ids))
        lengths = np.array([len(c) * len(n) for c, n in zip(contexts, continuations)], dtype=np.float64)
        norm = np.maximum(lengths, 1.0)
        signed, positive = {}, {}
        for window, pmi in self.pmi.items():
            # (scipy answers an empty lookup with a sparse matrix, not an empty array)
            values = np.asarray(pmi[rows, cols], dtype=np.float64).ravel() if rows.size else np.zeros(0)
            signed[window] = np.bincount(pair_index, weights=values, minlength=len(contexts)) / norm
            positive[window] = np.bincount(pair_index, weights=np.maximum(values, 0.0), minlength=len(contexts)) / norm
        return signed, positive

    def save(self, path) -> None:
        arrays = {"vocab": words_to_array(self.vocab), "meta": np.array([self.min_pair_count, self.min_word_count])}
        for window, matrix in self.pmi.items():
            arrays[f"pmi_{window}_data"], arrays[f"pmi_{window}_indices"] = matrix.data, matrix.indices
            arrays[f"pmi_{window}_indptr"] = matrix.indptr
        np.savez_compressed(path, windows=np.array(self.windows), **arrays)

    @classmethod
    def load(cls, path) -> "CooccurrenceStats":
        data = load_npz(path)
        stats = cls(tuple(int(w) for w in data["windows"]), int(data["meta"][0]), int(data["meta"][1]))
        stats.vocab = {w: i for i, w in enumerate(words_from_array(data["vocab"]))}
        size = len(stats.vocab)
        for window in stats.windows:
            stats.pmi[window] = sparse.csr_matrix(
                (data[f"pmi_{window}_data"], data[f"pmi_{window}_indices"], data[f"pmi_{window}_indptr"]), shape=(size, size)
            )
        return stats
