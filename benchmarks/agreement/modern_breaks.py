"""The modern-text check: does a score drop when a story by today's language models goes off the rails?

    python -m benchmarks.agreement.modern_breaks --breaks-dir <modern_breaks output>            # every shipped config
    python -m benchmarks.agreement.modern_breaks --breaks-dir <...> --checkpoint k3=runs/k3/best --suite sq=roc-base

The stories are those of ``python -m storyeval_training.data.modern_breaks``: intact stories by instruction-tuned
generators (one held out of all training) and copies of each with exactly one break (an off-topic sentence, a
contradiction, two events swapped, a sentence repeated, a cut mid-plot, a sentence moved), read at WP length and
as ROC-length windows; from revision 2 on, also human stories of the builders' test splits (``human-roc``: whole
ROCStories stories; ``human-wp``: human WP stories at WP length) with the same breaks, among them the checks a
researcher runs first (the sentences shuffled, a sentence said three times, the first half alone, an inserted
sentence). No human label is used. For each view and kind of break, two measures:

* **within-pair accuracy**: the share of stories that score above their own broken copy (a tie counts half);
* **across-story AUC**: intact stories against broken copies of *other* stories (another prompt) of about the
  same length (within 10% of the longer), the share the intact story wins: a score that ranks different stories
  by style or length rather than coherence fails it even when it tells a story from its own damaged copy.

A cut is planted only where a view reaches its story's end, so it is measured on those stories alone (intact ones
that end against cut copies of others that did); ``--max-units-per-view`` samples them apart from the view's
sample that every other kind shares. ``--kinds`` measures some kinds only (a revised kind, say);
:func:`with_kinds` puts such a report's figures in place of an earlier one's.

Each is reported per generator too (intact and broken stories of that generator only, so its style is held
constant), with the held-out generator marked; ``worst`` is the lowest kind of each measure, the figure
selection uses. Beside them, each score's Spearman correlation with length in words over the view's stories.
With ``--baseline LABEL``, each other row lists where it falls more than 0.02 below that row (the no-regression
rule); the label may be one of an ``--earlier`` file's, measured before (a config as it ships, against a candidate),
and ``--min-count N`` leaves out of that comparison a figure resting on fewer than N pairs or comparisons. Where both
rows are scored in the run, each fall comes with a 95% paired bootstrap interval of the difference, the stories
resampled (``regression_intervals``): an interval that reaches 0 is a fall the sample alone could make; and
``chance_of_a_fall_if_equal``: how often the rule would name a fall on these stories for a candidate as good as the
baseline on every figure, and the tolerance that would fail one such candidate in twenty (:func:`chance_of_a_fall`).
``--self-contrast LABEL=FOLDER:WEIGHT`` adds a row of a checkpoint's score less WEIGHT times its score of four
shuffled copies of each story (:mod:`.self_contrast`), with how often an intact story scores above its own
shuffled copies (``above_own_shuffles``). ``--ending LABEL=STORY_FOLDER+ENDING_FOLDER:WEIGHT`` adds a row of a
checkpoint's score mixed with an ending checkpoint's score of each story's last two sentences (:mod:`.ending_mix`);
``--neighbours LABEL=STORY_FOLDER+NEIGHBOUR_FOLDER:WEIGHT`` with the mean of a neighbour checkpoint's scores of every two
neighbouring sentences, ``--opening-ending`` with an ending checkpoint's score of its first and last two sentences,
``--runs`` with the mean of an order checkpoint's scores of every run of five consecutive sentences;
``--part-lowest-share LABEL=SHARE`` mixes in the mean of such a row's lowest part scores.
``--split test`` is the report; ``validation`` is what training runs select on.

``--int8-checkpoint LABEL=FOLDER`` scores a checkpoint in int8 (its measured export scheme, or the one ``--int8-scheme
NAME=SCHEME`` names for it), as ``dtype="int8"`` would, whatever the fidelity rule says of it, and ``--int8-suite
LABEL=CONFIG[:COMBINATION]`` a suite with its story metrics in int8 so: the rule's third part is measured so. Each int8
row is compared with the float32 row of the same folder (``--checkpoint``) or suite (``--suite``), which must be in
the run: every figure (not only the falls) gets its paired interval, and those that miss 0 are listed
(``every_interval``, ``outside_interval``): int8 holds the rule where none does.
"""
from __future__ import annotations

import argparse
import itertools
from collections import defaultdict
from pathlib import Path

from benchmarks.common import (
    BUNDLED,
    add_checkpoint_options,
    checked_checkpoints,
    checkpoint_spec,
    command_line,
    machine,
    require_checkpoint_folders,
    results_name,
    weighted_spec,
    write_results,
)
from storyeval_training.data.breaks import ENDING_KINDS, KINDS

from .ending_mix import add_mix_arguments, mix_rows, part_sentences, part_shares
from .story_scores import FITTED_HELP, SUITE_HELP, parse_fitted_suites, parse_suites

# every shipped config that scores a story alone (continuation_quality scores a continuation given its context)
SHIPPED_CHECKPOINTS = ("union-wp-base", "union-roc-base", "union-roc", "union-wp",
                       "plot-coherence-roc-base", "plot-coherence-wp-base", "plot-coherence-roc")
SHIPPED_SUITES = ("roc", "roc-base", "wp", "wp-base")
MEASURES = ("within", "auc")


# the views a report has: stories by today's LLMs at WP length and as ROC-length windows, and human stories of the
# builders' test splits (revision 2): whole ROCStories stories and human WP stories at WP length
VIEWS = ("wp", "roc", "human-wp", "human-roc")


def report_view(row: dict) -> str | None:
    """The report's view of a check row: an LLM story's own view; a human story's corpus (``human-roc`` or
    ``human-wp``) where the row is read at its corpus's length, else None (a human WP story's ROC-length window is for
    training only)."""
    if row["origin"] == "machine":
        return row["view"]
    return row["generator"] if row["generator"] == f"human-{row['view']}" else None


