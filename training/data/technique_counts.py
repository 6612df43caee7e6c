"""How many rows of a built set each perturbation or manipulation technique made: one count shape for the
summaries that build_negatives, build_plots and mix_pairs write beside their rows."""

from __future__ import annotations

from collections import Counter

import datasets


def technique_counts(rows: datasets.Dataset, unit: str = "pairs") -> dict:
    """``{unit: rows, "per_technique": ..., "per_number_of_techniques": ...}`` from the rows' ``techniques`` lists
    (a row that stacks two techniques counts once under each, and once under 2)."""
    per_technique, per_count = Counter(), Counter()
    for techniques in rows["techniques"]:
        per_technique.update(techniques)
        per_count[len(techniques)] += 1
    return {
        unit: len(rows),
        "per_technique": dict(sorted(per_technique.items())),
        "per_number_of_techniques": dict(sorted(per_count.items())),
    }
