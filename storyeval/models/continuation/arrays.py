"""Vocabularies stored in ``.npz`` files without pickle.

A checkpoint can come from anyone's Hub repo, and unpickling an object array can
run arbitrary code, so word lists are stored as UTF-8 bytes (one word per line)
and files are always opened with ``allow_pickle=False``.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np


def words_to_array(words: Iterable[str]) -> np.ndarray:
    words = list(words)
    if any("\n" in word for word in words):
        raise ValueError("vocabulary words cannot contain a newline")
    return np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8)


def words_from_array(array: np.ndarray) -> list[str]:
    if array.dtype != np.uint8:
        raise ValueError(f"expected a uint8 word array, got dtype {array.dtype}")
    text = array.tobytes().decode("utf-8")
    return text.split("\n") if text else []


def load_npz(path) -> np.lib.npyio.NpzFile:
    """``np.load`` without pickle, with an error that says what to do about an old file."""
    data = np.load(path, allow_pickle=False)
    if "vocab" in data.files:
        try:
            data["vocab"]
        except ValueError as error:  # numpy refuses pickled object arrays
            raise ValueError(f"{path} stores its vocabulary as a pickled object array, which storyeval no longer "
                             "loads (unpickling can run code); rebuild it with this version of storyeval") from error
    return data
