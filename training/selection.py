"""Which evaluation a training run keeps as its best: one rule for every training loop and for resuming; and the
length signal that ship rules and evaluations check beside it."""
from __future__ import annotations

import math


def improves(metrics: dict, best: dict | None, select_by: str, lowest: bool = False) -> bool:
    """Whether an evaluation beats the best so far: strictly, so the earliest of equal ones is kept,
    and a NaN (a diverged loss, say) never beats a number but is replaced by one."""
    if best is None or math.isnan(best[select_by]):
        return True
    value = metrics[select_by]
    return value < best[select_by] if lowest else value > best[select_by]


def best_by(history: list[dict], select_by: str, lowest: bool = False) -> dict | None:
    """The evaluation training keeps (see :func:`improves`); None if none measured ``select_by``."""
    best = None
    for metrics in history:
        if select_by in metrics and improves(metrics, best, select_by, lowest):
            best = metrics
    return best


def length_spearman(scores, words) -> float | None:
    """Spearman correlation of scores with the stories' lengths in words: the WP ship rules' length check
    (``benchmarks.agreement.wp_kinds``) and distillation's held-out diagnostic. None (undefined) where every story
    has one length."""
    from scipy import stats  # imported here so that reading this module stays cheap

    return float(stats.spearmanr(scores, words).statistic) if len(set(words)) > 1 else None


# Across-story comparisons are made only between stories whose lengths differ by at most this share of the longer
# (and at most LENGTH_SLACK_WORDS words for short ones), so that a score cannot pass them by preferring short stories.
LENGTH_CALIPER = 0.1
LENGTH_SLACK_WORDS = 3
# The no-regression rule: a candidate may fall at most this far below the checkpoint it replaces, on any kind and measure.
NO_REGRESSION_TOLERANCE = 0.02


def win_outcomes(higher, lower):
    """1 where ``higher`` scores above ``lower``, 0.5 for a tie, 0 below (elementwise, broadcasting)."""
    import numpy as np

    higher, lower = np.asarray(higher, float), np.asarray(lower, float)
    return (higher > lower) + 0.5 * (higher == lower)


def within_pair_accuracy(intact_scores, broken_scores) -> float:
    """The share of pairs in which the intact story scores above its own broken copy (a tie counts half)."""
    return float(win_outcomes(intact_scores, broken_scores).mean())


def across_story_auc(intact, broken, caliper: float = LENGTH_CALIPER, slack: int = LENGTH_SLACK_WORDS) -> tuple[float | None, int]:
    """AUC of intact stories above broken copies of *other* stories (another prompt), matched for length.

    ``intact`` and ``broken`` are (scores, words, groups) sequences. Every intact story is compared with every broken
    copy whose group differs and whose length is within ``caliper`` of the longer one's (or ``slack`` words): the
    share of those comparisons the intact story wins (a tie counts half), and their number; None when there are none.
    Computed over the whole matrix with numpy: a few hundred stories a side make at most a few hundred thousand cells.
    """
    (i_scores, i_words, i_groups), (b_scores, b_words, b_groups) = intact, broken
    matched = across_story_matches((i_words, i_groups), (b_words, b_groups), caliper, slack)
    return matched_auc(i_scores, b_scores, matched), int(matched.sum())


def matched_auc(higher, lower, matched) -> float | None:
    """The share of the comparisons ``matched`` marks (a boolean matrix, :func:`across_story_matches`) in which the
    ``higher`` story scores above the ``lower`` one (a tie counts half); None where it marks none."""
    import numpy as np

    if not matched.any():
        return None
    return float(win_outcomes(np.asarray(higher, float)[:, None], np.asarray(lower, float)[None, :])[matched].mean())


