"""A count-based interpolated Kneser-Ney n-gram language model on numpy arrays.

Hand-written on purpose: ``nltk.lm``'s Kneser-Ney scores one token at a time
through Python recursion (milliseconds per token), far from the 2,000 pairs/s
the continuation metric needs, and KenLM needs a compiled ``lmplz`` that no
package registry here provides. Here every n-gram is packed into one uint64
(16 bits per word id), counts live in sorted arrays, and a whole batch of
positions is scored with a few ``searchsorted`` calls per order.
"""
from __future__ import annotations

import io
from collections import Counter
from typing import Iterable

import numpy as np

from storyeval.models.continuation.arrays import load_npz, words_from_array, words_to_array

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
BITS = 16
MAX_VOCAB = (1 << BITS) - 1


def _pack(ids: np.ndarray) -> np.ndarray:
    """(n_items, order) word ids -> one uint64 key per item."""
    keys = np.zeros(ids.shape[0], dtype=np.uint64)
    for column in range(ids.shape[1]):
        keys = (keys << np.uint64(BITS)) | ids[:, column].astype(np.uint64)
    return keys


def _lookup(sorted_keys: np.ndarray, values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """values[key] for each query, 0 where the key is absent."""
    if len(sorted_keys) == 0:
        return np.zeros(len(queries), dtype=values.dtype)
    pos = np.searchsorted(sorted_keys, queries)
    pos = np.minimum(pos, len(sorted_keys) - 1)
    found = sorted_keys[pos] == queries
    return np.where(found, values[pos], 0)


class NgramLM:
    """Interpolated Kneser-Ney with one absolute discount, orders 1..``order`` (<= 4)."""

    def __init__(self, order: int = 4, discount: float = 0.75, max_vocab: int = 60000):
        if not 1 <= order <= 4:
            raise ValueError("order must be 1..4 (four 16-bit ids fill a 64-bit key)")
        if not 0 < discount < 1:
            raise ValueError("discount must be in (0, 1)")
        self.order, self.discount, self.max_vocab = order, discount, min(max_vocab, MAX_VOCAB)
        self.vocab: dict[str, int] = {}
        # per order n (1-based index n-1): sorted n-gram keys and their (continuation) counts,
        # and per history (n-1 words): total count and number of distinct continuations
        self.ngram_keys: list[np.ndarray] = []
        self.ngram_counts: list[np.ndarray] = []
        self.history_keys: list[np.ndarray] = []
        self.history_totals: list[np.ndarray] = []
        self.history_types: list[np.ndarray] = []

    # ---- training ----
    def fit(self, sentences: Iterable[list[str]]) -> "NgramLM":
        sentences = list(sentences)
        counts = Counter(token for sentence in sentences for token in sentence)
        words = [w for w, _ in counts.most_common(self.max_vocab - len(SPECIALS))]
        self.vocab = {w: i for i, w in enumerate(list(SPECIALS) + words)}
        streams = [self.encode(s) for s in sentences]
        top = self.order
        for n in range(1, top + 1):
            grams = np.concatenate([self._ngrams(ids, n) for ids in streams]) if streams else np.zeros((0, n), np.int64)
            keys, raw = np.unique(_pack(grams), return_counts=True)
            if n == top:
                values = raw
            else:
                # Kneser-Ney: lower orders count distinct left extensions, not occurrences
                higher = np.unique(_pack(np.concatenate([self._ngrams(ids, n + 1) for ids in streams])))
                suffixes = higher & np.uint64((1 << (BITS * n)) - 1)
                keys, values = np.unique(suffixes, return_counts=True)
            self.ngram_keys.append(keys)
            self.ngram_counts.append(values.astype(np.float64))
            histories = keys >> np.uint64(BITS)
            h_keys, starts = np.unique(histories, return_index=True)
            self.history_keys.append(h_keys)
            self.history_totals.append(np.add.reduceat(values.astype(np.float64), starts) if len(starts) else np.zeros(0))
            self.history_types.append(np.diff(np.append(starts, len(keys))).astype(np.float64))
        return self

    def encode(self, tokens: list[str]) -> np.ndarray:
        return np.array([BOS] * (self.order - 1) + [self.vocab.get(t, UNK) for t in tokens] + [EOS], dtype=np.int64)

    def _ngrams(self, ids: np.ndarray, n: int) -> np.ndarray:
        start = self.order - n  # every order sees the same positions (its own amount of <s> padding)
        window = ids[start:]
        if len(window) < n:
            return np.zeros((0, n), dtype=np.int64)
        return np.lib.stride_tricks.sliding_window_view(window, n)

    # ---- scoring ----
    def logprobs(self, contexts: np.ndarray) -> np.ndarray:
        """ln P(w | history) for rows of ``order`` ids: history then word."""
        vocab_size = len(self.vocab)
        word = contexts[:, -1:]
        unigram = _lookup(self.ngram_keys[0], self.ngram_counts[0], _pack(word))
        prob = (unigram + 1.0) / (self.ngram_counts[0].sum() + vocab_size)  # add-one at the base
        for n in range(2, self.order + 1):
            gram = contexts[:, -n:]
            history = _pack(gram[:, :-1])
            total = _lookup(self.history_keys[n - 1], self.history_totals[n - 1], history)
            types = _lookup(self.history_keys[n - 1], self.history_types[n - 1], history)
            count = _lookup(self.ngram_keys[n - 1], self.ngram_counts[n - 1], _pack(gram))
            seen = total > 0
            safe_total = np.where(seen, total, 1.0)
            interpolated = (np.maximum(count - self.discount, 0) + self.discount * types * prob) / safe_total
            prob = np.where(seen, interpolated, prob)
        return np.log(prob)

    def score(self, tokens: list[str], context: list[str] | None = None) -> float:
        """Mean ln-probability per token of ``tokens`` (and the end of sentence) after ``context``."""
        return self.score_batch([tokens], [context or []])[0]

    def score_batch(self, token_lists: list[list[str]], contexts: list[list[str]]) -> list[float]:
        rows, owners = [], []
        for index, (tokens, context) in enumerate(zip(token_lists, contexts)):
            ids = self.encode(list(context[-(self.order - 1) :]) + list(tokens)) if context else self.encode(list(tokens))
            skip = min(len(context), self.order - 1) if context else 0
            windows = np.lib.stride_tricks.sliding_window_view(ids, self.order)[skip:]
            rows.append(windows)
            owners.append(np.full(len(windows), index))
        if not rows:
            return []
        logprobs = self.logprobs(np.concatenate(rows))
        owner = np.concatenate(owners)
        totals = np.bincount(owner, weights=logprobs, minlength=len(token_lists))
        counts = np.bincount(owner, minlength=len(token_lists))
        return (totals / np.maximum(counts, 1)).tolist()

    # ---- persistence ----
    def save(self, path) -> None:
        arrays = {"vocab": words_to_array(self.vocab), "meta": np.array([self.order, self.discount, self.max_vocab])}
        for n in range(self.order):
            arrays.update({f"ngram_keys{n}": self.ngram_keys[n], f"ngram_counts{n}": self.ngram_counts[n],
                           f"history_keys{n}": self.history_keys[n], f"history_totals{n}": self.history_totals[n],
                           f"history_types{n}": self.history_types[n]})
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        with open(path, "wb") as handle:
            handle.write(buffer.getvalue())

    @classmethod
    def load(cls, path) -> "NgramLM":
        data = load_npz(path)
        order, discount, max_vocab = data["meta"]
        lm = cls(int(order), float(discount), int(max_vocab))
        lm.vocab = {w: i for i, w in enumerate(words_from_array(data["vocab"]))}
        for n in range(lm.order):
            lm.ngram_keys.append(data[f"ngram_keys{n}"])
            lm.ngram_counts.append(data[f"ngram_counts{n}"])
            lm.history_keys.append(data[f"history_keys{n}"])
            lm.history_totals.append(data[f"history_totals{n}"])
            lm.history_types.append(data[f"history_types{n}"])
        return lm