def read_stories(breaks_dir: Path, split: str, views: list[str], max_units: int | None, seed: int,
                 kinds: tuple[str, ...] = KINDS) -> list[dict]:
    """The split's rows of the chosen views and kinds: at most ``max_units`` intact stories (and their copies) per
    view, one seeded sample for every kind, except an ending kind (a cut), which only a story that reaches its end
    carries: it is measured on at most ``max_units`` of those. Each intact row's ``sides`` names the kinds whose
    across-story AUC it is an intact side of (every kind measured on its sample; an ending kind's on its carriers)."""
    import datasets

    folder = breaks_dir / "stories"
    if not (folder / "dataset_dict.json").is_file():
        raise FileNotFoundError(f"--breaks-dir {breaks_dir}: no stories/ (a modern_breaks output folder holds stories/ and pairs/)")
    rows = [{**r, "view": report_view(r)} for r in datasets.load_from_disk(str(folder))[split].to_list()]
    rows = [r for r in rows if r["view"] in views]
    intact_units, carriers = defaultdict(set), defaultdict(set)  # view -> units; (view, kind) -> units with that copy
    for r in rows:
        (intact_units[r["view"]] if r["kind"] == "intact" else carriers[(r["view"], r["kind"])]).add(r["unit"])

    def sample(units: set[str]) -> set[str]:
        import random

        return set(random.Random(seed).sample(sorted(units), min(max_units, len(units))) if max_units else units)

    chosen = {}  # (view, kind) -> the units the kind is measured on
    for view, units in intact_units.items():
        in_view = sample(units)
        for kind in kinds:
            chosen[(view, kind)] = sample(carriers[(view, kind)]) if kind in ENDING_KINDS else in_view
    kept = []
    for r in rows:
        if r["kind"] == "intact":
            sides = [kind for kind in kinds if r["unit"] in chosen[(r["view"], kind)]]
            if sides:
                kept.append({**r, "sides": sides})
        elif r["kind"] in kinds and r["unit"] in chosen[(r["view"], r["kind"])]:
            kept.append(r)
    return kept


def measure(rows: list[dict], score_of: dict[str, float]) -> dict:
    """Within-pair accuracy and across-story AUC per kind of break, and their minima."""
    from storyeval_training.selection import across_story_auc, within_pair_accuracy

    intact = {r["unit"]: r for r in rows if r["kind"] == "intact"}
    by_kind = defaultdict(list)
    for r in rows:
        if r["kind"] != "intact":
            by_kind[r["kind"]].append(r)
    per_kind = {}
    for kind, broken in sorted(by_kind.items()):
        within = within_pair_accuracy([score_of[intact[r["unit"]]["text"]] for r in broken], [score_of[r["text"]] for r in broken])
        side = lambda rs: ([score_of[r["text"]] for r in rs], [r["words"] for r in rs], [r["group"] for r in rs])  # noqa: E731
        auc, compared = across_story_auc(side([r for r in intact.values() if kind in r["sides"]]), side(broken))
        per_kind[kind] = {"within": round(within, 4), "auc": None if auc is None else round(auc, 4), "pairs": len(broken),
                          "across_comparisons": compared}
    return {"worst": worst(per_kind), "units": len(intact), "per_kind": per_kind}


def worst(per_kind: dict) -> dict:
    return {m: min((v[m] for v in per_kind.values() if v[m] is not None), default=None) for m in MEASURES}


def with_kinds(views: dict, newer: dict) -> dict:
    """``views`` (a report's) with the kinds ``newer`` measured (a ``--kinds`` report of the same checkpoint) in place
    of theirs, overall and per generator, and the worst figures taken again: how a revised kind joins earlier rows."""
    out = {}
    for view, result in views.items():
        update = newer.get(view)
        if update is None:
            out[view] = result
            continue
        per_kind = {**result["per_kind"], **update["per_kind"]}
        generators = {}
        for generator, figures in result["generators"].items():
            kinds = {**figures["per_kind"], **update["generators"].get(generator, {"per_kind": {}})["per_kind"]}
            generators[generator] = {**figures, "per_kind": kinds, "worst": worst(kinds)}
        out[view] = {**result, "per_kind": per_kind, "worst": worst(per_kind), "generators": generators,
                     "revised_kinds": sorted(update["per_kind"])}
    return out


LENGTH_RISE_BOUND = 0.05  # issue 86: no shipped config's Spearman with length rises by more than this
# how often, at most, an equal candidate's whole-check mean falls beyond its paired 95% interval (one side of it)
WHOLE_CHECK_CHANCE = 0.025


def view_length_spearman(rows: list[dict], score_of: dict[str, float], intact_only: bool = False) -> float | None:
    """Spearman of the score with length in words over the texts of ``rows`` (one view's): every text, broken copies
    included, or the intact stories only. Only the second tells whether a scorer ranks *stories* by length: the first
    rises by construction for one that puts each half or cut copy below its (longer) whole."""
    from storyeval_training.selection import length_spearman

    words = {r["text"]: r["words"] for r in rows if not intact_only or r["kind"] == "intact"}
    texts = sorted(words)
    rho = length_spearman([score_of[t] for t in texts], [words[t] for t in texts])
    return None if rho is None else round(rho, 4)


def report(rows: list[dict], score_of: dict[str, float], held_out: str) -> dict:
    out = {}
    for view in sorted({r["view"] for r in rows}):
        in_view = [r for r in rows if r["view"] == view]
        generators = {g: measure([r for r in in_view if r["generator"] == g], score_of) for g in sorted({r["generator"] for r in in_view})}
        out[view] = {**measure(in_view, score_of), "length_spearman": view_length_spearman(in_view, score_of),
                     "length_spearman_intact": view_length_spearman(in_view, score_of, intact_only=True),
                     "held_out_generator": held_out, "generators": generators}
    return out