def across_story_matches(intact, broken, caliper: float = LENGTH_CALIPER, slack: int = LENGTH_SLACK_WORDS):
    """The (intact, broken) comparisons :func:`across_story_auc` makes, as a boolean matrix: ``intact`` and ``broken``
    are (words, groups) sequences; a cell is True where the groups differ and the lengths are within the caliper.
    Apart, so that a search scoring many weightings of the same stories builds it once."""
    import numpy as np

    i_words, b_words = np.asarray(intact[0], float)[:, None], np.asarray(broken[0], float)[None, :]
    matched = np.abs(i_words - b_words) <= np.maximum(caliper * np.maximum(i_words, b_words), slack)
    return matched & (np.asarray(intact[1], object)[:, None] != np.asarray(broken[1], object)[None, :])


def across_metadata(rows) -> dict:
    """What :func:`pairs_across_story_auc` needs of a set of (higher, lower) pairs (``human``, ``negative`` and ``id``
    columns): both sides' lengths in words, and each pair's story, its id up to the first "/" (modern_breaks' ids are
    story/view/kind, so one story's copies are never compared with it)."""
    return {"words": ([len(t.split()) for t in rows["human"]], [len(t.split()) for t in rows["negative"]]),
            "stories": [pair_id.split("/")[0] for pair_id in rows["id"]]}


def pairs_across_matches(metadata: dict):
    """:func:`across_story_matches` of pairs' higher stories against the lower stories of the other pairs, from their
    :func:`across_metadata`."""
    return across_story_matches((metadata["words"][0], metadata["stories"]), (metadata["words"][1], metadata["stories"]))


def pairs_across_story_auc(higher, lower, metadata: dict) -> float | None:
    """:func:`across_story_auc` of pairs' higher stories against the lower stories of the other pairs, from the two
    sides' scores in the pairs' order and their :func:`across_metadata`."""
    return matched_auc(higher, lower, pairs_across_matches(metadata))


def regressions(candidate: dict[str, float], incumbent: dict[str, float], tolerance: float = NO_REGRESSION_TOLERANCE) -> dict[str, float]:
    """The no-regression rule: measure -> how far ``candidate`` falls below ``incumbent``, for every measure both have
    where it falls more than ``tolerance`` (an empty dict: the rule holds)."""
    # the difference is rounded as the figures are (four places), so a fall of exactly the tolerance passes
    falls = {name: round(incumbent[name] - value, 4) for name, value in candidate.items()
             if name in incumbent and value is not None and incumbent[name] is not None}
    return {name: fall for name, fall in falls.items() if fall > tolerance}


# A training run under the no-regression rule (train_ranker, distill) measures its start first, keeps only evaluations
# that fall nowhere beyond the tolerance below it, and exports nothing unless one of those beats the start.
SELECT_BY_NO_REGRESSION = "worst_measure_without_regression"  # the run's selection measure, or INELIGIBLE
INELIGIBLE = -1.0  # below any accuracy or AUC, so an evaluation that broke the rule is never kept over one that did not
START_VALIDATION = "start_validation.json"  # the start's measures, in the output folder: a resumed run reads them back


def start_measures(output_dir, resume: bool, measure, write: bool = True) -> dict:
    """The starting model's validation measures: read back from ``output_dir`` on a resumed run, else ``measure()``d
    now, with torch's RNG put back so that training draws as it would without it (a fresh run in a used folder
    measures its own start). ``write``: whether this process writes them (the main one)."""
    import json
    from pathlib import Path

    import torch

    path = Path(output_dir) / START_VALIDATION
    if resume and path.is_file():
        return json.loads(path.read_text())
    state = torch.get_rng_state()
    metrics = measure()
    torch.set_rng_state(state)
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def with_rule(metrics: dict, start: dict, measure: str, compared: tuple[str, ...]) -> dict:
    """``metrics`` with the no-regression rule against ``start``, over the measures whose names begin with one of
    ``compared``: the falls beyond the tolerance, and the selection measure (``measure``, or INELIGIBLE where
    anything fell)."""
    def kinds(values: dict) -> dict:
        return {name: value for name, value in values.items() if name.startswith(compared)}

    falls = regressions(kinds(metrics), kinds(start))
    return {**metrics, "regressions_from_start": falls, SELECT_BY_NO_REGRESSION: INELIGIBLE if falls else metrics[measure]}
