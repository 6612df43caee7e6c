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