def length_rises(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float],
                 bound: float = LENGTH_RISE_BOUND) -> dict[str, float]:
    """view -> how far the candidate's Spearman with length over the view's intact stories rises above the baseline's,
    where it rises by more than ``bound``: the ship rule's length part (its bound: :func:`length_rise_intervals`)."""
    rises = {}
    for view in sorted({r["view"] for r in rows}):
        in_view = [r for r in rows if r["view"] == view]
        new, old = (view_length_spearman(in_view, scores, intact_only=True) for scores in (candidate, baseline))
        if new is not None and old is not None and new - old > bound:
            rises[view] = round(new - old, 4)
    return rises


def length_rise_intervals(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float],
                          resamples: int = 2000, seed: int = 0) -> dict:
    """Per view, the rise of the intact stories' Spearman with length (candidate less baseline) and its paired 95%
    bootstrap interval, the same stories drawn for both, and the length part's bound (first_checks.md, "The length
    part, revised"): a rise counts where it is above both 0.05 and ``tolerance_for_5_percent``, the 95th percentile
    over the draws of the largest rise less its observed value over the views (each view's stories drawn apart), as
    a fall is counted. ``chance_an_equal_candidate_fails``: how often that bound fails a candidate whose rises are 0
    in truth, from the same centred draws; ``chance_at_the_point_bound``: how often 0.05 alone would (the part as
    declarations before E8 read it)."""
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(seed)
    views, centred_by_view = {}, []
    for view in sorted({r["view"] for r in rows}):
        words = {r["text"]: r["words"] for r in rows if r["view"] == view and r["kind"] == "intact"}
        texts = sorted(words)
        new, old, length = [candidate[t] for t in texts], [baseline[t] for t in texts], [words[t] for t in texts]
        if len(texts) < 3 or len(set(length)) < 2:
            continue

        def rise(a, b, w):
            return stats.spearmanr(a, w).statistic - stats.spearmanr(b, w).statistic

        drawn = stats.bootstrap((new, old, length), rise, paired=True, vectorized=False, n_resamples=resamples,
                                method="percentile", random_state=rng)
        observed = float(rise(new, old, length))
        centred = np.nan_to_num(drawn.bootstrap_distribution - observed)  # a draw of one length has no Spearman
        centred_by_view.append(centred)
        low, high = drawn.confidence_interval
        views[view] = {"rise": round(observed, 4), "interval": [round(float(low), 4), round(float(high), 4)],
                       "chance_an_equal_candidate_fails": round(float((centred > LENGTH_RISE_BOUND).mean()), 4)}
    if not centred_by_view:
        return {"views": views, "tolerance_for_5_percent": None, "bound": LENGTH_RISE_BOUND,
                "chance_an_equal_candidate_fails": 0.0, "chance_at_the_point_bound": 0.0}
    largest = np.max(centred_by_view, axis=0)
    tolerance = round(float(np.quantile(largest, 0.95)), 4)
    bound = max(LENGTH_RISE_BOUND, tolerance)
    return {"views": views, "tolerance_for_5_percent": tolerance, "bound": bound,
            "chance_an_equal_candidate_fails": round(float((largest > bound).mean()), 4),
            "chance_at_the_point_bound": round(float((largest > LENGTH_RISE_BOUND).mean()), 4)}


def flat(result: dict, min_count: int = 0) -> dict[str, float]:
    """view/kind/measure -> value, the held-out generator's rows too: what the no-regression rule compares. With
    ``min_count``, a figure resting on fewer pairs (within) or comparisons (AUC) is left out: too thin to decide by."""
    counts = {"within": "pairs", "auc": "across_comparisons"}
    out = {}
    for view, per_view in result.items():
        held_out = per_view["held_out_generator"]
        rows = [(f"{view}/{kind}", values) for kind, values in per_view["per_kind"].items()]
        held = per_view["generators"].get(held_out) or {"per_kind": {}}
        rows += [(f"{view}/{held_out}/{kind}", values) for kind, values in held["per_kind"].items()]
        for key, values in rows:
            for m in MEASURES:
                if values.get(counts[m], min_count) >= min_count:
                    out[f"{key}/{m}"] = values[m]
    return out


def _paired_cells(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float], key: str):
    """What a paired draw of stories needs of one :func:`flat` figure: its stories (the intact sides' units), the
    cells measure() counts (within: a story with a copy; across: an (intact, broken) comparison of matched length), and
    each cell's candidate-minus-baseline outcome."""
    import numpy as np

    from storyeval_training.selection import across_story_matches, win_outcomes

    parts = key.split("/")
    view, kind, measure_name = parts[0], parts[-2], parts[-1]
    generator = parts[1] if len(parts) == 4 else None
    chosen = [r for r in rows if r["view"] == view and (generator is None or r["generator"] == generator)]
    # the stories the figure is measured on, as measure() takes them: every intact side of the kind, and each one's
    # broken copy where it has one (a story with no sentence to move has none); a draw resamples these stories
    intact = [r for r in chosen if r["kind"] == "intact" and kind in r["sides"]]
    copy_of = {r["unit"]: r for r in chosen if r["kind"] == kind}
    broken = [copy_of.get(r["unit"]) for r in intact]
    has_copy = np.array([b is not None for b in broken])
    if not has_copy.any():
        raise ValueError(f"{key}: no pairs of that view, generator and kind")
    # a story without a copy stands in as its own (never compared: has_copy masks it out of both measures)
    broken = [b or r for b, r in zip(broken, intact)]

    def outcomes(score_of):
        higher, lower = np.array([score_of[r["text"]] for r in intact]), np.array([score_of[r["text"]] for r in broken])
        return win_outcomes(higher, lower) if measure_name == "within" else win_outcomes(higher[:, None], lower[None, :])

    difference = outcomes(candidate) - outcomes(baseline)
    cells = has_copy if measure_name == "within" else across_story_matches(
        ([r["words"] for r in intact], [r["group"] for r in intact]),
        ([r["words"] for r in broken], [r["group"] for r in broken])) & has_copy[None, :]
    cells = cells.astype(float)
    return [r["unit"] for r in intact], cells, cells * difference


