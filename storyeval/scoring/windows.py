"""Stories as token windows, windows as padded batches, window scores as story scores.

The part of story scoring that needs no model: :class:`storyeval.scoring.sequence.SequenceScorer`
(torch) and :class:`storyeval.scoring.int8.cached.CachedInt8Scorer` (an int8 runtime, no torch)
share it, so both cut, batch and aggregate a story the same way. A story longer than
the model's window is never truncated: it is cut into overlapping windows
(``stride`` tokens apart, each wrapped in the model's special tokens). A story that
needs more than ``MAX_WINDOWS`` windows is refused with an error naming the limit,
before anything is scored.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
from tqdm.auto import tqdm

WINDOW_AGGREGATIONS = {"mean": lambda values: sum(values) / len(values), "min": min}
# per story: about 65,000 tokens at a 512-token window (256 apart), 16,000 at 128 (64 apart), far past the
# 2,100 words of the longest human-judged WP story; past it a text is more likely a file mistake than a story
MAX_WINDOWS = 256
# padded tokens per batch on the CPU (windows x the longest): long windows in big batches run slower there than in small
# ones (measured, not explained: attention's working set outgrowing the caches is the likely cause). union wp-base on 60 WP stories (about 300 tokens each), two
# threads, one process: 3.96 stories/s at 32 windows a batch, 4.66 at 16, 5.34 at 8, 5.51 at 4, 5.55 at 16 capped at
# 2,048 tokens, 4.68 at 4,096 (benchmarks/experiments/speed.md, issue 84). ROC stories' windows (86 tokens at most
# in 1,000 test stories) keep batches of 16. None: batch_size alone decides.
CPU_BATCH_TOKENS: int | None = 2048


class StoryTooLongError(ValueError):
    """A story needs more windows than :data:`MAX_WINDOWS`; ``index`` is its position in the input."""

    def __init__(self, index: int, problem: str):
        super().__init__(f"predictions[{index}] {problem}")
        self.index, self.problem = index, problem


def special_token_frame(encode: Callable[[str, bool], list[int]]) -> tuple[list[int], list[int]]:
    """The special tokens a tokenizer puts before and after a text ([CLS] / [SEP], <s> / </s>);
    ``encode(text, add_special_tokens)`` gives its ids."""
    framed, bare = encode("a", True), encode("a", False)
    for start in range(len(framed) - len(bare) + 1):
        if framed[start : start + len(bare)] == bare:
            return framed[:start], framed[start + len(bare) :]
    raise ValueError("cannot find how the tokenizer frames a text with special tokens")


def split_into_windows(ids: list[int], prefix: list[int], suffix: list[int], max_length: int, stride: int) -> list[list[int]]:
    """Windows of at most ``max_length`` tokens, special tokens included, covering every id
    (a ValueError when that takes more than :data:`MAX_WINDOWS`)."""
    room = max_length - len(prefix) - len(suffix)
    needed = 1 + max(0, -(-(len(ids) - room) // stride))
    if needed > MAX_WINDOWS:
        longest = room + (MAX_WINDOWS - 1) * stride
        raise ValueError(f"is {len(ids):,} tokens long and needs {needed} windows of {max_length} tokens; a story may "
                         f"have at most {MAX_WINDOWS} ({longest:,} tokens): score it in parts")
    return [prefix + ids[start : start + room] + suffix for start in range(0, needed * stride, stride)]


def all_windows(stories: list[str], windows_of: Callable[[str], list[list[int]]]) -> list[tuple[int, list[int]]]:
    """(story index, window) for every window of every story, or a :class:`StoryTooLongError` naming the first too long."""
    windows = []
    for i, story in enumerate(stories):
        try:
            windows += [(i, w) for w in windows_of(story)]
        except ValueError as error:
            raise StoryTooLongError(i, str(error)) from None
    return windows


def padded_batches(windows: list[tuple[int, list[int]]], batch_size: int, pad_id: int,
                   progress_bar: bool = False, max_tokens: int | None = None) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
    """(window indices, ids, attention mask) batches of similar lengths, int64 arrays padded to each batch's longest:
    at most ``batch_size`` windows and, given ``max_tokens``, at most that many padded tokens (one window at least)."""
    # longest first: an out-of-memory error shows up on the first batch, not the last
    order = sorted(range(len(windows)), key=lambda k: -len(windows[k][1]))
    chunks, begin = [], 0
    while begin < len(order):
        width = len(windows[order[begin]][1])
        rows = batch_size if max_tokens is None else max(1, min(batch_size, max_tokens // max(width, 1)))
        chunks.append(order[begin : begin + rows])
        begin += rows
    for chunk in tqdm(chunks, disable=not progress_bar, desc="scoring", unit="batch"):
        width = len(windows[chunk[0]][1])
        ids = np.full((len(chunk), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(chunk), width), dtype=np.int64)
        for row, k in enumerate(chunk):
            seq = windows[k][1]
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        yield chunk, ids, mask


def by_story(windows: list[tuple[int, list[int]]], window_scores: list[float], n_stories: int) -> list[list[float]]:
    """Each story's window scores, in window order."""
    per_story: list[list[float]] = [[] for _ in range(n_stories)]
    for (story_index, _), value in zip(windows, window_scores):
        per_story[story_index].append(value)
    return per_story
