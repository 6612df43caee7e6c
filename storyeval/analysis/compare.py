"""Compare generation systems on one metric, with confidence intervals and paired tests.

    storyeval compare a.jsonl b.jsonl [c.jsonl ...] --metric union --config roc
    storyeval compare a.jsonl b.jsonl --metric story_quality     # the suite's combined percentile
    storyeval compare a.jsonl b.jsonl --json comparison.json --plot comparison.png

Each file holds one system's outputs for the same prompts. Items are matched by
an ``id`` field when every file has one, else by position (line order); a
mismatch is refused with the row numbers. A file whose records carry a ``score``
field is compared on those scores; otherwise its stories are scored with
``--metric``/``--config`` (every file must be one kind or the other, so scores
from different metrics are never mixed). ``--metric story_quality`` compares the
suite's ``combined`` (the mean of its metrics' percentiles among human stories).

What scored the items goes with the result: the metric, config and settings string
(checkpoint, precision, versions) when they are scored here, or the files' own
``<score field>_settings`` (what ``storyeval score`` writes) when they carry scores;
files whose settings differ are refused, as their scores do not compare.

Per system: the mean with a bootstrap confidence interval (BCa, ``scipy.stats.bootstrap``).
Per pair (A listed before B): the mean difference A - B with a paired bootstrap
confidence interval, one-sided paired permutation tests (``scipy.stats.permutation_test``,
each item's two scores swapped at random) for A > B and for B > A, and the share of
items where A scores higher, lower or the same. All resampling is seeded, so a
comparison repeats exactly. No correction for testing several pairs is applied.

In Python, for an eval loop::

    from storyeval.analysis.compare import compare_systems
    result = compare_systems({"baseline": base_scores, "ours": our_scores})
    print(result.table())
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from storyeval.analysis.suite import check_dtype as check_suite_dtype

DEFAULT_RESAMPLES = 9999  # scipy's default; the permutation p-value resolves to 1 / (n + 1)
DEFAULT_SEED = 12345
DEFAULT_CONFIDENCE = 0.95
# resampled values held in memory at once: scipy's `batch` is set so that n_items * batch stays below this
MAX_VALUES_IN_MEMORY = 20_000_000
# fewer items per system than this get a warning. Two reasons: the paired permutation test cannot give a p-value
# below 1 / 2**n (0.25 for 2 items, and nothing under .05 below 5), while the bootstrap interval can still exclude 0;
# and the bootstrap intervals are too narrow on few items: in simulation (normal and beta-distributed scores, 1,000
# samples each, docs/compare.md) a nominal 95% BCa interval of the mean covered the true mean in 49% of samples of
# 2 items, 85% of 5, 90% of 10 and 93% of 20
MIN_ITEMS = 10
SYSTEM_FORMATS = (".jsonl", ".txt")
# what compare scores stories with: the story metrics, and the suite's combined percentile
COMPARE_METRICS = ("union", "plot_coherence", "story_quality")


class ComparisonInputError(ValueError):
    """Systems that cannot be compared: the message names the files and rows."""


class FewItemsWarning(UserWarning):
    """A comparison on fewer than :data:`MIN_ITEMS` items per system: its intervals and p-values mean little."""


def few_items_warning(items: int) -> str | None:
    """Why a comparison on ``items`` items per system should not be trusted, or None from :data:`MIN_ITEMS` on."""
    if items >= MIN_ITEMS:
        return None
    return (f"only {items} items per system; below {MIN_ITEMS} the comparison says little: the permutation test's "
            f"smallest p-value is 1/2^{items} = {0.5 ** items:.3g}, and 95% bootstrap intervals on so few items are too narrow "
            "(in simulation they held the true mean in 85% of samples of 5 items, 49% of 2; docs/compare.md)")


@dataclasses.dataclass
class SystemSummary:
    name: str
    items: int
    mean: float
    ci_low: float
    ci_high: float


@dataclasses.dataclass
class PairComparison:
    a: str
    b: str
    mean_difference: float  # mean of A - B
    ci_low: float
    ci_high: float
    p_a_greater: float  # one-sided paired permutation test of A > B
    p_b_greater: float
    a_wins: float  # share of items where A scores higher than B
    b_wins: float
    ties: float


@dataclasses.dataclass
class Comparison:
    systems: list[SystemSummary]
    pairs: list[PairComparison]
    confidence_level: float
    resamples: int
    seed: int
    # what the scores are: set by compare_files (None for scores handed to compare_systems)
    metric: str | None = None
    config: str | None = None
    settings: str | None = None  # the settings string of every score compared, where known
    scores_from: str | None = None  # "scored" (here) or "files" (their score field)
    warnings: list[str] = dataclasses.field(default_factory=list)  # what the figures should be read with (too few items)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def table(self) -> str:
        """The systems and the pairs as two plain-text tables."""
        percent = f"{self.confidence_level:.0%}"
        width = max(len(s.name) for s in self.systems)
        lines = [f"{'system':<{width}}  {'items':>6}  {'mean':>8}  {percent + ' CI':>19}"]
        for s in self.systems:
            lines.append(f"{s.name:<{width}}  {s.items:>6}  {s.mean:>8.4f}  [{s.ci_low:.4f}, {s.ci_high:.4f}]")
        lines.append("")
        lines.append(f"{'A':<{width}}  {'B':<{width}}  {'A-B':>8}  {percent + ' CI':>19}  {'p(A>B)':>7}  {'p(B>A)':>7}  "
                     f"{'A wins':>6}  {'B wins':>6}  {'ties':>6}")
        for p in self.pairs:
            lines.append(
                f"{p.a:<{width}}  {p.b:<{width}}  {p.mean_difference:>+8.4f}  [{p.ci_low:+.4f}, {p.ci_high:+.4f}]  "
                f"{p.p_a_greater:>7.4f}  {p.p_b_greater:>7.4f}  {p.a_wins:>6.1%}  {p.b_wins:>6.1%}  {p.ties:>6.1%}"
            )
        lines.append(
            f"(BCa bootstrap CIs and paired permutation tests, {self.resamples} resamples, seed {self.seed}; "
            "p-values are one-sided and not corrected for the number of pairs)"
        )
        if self.metric or self.settings:
            what = f"{self.metric}/{self.config}" if self.metric else "the files' scores"
            lines.append(f"scores: {what}; settings: {self.settings or 'not recorded in the files'}")
        return "\n".join(lines)


def _check_scores(scores: Mapping[str, Sequence[float]]) -> dict[str, np.ndarray]:
    if not isinstance(scores, Mapping):
        raise TypeError(f"scores must map system names to lists of scores, got {type(scores).__name__}")
    if len(scores) < 2:
        raise ValueError(f"need at least two systems to compare, got {len(scores)}: {list(scores)}")
    arrays = {}
    for name, values in scores.items():
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"system names must be non-blank strings, got {name!r}")
        if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
            raise TypeError(f"scores of {name!r} must be a list of numbers, got {type(values).__name__}")
        for index, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise TypeError(f"scores of {name!r}[{index}] must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"scores of {name!r}[{index}] is not finite: {value!r}")
        arrays[name] = np.asarray(values, dtype=float)
    lengths = {name: len(values) for name, values in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"paired comparison needs one score per item from every system, got lengths {lengths}")
    if next(iter(lengths.values())) < 2:
        raise ValueError("need at least two items per system for a confidence interval")
    return arrays


def _mean(values, axis=-1):
    return np.mean(values, axis=axis)


def _mean_difference(a, b, axis=-1):
    return np.mean(a - b, axis=axis)


def _bootstrap_interval(data: tuple, statistic, confidence_level: float, resamples: int, seed: int, paired: bool) -> tuple[float, float]:
    if np.ptp(data[0] - data[1] if paired else data[0]) == 0:
        value = float(statistic(*data))  # no spread: every resample gives the same value (BCa would return NaN)
        return value, value
    with warnings.catch_warnings():
        # a near-degenerate sample warns and may still give NaN bounds; those are reported as they are
        warnings.simplefilter("ignore", RuntimeWarning)
        result = _scipy_stats().bootstrap(
            data, statistic, n_resamples=resamples, paired=paired, vectorized=True, confidence_level=confidence_level,
            method="BCa", batch=_batch(len(data[0])), rng=np.random.default_rng(seed),
        )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _batch(items: int) -> int:
    return max(1, MAX_VALUES_IN_MEMORY // max(items, 1))


def _scipy_stats():
    from scipy import stats

    return stats


def _permutation_p(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> float:
    """One-sided p-value that A's mean exceeds B's, swapping each item's two scores at random."""
    result = _scipy_stats().permutation_test(
        (a, b), _mean_difference, permutation_type="samples", vectorized=True, n_resamples=resamples,
        alternative="greater", batch=_batch(len(a)), rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def compare_systems(
    scores: Mapping[str, Sequence[float]],
    *,
    confidence_level: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Comparison:
    """Compare systems scored on the same items, in the same order.

    ``scores`` maps each system's name to its per-item scores (higher is better).
    Returns each system's mean with a bootstrap confidence interval and, for every
    pair in the mapping's order, the paired statistics described in the module docstring.
    """
    arrays = _check_scores(scores)
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be between 0 and 1, got {confidence_level!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    systems = []
    for name, values in arrays.items():
        low, high = _bootstrap_interval((values,), _mean, confidence_level, resamples, seed, paired=False)
        systems.append(SystemSummary(name, len(values), float(values.mean()), low, high))
    pairs = []
    for (name_a, a), (name_b, b) in itertools.combinations(arrays.items(), 2):
        low, high = _bootstrap_interval((a, b), _mean_difference, confidence_level, resamples, seed, paired=True)
        pairs.append(PairComparison(
            a=name_a, b=name_b, mean_difference=float(np.mean(a - b)), ci_low=low, ci_high=high,
            p_a_greater=_permutation_p(a, b, resamples, seed), p_b_greater=_permutation_p(b, a, resamples, seed),
            a_wins=float(np.mean(a > b)), b_wins=float(np.mean(a < b)), ties=float(np.mean(a == b)),
        ))
    notes = [warning] if (warning := few_items_warning(len(next(iter(arrays.values()))))) else []
    for note in notes:
        warnings.warn(note, FewItemsWarning, stacklevel=2)
    return Comparison(systems, pairs, confidence_level, resamples, seed, warnings=notes)


# ---- reading systems' files ------------------------------------------------------------------------------


@dataclasses.dataclass
class SystemFile:
    path: Path
    rows: list[int]  # line number of each item
    ids: list | None  # None: matched by position
    stories: list[str] | None  # None where the file carries scores
    scores: list[float] | None
    settings: str | None = None  # the records' "<score field>_settings" (storyeval score writes it), where they carry scores


def read_system(path: str | Path, story_field: str = "story", score_field: str = "score", id_field: str = "id") -> SystemFile:
    """One system's items: a ``.jsonl`` file (records with an id, a story and/or a score) or a ``.txt`` file
    (one story per line)."""
    from storyeval.files import InputError, json_records, read_stories, text_lines
    from storyeval.inputs import text_problem

    path = Path(path)
    if path.is_dir():
        raise ComparisonInputError(f"{path} is a folder; give a system's .jsonl or .txt file")
    if not path.is_file():
        raise ComparisonInputError(f"input file not found: {path}")
    fmt = path.suffix.lower()
    if fmt not in SYSTEM_FORMATS:
        raise ComparisonInputError(f"{path}: unsupported format {fmt!r}; use one of {SYSTEM_FORMATS}")
    try:
        if fmt == ".txt":
            rows = [lineno for lineno, _ in text_lines(path)]
            stories = [story for _, story in read_stories(path, fmt, story_field)]
            return SystemFile(path, rows, None, stories, None)
        rows, ids, stories, scores, settings = [], [], [], [], {}
        for lineno, record in json_records(path):  # its InputError becomes a ComparisonInputError below
            if not isinstance(record, dict):
                raise ComparisonInputError(f"{path}:{lineno}: expected a JSON object")
            rows.append(lineno)
            ids.append(_record_id(record, id_field, path, lineno))
            if score_field in record:
                value = record[score_field]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ComparisonInputError(f"{path}:{lineno}: {score_field!r} must be a finite number, got {value!r}")
                scores.append(float(value))
                settings.setdefault(record.get(f"{score_field}_settings"), lineno)
            else:
                story = record.get(story_field)
                if not isinstance(story, str):
                    raise ComparisonInputError(f"{path}:{lineno}: no {score_field!r} number and no {story_field!r} story")
                if problem := text_problem(story):  # no letters, not English ...
                    raise ComparisonInputError(f"{path}:{lineno}: {story_field!r} {problem}")
                stories.append(story)
    except InputError as error:
        raise ComparisonInputError(str(error)) from None
    if scores and stories:
        raise ComparisonInputError(
            f"{path}: some records have a {score_field!r} and some do not (e.g. line {rows[0]}); "
            "give every record a score, or none so that all are scored"
        )
    with_ids = [i for i in ids if i is not None]
    if with_ids and len(with_ids) != len(ids):
        missing = rows[ids.index(None)]
        raise ComparisonInputError(f"{path}:{missing}: no {id_field!r} field, but other records have one")
    if len(settings) > 1:
        (first, first_line), (other, other_line) = list(settings.items())[:2]
        raise ComparisonInputError(f"{path}: line {first_line} was scored with {first}, line {other_line} with {other}; "
                                   "scores with different settings do not compare")
    seen: dict = {}
    for row, item_id in zip(rows, ids):
        if item_id is not None and item_id in seen:
            raise ComparisonInputError(f"{path}:{row}: {id_field} {item_id!r} repeats line {seen[item_id]}")
        seen[item_id] = row
    return SystemFile(path, rows, ids if with_ids else None, stories if not scores else None, scores if scores else None,
                      next(iter(settings), None))



def _record_id(record: dict, id_field: str, path: Path, lineno: int):
    if id_field not in record:
        return None
    value = record[id_field]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ComparisonInputError(f"{path}:{lineno}: {id_field!r} must be a string or an integer, got {value!r}")
    return value


def align(systems: list[SystemFile], id_field: str = "id") -> list[SystemFile]:
    """The systems with their items in the first file's order, matched by id or by position."""
    if len(systems) < 2:
        raise ComparisonInputError(f"need at least two systems' files to compare, got {len(systems)}")
    first = systems[0]
    with_ids = [s.ids is not None for s in systems]
    if any(with_ids) and not all(with_ids):
        named = ", ".join(str(s.path) for s, has in zip(systems, with_ids) if not has)
        raise ComparisonInputError(f"{named}: no {id_field!r} field, while other files match items by it; give every file ids or none")
    if not any(with_ids):
        for other in systems[1:]:
            if len(other.rows) != len(first.rows):
                shorter, longer = sorted((first, other), key=lambda s: len(s.rows))
                raise ComparisonInputError(
                    f"matched by line: {first.path} has {len(first.rows)} items, {other.path} has {len(other.rows)}; "
                    f"{longer.path}:{longer.rows[len(shorter.rows)]} has no counterpart in {shorter.path}"
                )
        return systems
    aligned = [first]
    for other in systems[1:]:
        position = {item_id: k for k, item_id in enumerate(other.ids)}
        missing = [(row, i) for row, i in zip(first.rows, first.ids) if i not in position]
        wanted = set(first.ids)
        extra = [(row, i) for row, i in zip(other.rows, other.ids) if i not in wanted]
        if missing or extra:
            problems = [f"{first.path}:{row}: {id_field} {i!r} is not in {other.path}" for row, i in missing[:5]]
            problems += [f"{other.path}:{row}: {id_field} {i!r} is not in {first.path}" for row, i in extra[:5]]
            more = len(missing) + len(extra) - len(problems)
            raise ComparisonInputError("the files' ids do not match:\n  " + "\n  ".join(problems) + (f"\n  ... and {more} more" if more else ""))
        order = [position[i] for i in first.ids]
        aligned.append(SystemFile(
            other.path, [other.rows[k] for k in order], [other.ids[k] for k in order],
            None if other.stories is None else [other.stories[k] for k in order],
            None if other.scores is None else [other.scores[k] for k in order], other.settings,
        ))
    return aligned


def system_names(paths: Sequence[str | Path]) -> list[str]:
    """File stems, or the paths themselves where two stems coincide."""
    stems = [Path(p).stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    return [str(p) for p in paths]


def compare_files(paths: Sequence[str | Path], scorer=None, *, story_field: str = "story", score_field: str = "score",
                  id_field: str = "id", batch_size: int = 16, dtype=None, metric: str | None = None, config: str | None = None,
                  **options) -> tuple[Comparison, dict[str, list[float]], bool]:
    """Read, match and (if they carry no scores) score the systems' files, then :func:`compare_systems`.

    ``scorer`` is a loaded story scorer (``storyeval.scoring.sequence.load_scorer``), or a callable that returns
    one, called only when the files need scoring; ``metric`` and ``config`` name it in the result, with its
    ``settings(dtype)``. Returns the comparison, each system's per-item scores (in the first file's order)
    and whether the scores were read from the files.
    """
    if len(paths) < 2:
        raise ComparisonInputError(f"need at least two systems' files to compare, got {len(paths)}")
    if len({Path(p).resolve() for p in paths}) != len(paths):
        raise ComparisonInputError("the same file is given twice")
    systems = align([read_system(p, story_field, score_field, id_field) for p in paths], id_field)
    scored = [s.scores is not None for s in systems]
    if any(scored) and not all(scored):
        raise ComparisonInputError(
            f"{', '.join(str(s.path) for s, has in zip(systems, scored) if has)} carry {score_field!r} fields and "
            f"{', '.join(str(s.path) for s, has in zip(systems, scored) if not has)} do not: "
            "score every file with the same metric, or leave the scores out of all of them"
        )
    if all(scored):
        recorded = {s.settings for s in systems}
        if len(recorded) > 1:
            named = "; ".join(f"{s.path}: {s.settings or 'none recorded'}" for s in systems)
            raise ComparisonInputError(f"the files' scores were computed with different settings ({named}); "
                                       "scores with different settings do not compare")
        about = {"settings": recorded.pop(), "scores_from": "files"}
    else:
        if scorer is None:
            raise ComparisonInputError("the files hold stories without scores, and no scorer was given")
        if callable(scorer) and not hasattr(scorer, "score"):
            scorer = scorer()
        for system in systems:
            system.scores = scorer.score(system.stories, batch_size=batch_size, dtype=dtype)
        settings = scorer.settings(dtype) if hasattr(scorer, "settings") else None
        about = {"metric": metric, "config": config, "settings": settings, "scores_from": "scored"}
    names = system_names([s.path for s in systems])
    scores = {name: list(s.scores) for name, s in zip(names, systems)}
    return dataclasses.replace(compare_systems(scores, **options), **about), scores, all(scored)


class SuiteCombined:
    """The story_quality suite as a story scorer for :func:`compare_files`: each story's ``combined``."""

    def __init__(self, config: str, device=None):
        from storyeval.analysis.suite import StoryQuality

        self.suite = StoryQuality(config, device=device)

    def score(self, stories, batch_size: int = 16, dtype=None) -> list[float]:
        check_suite_dtype(dtype)
        return self.suite.score(stories, batch_size=batch_size)["combined"]

    def settings(self, dtype=None) -> str:
        return self.suite.settings(with_contexts=False)


# ---- plot -------------------------------------------------------------------------------------------------


def comparison_figure(comparison: Comparison, scores: Mapping[str, Sequence[float]], metric: str = "score"):
    """The matplotlib figure :func:`plot_comparison` saves."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("--plot needs matplotlib: pip install 'storyeval[plot]'") from None
    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    names = [s.name for s in comparison.systems]
    figure, axes = plt.subplots(figsize=(max(4.0, 1.6 * len(names) + 1.5), 4.5))
    positions = np.arange(1, len(names) + 1)
    axes.boxplot([scores[n] for n in names], positions=positions, widths=0.45, showfliers=True)
    for x, system in zip(positions, comparison.systems):
        axes.errorbar(x + 0.35, system.mean, yerr=[[system.mean - system.ci_low], [system.ci_high - system.mean]],
                      fmt="o", color="tab:red", capsize=5)
    axes.set_xticks(positions, names)
    axes.set_ylabel(metric)
    # two short lines: one long line is clipped at the figure's edges when there are only two systems
    axes.set_title(f"{metric}\nboxes: scores (orange: median); red: mean, {comparison.confidence_level:.0%} bootstrap CI", fontsize=9)
    figure.tight_layout()
    return figure


def plot_comparison(comparison: Comparison, scores: Mapping[str, Sequence[float]], path: str | Path, metric: str = "score") -> Path:
    """A box plot of each system's scores, with its mean and confidence interval drawn beside the box."""
    import matplotlib.pyplot as plt

    figure = comparison_figure(comparison, scores, metric)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return Path(path)