def _drawn_difference(drawn, cells, cell_differences):
    """A figure's paired difference with each story counted as often as a draw took it (``drawn``: stories, or draws
    by stories): within, over the drawn stories' pairs; across, over the comparisons between drawn stories."""
    if cells.ndim == 1:
        total, moved = drawn @ cells, drawn @ cell_differences
    else:
        total, moved = ((drawn @ cells) * drawn).sum(-1), ((drawn @ cell_differences) * drawn).sum(-1)
    return moved / (total + (total == 0)) * (total != 0)  # no comparison drawn: no difference


def difference_interval(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float], key: str,
                        confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> list[float]:
    """A paired bootstrap interval of candidate minus baseline for one :func:`flat` figure (``view/kind/measure`` or
    ``view/generator/kind/measure``), both scored on the same stories: the stories (an intact one with its broken copy)
    are resampled, so one draw moves both checkpoints' figures together. It says whether a fall the no-regression rule
    names is more than the sample's noise: a fall whose interval reaches 0 could come from which stories were drawn."""
    import numpy as np
    from scipy import stats

    units, cells, cell_differences = _paired_cells(rows, candidate, baseline, key)

    def statistic(index):  # a story drawn twice counts twice, on both sides
        return float(_drawn_difference(np.bincount(index, minlength=len(units)).astype(float), cells, cell_differences))

    # percentile, not BCa: BCa's jackknife is undefined where a difference is the same in every story (often 0)
    result = stats.bootstrap((np.arange(len(units)),), statistic, vectorized=False, paired=True, confidence_level=confidence,
                             n_resamples=resamples, method="percentile", random_state=np.random.default_rng(seed))
    return [round(float(result.confidence_interval.low), 4), round(float(result.confidence_interval.high), 4)]


def chance_of_a_fall(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float], keys: list[str],
                     tolerance: float | None = None, resamples: int = 2000, seed: int = 0) -> dict[str, float]:
    """What the no-regression rule does on these stories to a candidate exactly as good as the baseline on every
    figure of ``keys``, which errs on other stories as much as this one does: ``chance``, how often it names a fall
    of more than ``tolerance`` (default: the rule's), and ``tolerance_for_5_percent``, the tolerance it would need
    to fail such a candidate one time in twenty.

    Each draw takes every view's stories again (one draw for all of a view's figures, so that figures sharing stories
    move together, as they do when a sample is drawn) and takes each figure's paired difference less its observed one
    (the bootstrap's estimate of the sample's own error, centred so that every true difference is 0); a draw's worst
    fall is its lowest difference over the figures. scipy.stats.bootstrap gives one statistic's interval, not this
    joint minimum over figures, so the draws are made here."""
    from storyeval_training.selection import NO_REGRESSION_TOLERANCE

    lowest = _lowest_drawn_falls(rows, candidate, baseline, keys, resamples, seed)
    return _fall_chances(lowest, NO_REGRESSION_TOLERANCE if tolerance is None else tolerance, len(keys))


def _lowest_drawn_falls(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float], keys: list[str],
                        resamples: int = 2000, seed: int = 0):
    """Each draw's worst fall over the figures of ``keys`` (:func:`chance_of_a_fall` says how the draws are made)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    figures = {key: _paired_cells(rows, candidate, baseline, key) for key in keys}
    lowest = np.zeros(resamples)
    for view in sorted({key.split("/")[0] for key in keys}):
        position, drawn = _view_draws(rows, view, resamples, rng)
        for key, (figure_units, cells, cell_differences) in figures.items():
            if key.split("/")[0] != view:
                continue
            own = drawn[:, [position[unit] for unit in figure_units]]
            observed = _drawn_difference(np.ones(len(figure_units)), cells, cell_differences)
            lowest = np.minimum(lowest, _drawn_difference(own, cells, cell_differences) - observed)
    return lowest


def _fall_chances(lowest, tolerance: float, figures: int) -> dict[str, float]:
    """:func:`chance_of_a_fall`'s record from the draws' worst falls."""
    import numpy as np

    # rounded as the rule rounds a fall (selection.regressions): a drawn fall of exactly the tolerance passes there too,
    # which matters where a figure rests on a few stories and its draws pile up on one value (a third, say)
    return {"chance": round(float((np.round(lowest, 4) < -tolerance).mean()), 4),
            "tolerance_for_5_percent": round(float(-np.quantile(lowest, 0.05)), 4) + 0.0,  # + 0.0: no "-0.0" in a record
            "figures": figures, "draws": len(lowest)}


def _rule_tolerance_and_chance(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float],
                               keys: list[str]) -> tuple[float, float]:
    """The rule's tolerance over ``keys`` (0.02, or the joint one-in-twenty one where that is larger) and how often an
    equal candidate falls beyond it, both from one set of draws."""
    from storyeval_training.selection import NO_REGRESSION_TOLERANCE

    lowest = _lowest_drawn_falls(rows, candidate, baseline, keys)
    tolerance = max(NO_REGRESSION_TOLERANCE, _fall_chances(lowest, NO_REGRESSION_TOLERANCE, len(keys))["tolerance_for_5_percent"])
    return tolerance, _fall_chances(lowest, tolerance, len(keys))["chance"]


def _view_draws(rows: list[dict], view: str, resamples: int, rng):
    """The view's intact units and ``resamples`` bootstrap draws of them (how often each unit is drawn)."""
    import numpy as np

    units = sorted({r["unit"] for r in rows if r["view"] == view and r["kind"] == "intact"})
    drawn = np.stack([np.bincount(rng.integers(len(units), size=len(units)), minlength=len(units))
                      for _ in range(resamples)]).astype(float)
    return {unit: i for i, unit in enumerate(units)}, drawn


