"""Scores as named columns for any loaded scorer, with NaN and the reason in words where a row cannot be scored.

The shared body of the paths that score a corpus in pieces: Ray Data's actors (:mod:`storyeval.analysis.ray_data`)
and the ranks of an accelerate or torchrun job (:mod:`storyeval.analysis.ranks`). One empty story in a batch must
not stop a job of millions, so it is scored as the metrics' ``on_invalid="nan"`` scores it: NaN in every score
column, and its problem kept beside it. So is a story past the window limit (:data:`storyeval.scoring.windows.MAX_WINDOWS`),
which ``score`` refuses.

A scorer is any of the three kinds the metrics load: a story scorer (UNION, plot coherence; ``.score`` returns a
list), the continuation scorer (a list per criterion) and the ``story_quality`` suite (its per-story keys).
"""
from __future__ import annotations

from collections.abc import Sequence

from storyeval.analysis.suite import check_dtype as check_suite_dtype
from storyeval.inputs import text_problem, with_nan_at
from storyeval.scoring.windows import StoryTooLongError

STORY, CONTINUATION, SUITE = "story", "continuation", "suite"


def scorer_kind(scorer) -> str:
    """Which of the three result shapes ``scorer.score`` returns."""
    from storyeval.analysis.suite import StoryQuality

    if isinstance(scorer, StoryQuality):
        return SUITE
    if hasattr(scorer, "windows"):  # the torch story scorer and the int8 one that runs without torch
        return STORY
    return CONTINUATION


def column_keys(scorer, with_contexts: bool) -> list[str]:
    """The result's per-row keys, in order: ``""`` for a story scorer's one score, the criteria of continuation
    quality, the suite's per-story keys."""
    kind = scorer_kind(scorer)
    if kind == STORY:
        return [""]
    if kind == CONTINUATION:
        from storyeval.models.continuation.model import CRITERIA

        return list(CRITERIA)
    from storyeval.analysis.suite import output_keys

    return output_keys(scorer.config, with_contexts, scorer.suite_parts)


def settings_of(scorer, dtype=None, with_contexts: bool = False, combination: str | None = None) -> str:
    """The settings string of the scores :func:`score_rows` gives with these options."""
    if scorer_kind(scorer) == SUITE:
        return scorer.settings(with_contexts, combination)
    return scorer.settings(dtype)


def row_problems(predictions: Sequence, contexts: Sequence | None = None,
                 names: tuple[str, str] = ("predictions", "contexts")) -> list[str | None]:
    """Per row, why it cannot be scored, naming the input by ``names`` (a missing value, not text, no letters,
    not English, a lone surrogate), or None."""
    if contexts is not None and len(contexts) != len(predictions):
        raise ValueError(f"inputs must have the same length, got {names[0]}: {len(predictions)}, {names[1]}: {len(contexts)}")
    problems = []
    for i, prediction in enumerate(predictions):
        texts = [(names[0], prediction)] + ([(names[1], contexts[i])] if contexts is not None else [])
        problems.append(next((f"{name} {problem}" for name, text in texts if (problem := _problem(text))), None))
    return problems


def _as_list(values, name: str) -> list:
    """A list of the rows' values (a 1-D array or Series too), or a TypeError: a string is not a list of stories."""
    if hasattr(values, "tolist") and getattr(values, "ndim", None) == 1:
        values = values.tolist()
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(values).__name__}")
    return list(values)


def _problem(text) -> str | None:
    if text is None:
        return "is missing (null)"
    if not isinstance(text, str):
        return f"is a {type(text).__name__}, not text"
    return text_problem(text)


def score_rows(scorer, predictions: Sequence, contexts: Sequence | None = None, *, batch_size: int | None = None,
               device=None, dtype=None, combination: str | None = None,
               names: tuple[str, str] = ("predictions", "contexts")) -> tuple[dict[str, list[float]], list[str | None]]:
    """``(columns, problems)``: each of :func:`column_keys`' keys with one score per row, NaN where ``problems``
    names why the row could not be scored (None elsewhere; ``names``: how the problems name the two inputs).
    ``batch_size`` None is the scorer's default.

    ``contexts`` go to continuation quality and the suite; a story scorer refuses them (it scores the story alone)."""
    kind = scorer_kind(scorer)
    if kind == STORY and contexts is not None:
        raise ValueError("a story metric scores the story alone: pass contexts to continuation_quality or story_quality only")
    if kind == CONTINUATION and contexts is None:
        raise ValueError("continuation_quality scores a continuation given its context: pass contexts")
    if kind == SUITE:
        check_suite_dtype(dtype)
    predictions = _as_list(predictions, names[0])
    contexts = None if contexts is None else _as_list(contexts, names[1])
    problems = row_problems(predictions, contexts, names)
    kept = [i for i, problem in enumerate(problems) if problem is None]
    options = {"device": device} | ({"batch_size": batch_size} if batch_size is not None else {})
    keys = column_keys(scorer, contexts is not None)
    scored: dict[str, list[float]] = {key: [] for key in keys}
    while kept:
        texts = [predictions[i] for i in kept]
        given = None if contexts is None else [contexts[i] for i in kept]
        try:
            if kind == STORY:
                scored[""] = scorer.score(texts, dtype=dtype, **options)
            elif kind == CONTINUATION:
                scored = scorer.score(given, texts, dtype=dtype, **options)
            else:
                result = scorer.score(texts, contexts=given, combination=combination, **options)
                scored = {key: result[key] for key in keys}
            break
        except StoryTooLongError as error:
            # a story past the window limit is refused before any of the call's windows is scored: it gets NaN and
            # its reason like an empty one, and the others are cut again (a rare case: a corpus's file mistake)
            row = kept.pop(error.index)
            joined = " with its context" if kind == SUITE and contexts is not None else ""
            problems[row] = f"{names[0]}{joined} {error.problem}"
    skipped = [i for i, problem in enumerate(problems) if problem is not None]
    return {key: with_nan_at(skipped, len(predictions), scored[key]) for key in keys}, problems