def targeted_means(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float], targets: tuple[str, ...],
                   views: list[str], confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> dict:
    """Per measure, candidate minus baseline on the mean over ``views`` and the ``targets`` kinds of that measure's
    figures, with its paired bootstrap interval: every view's stories drawn again in each draw, both checkpoints'
    figures from the same draw. ``rises``: the interval lies above 0 (the ship rule's first part). Figures with no
    comparison (an AUC where no lengths match) are left out of the mean."""
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = {view: _view_draws(rows, view, resamples, rng) for view in views}
    out = {}
    for measure_name in MEASURES:
        keys = [f"{view}/{kind}/{measure_name}" for view in views for kind in targets
                if any(r["view"] == view and r["kind"] == kind for r in rows)]
        observed, drawn_differences = [], []
        for key in keys:
            view = key.split("/")[0]
            units, cells, cell_differences = _paired_cells(rows, candidate, baseline, key)
            if not cells.any():
                continue
            position, drawn = draws[view]
            observed.append(float(_drawn_difference(np.ones(len(units)), cells, cell_differences)))
            drawn_differences.append(_drawn_difference(drawn[:, [position[unit] for unit in units]], cells, cell_differences))
        if not observed:
            out[measure_name] = None
            continue
        mean = np.mean(drawn_differences, axis=0)
        low, high = np.quantile(mean, [(1 - confidence) / 2, (1 + confidence) / 2])
        out[measure_name] = {"difference": round(float(np.mean(observed)), 4), "interval": [round(float(low), 4), round(float(high), 4)],
                             "figures": len(observed), "rises": bool(low > 0)}
    return out


def ship_rule(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float], candidate_figures: dict[str, float],
              baseline_figures: dict[str, float], targets: tuple[str, ...], views: list[str]) -> dict:
    """The check's part of the ship rule (issue 86), candidate against the checkpoint it would replace, both scored on
    these stories: on the ``targets`` kinds its mean within-pair accuracy or its mean across-story AUC rises beyond
    that mean's paired 95% interval, no figure (held-out generator's included) falls by more than both 0.02 and
    the joint one-in-twenty tolerance of :func:`chance_of_a_fall`, and on no view does the Spearman of the score with
    length over the intact stories rise by more than both 0.05 and the joint one-in-twenty tolerance of the views'
    rises (:func:`length_rise_intervals`; first_checks.md, "The length part, revised"); and no across-story AUC of the
    views (the held-out generator's cells left out) falls by more than both 0.02 and the joint one-in-twenty tolerance
    of those figures alone (first_checks.md, "Part 2, amended": the held-out generator's cells of a few stories widen the
    first tolerance until a fall of 0.19 passes); and neither the whole check's mean within-pair accuracy nor its mean
    across-story AUC (every kind and view) falls by more than both 0.02 and its paired 95% interval ("Part 2, amended
    again": E11 gave up the repeat and the half cell by cell inside the joint tolerance).
    ``chance_an_equal_candidate_falls``: how often a candidate as good as the baseline would be named a fall here;
    ``chance_an_equal_candidate_fails``: the falls, the across-story falls, the whole check's means (at most
    :data:`WHOLE_CHECK_CHANCE` each) and the length part together, their draws taken apart (the human sets' part is
    measured apart)."""
    from storyeval_training.selection import NO_REGRESSION_TOLERANCE, regressions

    compared = sorted(key for key, value in candidate_figures.items() if value is not None and baseline_figures.get(key) is not None)
    tolerance, falls_chance = _rule_tolerance_and_chance(rows, candidate, baseline, compared)
    means = targeted_means(rows, candidate, baseline, targets, views)
    falls = regressions(candidate_figures, baseline_figures, tolerance)
    rises = any(m and m["rises"] for m in means.values())
    length = length_rise_intervals(rows, candidate, baseline)
    longer = length_rises(rows, candidate, baseline, length["bound"])
    across = [key for key in compared if key.count("/") == 2 and key.endswith("/auc")]  # view/kind/auc
    across_tolerance, across_chance = _rule_tolerance_and_chance(rows, candidate, baseline, across)
    across_falls = regressions({key: candidate_figures[key] for key in across}, baseline_figures, across_tolerance)
    # the whole check's means (first_checks.md, "Part 2, amended again"): one figure each, so a fall spread over many
    # cells, each inside the joint tolerance, is still seen; an equal candidate fails each at most 2.5% of the time
    kinds = tuple(sorted({r["kind"] for r in rows} - {"intact"}))
    whole = targeted_means(rows, candidate, baseline, kinds, views)
    whole_falls = {measure_name: m["difference"] for measure_name, m in whole.items()
                   if m and m["difference"] < -NO_REGRESSION_TOLERANCE and m["interval"][1] < 0}
    fails = 1 - ((1 - falls_chance) * (1 - across_chance) * (1 - length["chance_an_equal_candidate_fails"])
                 * (1 - WHOLE_CHECK_CHANCE) ** len([m for m in whole.values() if m]))
    return {"targets": list(targets), "targeted_means": means, "tolerance": round(tolerance, 4), "falls": falls,
            "across_story_tolerance": round(across_tolerance, 4), "across_story_falls": across_falls,
            "whole_check_means": whole, "whole_check_falls": whole_falls,
            "length_rises": longer, "length_rise_intervals": length,
            "chance_an_equal_candidate_falls": falls_chance, "chance_an_equal_candidate_falls_across_stories": across_chance,
            "chance_an_equal_candidate_fails": round(fails, 4),
            "holds": bool(rises and not falls and not across_falls and not whole_falls and not longer)}


def above_own_shuffles(rows: list[dict], margin_of: dict[str, float]) -> dict:
    """Per view: the share of intact stories scored above the mean of their own shuffled copies (``margin_of``: a
    story's logit less theirs; a tie counts half), and the mean margin."""
    out = {}
    for view in sorted({r["view"] for r in rows}):
        margins = [margin_of[r["text"]] for r in rows if r["view"] == view and r["kind"] == "intact"]
        out[view] = {"share": round(sum((m > 0) + 0.5 * (m == 0) for m in margins) / len(margins), 4),
                     "mean_logit_margin": round(sum(margins) / len(margins), 4), "stories": len(margins)}
    return out


def every_interval(rows: list[dict], candidate: dict[str, float], baseline: dict[str, float], keys: list[str]) -> dict:
    """Each figure's paired interval of candidate less baseline (:func:`difference_interval`), and those that miss 0:
    the fidelity rule's modern-text part, for an int8 copy against its float32 checkpoint."""
    intervals = {key: difference_interval(rows, candidate, baseline, key) for key in keys}
    outside = sorted(key for key, (low, high) in intervals.items() if low > 0 or high < 0)
    return {"figures": len(intervals), "outside_interval": outside, "intervals": intervals}


def self_contrast_spec(value: str) -> tuple[str, str, float]:
    """argparse type of ``--self-contrast LABEL=FOLDER:WEIGHT``."""
    label, folder, number = weighted_spec(value)
    if number is None or not 0 < number <= 1:
        raise argparse.ArgumentTypeError(f"expects label=folder:weight with 0 < weight <= 1, got {value!r}")
    return label, folder, number


def line(label: str, result: dict) -> str:
    parts = []
    for view, r in result.items():
        kinds = ", ".join(f"{k} {v['within']:.2f}/{v['auc']:.2f}" for k, v in r["per_kind"].items() if v["auc"] is not None)
        parts.append(f"[{view}] worst within {r['worst']['within']:.3f}, auc {r['worst']['auc']:.3f} ({kinds}); length rho "
                     f"{r['length_spearman']} (intact stories {r.get('length_spearman_intact')})")
    return f"{label}: " + " ".join(parts)


def merged_views(reports) -> dict[str, dict]:
    """label -> view -> figures over several results of this benchmark, in order: a later result's view of a config
    wins, as in BENCHMARKS.md's summary."""
    views: dict[str, dict] = {}
    for result in reports:
        for label, figures in result["checkpoints"].items():
            views.setdefault(label, {}).update(figures["views"])
    return views


def earlier_views(names: list[str]) -> dict[str, dict]:
    """:func:`merged_views` of earlier results files, by name."""
    import json

    from benchmarks import common

    paths = [common.results_path(name) for name in names]  # NAME, EXPERIMENT/NAME, or a NAME an experiment has filed
    for name, path in zip(names, paths):
        if not path.is_file():
            raise FileNotFoundError(f"--earlier {name}: no {path.relative_to(common.RESULTS.parent)}")
    return merged_views(json.loads(path.read_text(encoding="utf-8")) for path in paths)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--breaks-dir", required=True, type=Path, help="python -m storyeval_training.data.modern_breaks's output")
    parser.add_argument("--split", default="test", choices=["validation", "test"])
    parser.add_argument("--views", nargs="+", default=list(VIEWS), choices=VIEWS,
                        help="LLM stories at WP length and as ROC windows, human WP and ROC stories (default: all there are)")
    parser.add_argument("--max-units-per-view", type=int, default=None,
                        help="a seeded sample of intact stories per view (an ending kind's: of those that reach their end)")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="the kinds of break to measure (default: all)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--suite", action="append", default=[], metavar="LABEL=CONFIG[:COMBINATION]", help=SUITE_HELP)
    parser.add_argument("--fitted-suite", action="append", default=[], metavar="LABEL=REPORT", help=FITTED_HELP)
    parser.add_argument("--self-contrast", action="append", default=[], type=self_contrast_spec, metavar="LABEL=FOLDER:WEIGHT",
                        help="a checkpoint's score less WEIGHT (0 < WEIGHT <= 1) times its score of four shuffled copies of "
                             "each story, as logits (benchmarks/agreement/self_contrast.py); repeatable")
    add_mix_arguments(parser)
    parser.add_argument("--baseline", default=None, help="a label: list where each other row falls more than 0.02 below it")
    add_checkpoint_options(parser, batch_size=16, required=False, help="label=folder (repeatable); default: every shipped config")
    parser.add_argument("--int8-checkpoint", action="append", default=[], type=checkpoint_spec, metavar="LABEL=FOLDER",
                        help="a checkpoint scored in int8 (CPU; its measured export scheme), whatever the fidelity rule says of it, against "
                             "the --checkpoint row of the same folder: every figure's paired interval; repeatable")
    parser.add_argument("--int8-suite", action="append", default=[], metavar="LABEL=CONFIG[:COMBINATION]",
                        help="a story_quality config with its story metrics in int8, against the --suite row of the same config; repeatable")
    parser.add_argument("--int8-scheme", action="append", default=[], type=checkpoint_spec, metavar="NAME=SCHEME",
                        help="the export scheme of the checkpoint named NAME (union-roc-base, say) in the int8 rows, instead of its measured one")
    parser.add_argument("--earlier", nargs="+", default=[], metavar="NAME", type=results_name,
                        help="results files (NAME or EXPERIMENT/NAME, as --output names them) whose figures a label of the same name keeps for the "
                             "kinds not measured now (with --kinds): each row is then whole, as the no-regression rule compares")
    parser.add_argument("--targets", nargs="+", default=None, choices=KINDS, metavar="KIND",
                        help="with --baseline: the kinds a candidate targets; each other row then gets the ship rule's verdict "
                             "(its mean within-pair accuracy or AUC on them rises beyond the paired 95%% interval, no figure "
                             "falls by more than both 0.02 and the joint one-in-twenty tolerance, nor any of the views' "
                             "across-story AUCs by more than both 0.02 and their own joint tolerance)")
    parser.add_argument("--min-count", type=int, default=0,
                        help="with --baseline: leave out of the comparison a figure resting on fewer pairs (within) or "
                             "across-story comparisons (AUC) than this (default 0: every figure)")
    parser.add_argument("--output", default="modern_breaks", type=results_name)
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args) if args.checkpoint else {}
    contrasts = {label: (folder, weight) for label, folder, weight in args.self_contrast}
    require_checkpoint_folders(parser, {label: folder for label, (folder, _) in contrasts.items()}, "--self-contrast")
    # label -> (what the part scorer reads, story folder, part folder, weight), as cross_metric's mixes
    mixes, mix_labels = mix_rows(args)
    for label, (kind, story, part, _) in mixes.items():
        require_checkpoint_folders(parser, {label: story, f"{label} ({kind})": part}, f"--{kind}")
    shares = part_shares(parser, args.part_lowest_share, mixes)
    sentences = part_sentences(parser, args.part_sentences, mixes)
    int8 = dict(args.int8_checkpoint)
    require_checkpoint_folders(parser, int8, "--int8-checkpoint")
    if len(int8) < len(args.int8_checkpoint) or set(int8) & {*checkpoints, *contrasts}:
        parser.error(f"each row needs its own label: --int8-checkpoint labels {[label for label, _ in args.int8_checkpoint]}")
    schemes = dict(args.int8_scheme)
    if schemes:
        from storyeval.scoring.int8.runtime import scheme_float_patterns

        if not (int8 or args.int8_suite):
            parser.error("--int8-scheme goes with --int8-checkpoint or --int8-suite")
        try:
            for scheme in schemes.values():
                scheme_float_patterns(scheme)
        except ValueError as error:
            parser.error(str(error))
    try:  # an unknown suite or combination: one line, before any model loads
        suites = parse_suites(args.suite)
        int8_suites = parse_suites(args.int8_suite)
        if len(contrasts) < len(args.self_contrast) or set(contrasts) & {*checkpoints, *suites}:
            raise ValueError(f"each row needs its own label: --self-contrast labels {[c[0] for c in args.self_contrast]}")
        fitted = parse_fitted_suites(args.fitted_suite, {*suites, *checkpoints, *contrasts, *int8, *int8_suites})
        if (set(int8) | set(int8_suites)) & {*suites, *checkpoints, *contrasts} or set(int8) & set(int8_suites):
            raise ValueError(f"each row needs its own label: int8 labels {sorted({*int8, *int8_suites})}")
    except ValueError as error:
        parser.error(str(error))
    if len(mixes) < len(mix_labels) or set(mixes) & {*checkpoints, *contrasts, *suites, *fitted, *int8, *int8_suites}:
        parser.error(f"each row needs its own label: --ending, --neighbours, --opening-ending, --runs and --topic labels {mix_labels}")
    # each int8 row's float32 row: the --checkpoint of the same folder, the --suite of the same config and combination
    float32_of = {label: next((other for other, path in checkpoints.items() if Path(path).resolve() == Path(folder).resolve()), None)
                  for label, folder in int8.items()}
    float32_of.update({label: next((other for other, entry in suites.items() if entry == spec), None) for label, spec in int8_suites.items()})
    if missing := sorted(label for label, other in float32_of.items() if other is None):
        parser.error(f"int8 rows {missing} need the float32 row of the same folder (--checkpoint) or config (--suite) in the run")
    if not (checkpoints or suites or fitted or contrasts or int8 or mixes):
        checkpoints = {name: str(BUNDLED / name) for name in SHIPPED_CHECKPOINTS}
        suites = {f"story-quality-{config}": (config, None) for config in SHIPPED_SUITES}
    if args.max_units_per_view is not None and args.max_units_per_view < 1:
        parser.error("--max-units-per-view must be positive")
    if args.min_count < 0:
        parser.error("--min-count must not be negative")
    if args.targets and not args.baseline:
        parser.error("--targets needs --baseline: the checkpoint a candidate would replace")
    try:
        earlier = earlier_views(args.earlier)
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    labels = {*checkpoints, *suites, *fitted, *contrasts, *mixes, *int8, *int8_suites}
    if args.baseline and args.baseline not in labels | set(earlier):
        parser.error(f"--baseline {args.baseline}: not one of the labels {sorted(labels)}"
                     + (f" or of the --earlier files' {sorted(earlier)}" if earlier else ""))
    from storyeval_training.data.modern_breaks import HELD_OUT_GENERATOR
    from storyeval_training.selection import regressions

    from .story_scores import StoryScores

    try:  # a folder that is not a check: one line, before any model loads
        rows = read_stories(args.breaks_dir, args.split, args.views, args.max_units_per_view, args.seed, tuple(args.kinds))
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    stories = sorted({r["text"] for r in rows})
    payload = {"machine": machine(), "command": command_line(__name__, argv), "split": args.split, "stories": len(stories),
               "checkpoints": {}}
    scores = StoryScores(stories, args.batch_size)
    measured = itertools.chain(((label, lambda folder=folder: scores.checkpoint(folder)) for label, folder in checkpoints.items()),
                               ((label, lambda folder=folder: scores.int8_checkpoint(folder, schemes)) for label, folder in int8.items()),
                               ((label, lambda spec=spec: scores.suite(*spec)) for label, spec in suites.items()),
                               ((label, lambda spec=spec: scores.suite(*spec, int8_schemes=schemes)) for label, spec in int8_suites.items()),
                               ((label, lambda entry=entry: scores.fitted_suite(entry)) for label, entry in fitted.items()),
                               ((label, lambda spec=spec: scores.self_contrast(*spec)) for label, spec in contrasts.items()),
                               ((label, lambda spec=spec, label=label: scores.part_mix(*spec, shares[label], sentences[label]))
                                for label, spec in mixes.items()))
    scores_of = {}  # label -> its scores, for the baseline's paired intervals
    for label, score in measured:
        score_of, fields = score()
        scores_of[label] = score_of
        views = report(rows, score_of, HELD_OUT_GENERATOR)
        if label in contrasts:  # does the checkpoint see sentence order at all?
            fields = {**fields, "above_own_shuffles": above_own_shuffles(rows, scores.shuffle_margins(contrasts[label][0]))}
        if label in earlier:
            fields = {**fields, "measured_now": {view: sorted(r["per_kind"]) for view, r in views.items()}, "earlier": args.earlier}
            views = with_kinds(earlier[label], views)
        payload["checkpoints"][label] = {**fields, "views": views}
        print(line(label, payload["checkpoints"][label]["views"]), flush=True)
        write_results(args.output, payload)  # after each checkpoint: a long run stopped part-way keeps what it measured
    if args.baseline:  # measured now, or (a config as it ships, say) in an --earlier file
        base = flat(payload["checkpoints"][args.baseline]["views"] if args.baseline in payload["checkpoints"] else earlier[args.baseline],
                    args.min_count)
        for label, result in payload["checkpoints"].items():
            if label != args.baseline:
                figures = flat(result["views"], args.min_count)
                result["regressions_against_baseline"] = regressions(figures, base)
                print(f"{label} below {args.baseline} by more than 0.02: {result['regressions_against_baseline'] or 'nowhere'}")
                if args.baseline in scores_of and label in scores_of:  # both scored now: how much of each fall is noise
                    result["regression_intervals"] = {
                        key: difference_interval(rows, scores_of[label], scores_of[args.baseline], key)
                        for key in result["regressions_against_baseline"]}
                    for key, (low, high) in result["regression_intervals"].items():
                        print(f"  {key}: 95% paired bootstrap interval of the difference [{low:+.3f}, {high:+.3f}]")
                    compared = sorted(key for key, value in figures.items() if value is not None and base.get(key) is not None)
                    chance = result["chance_of_a_fall_if_equal"] = chance_of_a_fall(rows, scores_of[label], scores_of[args.baseline], compared)
                    print(f"  were {label} as good as {args.baseline} on all {len(compared)} figures, the rule would name a fall in "
                          f"{chance['chance']:.0%} of draws of these stories (a tolerance of {chance['tolerance_for_5_percent']:.3f}: 5%)")
                    if args.targets:
                        rule = result["ship_rule"] = ship_rule(rows, scores_of[label], scores_of[args.baseline], figures, base,
                                                               tuple(args.targets), sorted({r["view"] for r in rows}))
                        means = "; ".join(f"mean {m} {v['difference']:+.3f} [{v['interval'][0]:+.3f}, {v['interval'][1]:+.3f}]"
                                          for m, v in rule["targeted_means"].items() if v)
                        length = rule["length_rise_intervals"]
                        print(f"  ship rule on {', '.join(args.targets)}: {means}; falls beyond {rule['tolerance']:.3f}: "
                              f"{rule['falls'] or 'none'}; the views' across-story AUCs beyond {rule['across_story_tolerance']:.3f}: "
                              f"{rule['across_story_falls'] or 'none'}; the whole check's means: " + ", ".join(
                                  f"{m} {v['difference']:+.3f} [{v['interval'][0]:+.3f}, {v['interval'][1]:+.3f}]"
                                  for m, v in rule["whole_check_means"].items() if v)
                              + f" (falls: {rule['whole_check_falls'] or 'none'}); intact stories' length rho up by more than {length['bound']:.3f}: "
                              f"{rule['length_rises'] or 'nowhere'} -> {'holds' if rule['holds'] else 'fails'} (an equal candidate "
                              f"fails {rule['chance_an_equal_candidate_fails']:.0%} of the time: falls "
                              f"{rule['chance_an_equal_candidate_falls']:.0%}, across-story falls "
                              f"{rule['chance_an_equal_candidate_falls_across_stories']:.0%}, the whole check's means at most "
                              f"{WHOLE_CHECK_CHANCE:.1%} each, length {length['chance_an_equal_candidate_fails']:.0%})")
                        print("  intact stories' length rho, rise and 95% paired interval: " + "; ".join(
                            f"{view} {v['rise']:+.3f} [{v['interval'][0]:+.3f}, {v['interval'][1]:+.3f}]"
                            for view, v in length["views"].items())
                            + f" (the length part at 0.05 alone would fail an equal candidate {length['chance_at_the_point_bound']:.0%} of the time)")
    for label, other in float32_of.items():  # the int8 fidelity rule's modern-text part: int8 against its own float32 row
        figures, base = flat(payload["checkpoints"][label]["views"]), flat(payload["checkpoints"][other]["views"])
        compared = sorted(key for key, value in figures.items() if value is not None and base.get(key) is not None)
        fidelity = {"float32_row": other, **every_interval(rows, scores_of[label], scores_of[other], compared)}
        payload["checkpoints"][label]["every_interval"] = fidelity
        print(f"{label} against {other}: {len(fidelity['outside_interval'])} of {fidelity['figures']} figures' paired intervals miss 0: "
              f"{fidelity['outside_interval'] or 'none'}")
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
