"""Fit story_quality's learned combination on held-out auto-constructed and model-generated pairs.

    python -m storyeval_training.recipes.fit_suite --config roc-base \\
        --pairs perturbations=<storyeval-build-negatives output> --pairs plot=<train_plot_coherence --pairs-only output>/pairs \\
        --output outputs/fit-roc-base.json [--export-weights storyeval/analysis/suite_weights.json]

Each ``--pairs`` folder is a ``DatasetDict`` of (human, negative, context) pairs; its ``--split`` is read, never a
human-judged set. Each set is split in two by a hash of the human story: the weights are fitted on one half and
checked on the other, where the plain mean is checked too. The combination is a weighted mean of the parts'
percentiles: a Bradley-Terry logistic regression without intercept on the percentile differences (each pair set
weighted equally), negative weights set to 0, the rest scaled to sum to one, so ``combined`` stays on the
0-100 scale. Two fits: without contexts (the story parts, on whole stories) and with contexts (continuation
quality joins, on the pairs where both stories begin with the pair's context).

``--objective min-kind`` fits for the worst set instead: each set is a kind of pair the suite must rank right (the
WP kinds of ``storyeval_training.data.wp_kinds``), and the weights are those whose lowest pair accuracy over the sets
is highest on the fit halves (:func:`fit_min_kind`); the default rule then compares the check halves' minima. With
no pair that has a context, or with pairs that have one in fewer kinds than the whole stories (a worst case over
some kinds only), the export gives continuation quality no weight and the story parts their whole-story weights.
``--across-story-sets`` (with ``min-kind``) names sets of (intact story, broken copy) pairs, the modern-text check's
say: their across-story AUC (each intact story against the *other* pairs' broken copies of about its length,
:func:`storyeval_training.selection.across_story_auc`) joins their pair accuracy in the worst that the fit raises and
the default rule compares (``check_worst_measure``): a suite users rank different stories with is checked across them.

``--no-regression`` (with ``min-kind``) is the rule every selection keeps: weights that fall more than 0.02 below the
config's current combination on any set's measure, on the fit halves, are not eligible (the current combination
always is), and a fit that falls so on a check half does not become the default.

``--add-part [name=]metric:config`` weighs a candidate part beside the config's own (a second part of one metric
needs a name of its own, which keys its weight): the report then has the checks with and without it.
``--export-weights`` writes the fit whose parts are the config's (as ``SUITE_CONFIGS`` has them
now) into the suite's weights file; with ``--from-report`` it takes that fit from an earlier report instead of
scoring again (after a candidate part joined the config, say).
The plan and ship rules are in ``benchmarks/experiments/learned_suite.md``.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
from pathlib import Path

import datasets
import numpy as np

from storyeval.analysis.suite import COMBINATIONS, CONTINUATION_CRITERION, SUITE_CONFIGS, StoryQuality, SuitePart, check_config, suite_part
from storyeval.inputs import text_problem
from storyeval_training.data.named_sets import checked_pair_folders, pair_folder, set_names, techniques_per_set
from storyeval_training.export.provenance import environment, portable
from storyeval_training.selection import across_metadata, matched_auc, pairs_across_matches, regressions

logger = logging.getLogger("storyeval_training.recipes.fit_suite")

DEFAULT_RULE_MARGIN = 0.005  # the learned rule becomes the default only this far above the plain mean (declared)
OBJECTIVES = ("bradley-terry", "min-kind")


def part_spec(value: str) -> SuitePart:
    """``[NAME=]METRIC:CONFIG``: a part named NAME (default: its metric), the metric's scorer loading CONFIG."""
    name, sep, rest = value.partition("=") if "=" in value.partition(":")[0] else ("", "", value)
    metric, colon, config = rest.partition(":")
    if (sep and not name) or not colon or not metric or not config:
        raise argparse.ArgumentTypeError(f"expected [NAME=]METRIC:CONFIG, got {value!r}")
    try:
        return suite_part(metric, config, name or None)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def part_label(part: SuitePart) -> str:
    """How a report names a part: METRIC:CONFIG, with NAME= before it when it is not named after its metric."""
    return f"{part.metric}:{part.config}" if part.name == part.metric else f"{part.name}={part.metric}:{part.config}"


def half(human: str, seed: int) -> str:
    """``fit`` or ``check``: which half of its set a pair belongs to, by its human story (so a story's pairs stay together)."""
    digest = hashlib.blake2b(f"{seed}:{human}".encode(), digest_size=8).digest()
    return "fit" if digest[0] % 2 == 0 else "check"


def read_pairs(folder: Path, split: str, techniques: list[str] | None, max_pairs: int | None, seed: int) -> list[dict]:
    if not folder.is_dir():
        raise FileNotFoundError(f"no pairs folder {folder}")
    loaded = datasets.load_from_disk(str(folder))
    if not isinstance(loaded, datasets.DatasetDict) or split not in loaded:
        raise ValueError(f"{folder} has no {split!r} split (it has {list(loaded) if isinstance(loaded, datasets.DatasetDict) else 'none'})")
    columns = ("id", "human", "negative", "context", "techniques")
    rows = [dict(zip(columns, values)) for values in zip(*(loaded[split][column] for column in columns))]
    if techniques:
        rows = [row for row in rows if set(row["techniques"]) & set(techniques)]
    if not rows:
        raise ValueError(f"no pairs left in {folder} ({split}{', techniques ' + ','.join(techniques) if techniques else ''})")
    if max_pairs is not None and len(rows) > max_pairs:  # a fixed subset, by a hash of each pair
        rows = sorted(rows, key=lambda row: hashlib.blake2b(f"{seed}:{row['human']}:{row['negative']}".encode()).digest())[:max_pairs]
    for row in rows:
        row["half"] = half(row["human"], seed)
        # continuation quality needs a context with words, and a continuation after it on both sides
        row["with_context"] = (text_problem(row["context"]) is None
                               and all(row[side].startswith(row["context"]) and text_problem(continuation(row, side)) is None
                                       for side in ("human", "negative")))
    return rows


def continuation(row: dict, side: str) -> str:
    """The story of ``side`` after the pair's context."""
    return row[side][len(row["context"]):].strip()


def score_key(name: str, row: dict, side: str) -> str:
    """What a part scores of one side of a pair: the whole story, or (continuation quality) context and continuation."""
    return f"{row['context']}\x00{continuation(row, side)}" if name == "continuation_quality" else row[side]


FINGERPRINTS_KEY = "_fingerprints"


def part_fingerprint(scorer, reference) -> str:
    """A digest of what a part's percentiles depend on besides the text: its model's weights and its reference scores.
    A cache keyed by the part's name alone would hand a replaced checkpoint its predecessor's percentiles."""
    import torch

    digest = hashlib.sha256()
    model = getattr(scorer, "model", None)
    if isinstance(model, torch.nn.Module):
        for name, tensor in sorted(model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    for criterion, values in sorted(getattr(reference, "scores", {}).items()):
        digest.update(criterion.encode())
        digest.update(np.asarray(values, dtype=np.float64).tobytes())
    return digest.hexdigest()


def score_parts(suite: StoryQuality, pair_sets: dict[str, list[dict]], batch_size: int, cache: Path | None = None) -> None:
    """Add each part's percentiles to every pair, in place: ``human_percentiles`` and ``negative_percentiles``,
    keyed by part name. Each distinct story is scored once per part; with contexts, the story parts reuse the
    whole story's score (the context is the story's own opening, so context + continuation is the story).
    ``cache``: a JSON file of the percentiles scored so far, per checkpoint, written after each part and read
    back by a rerun, so that a long scoring run that stops loses at most one part; each part's table carries
    :func:`part_fingerprint`, and a table from other weights or reference scores is refused."""
    rows = [row for rows in pair_sets.values() for row in rows]
    if cache:  # a cache in a new run folder: made now, not found missing after the first part has been scored
        cache.parent.mkdir(parents=True, exist_ok=True)
    cached = json.loads(cache.read_text(encoding="utf-8")) if cache and cache.is_file() else {}
    fingerprints = cached.setdefault(FINGERPRINTS_KEY, {})
    by_part = {}
    # the fast part first: a problem in its inputs shows before the slow encoders have run
    for name, _, scorer, reference in sorted(suite.components, key=lambda part: part[0] != "continuation_quality"):
        sides = [(row, side) for row in rows for side in ("human", "negative") if row["with_context"] or name != "continuation_quality"]
        keys = sorted({score_key(name, row, side) for row, side in sides})
        fingerprint = part_fingerprint(scorer, reference)
        if scorer.name in cached and fingerprints.get(scorer.name) != fingerprint:
            raise ValueError(f"{cache} holds {scorer.name} percentiles from other weights or reference scores than the "
                             f"{scorer.name} loaded now (a replaced checkpoint keeps its name); give a new --scores-cache")
        fingerprints[scorer.name] = fingerprint
        table = cached.get(scorer.name, {})
        todo = [key for key in keys if key not in table]
        logger.info("scoring %s: %d texts (%d cached)", scorer.name, len(todo), len(keys) - len(todo))
        if todo and name == "continuation_quality":
            contexts, continuations = zip(*(key.split("\x00", 1) for key in todo))
            scores = scorer.score(list(contexts), list(continuations), batch_size=batch_size)[CONTINUATION_CRITERION]
            table.update(zip(todo, reference.percentile(scores, CONTINUATION_CRITERION)))
        elif todo:
            table.update(zip(todo, reference.percentile(scorer.score(todo, batch_size=batch_size, progress_bar=True))))
        by_part[name] = cached[scorer.name] = table
        if cache:
            cache.write_text(json.dumps(cached), encoding="utf-8")
    for row in rows:
        for side in ("human", "negative"):
            row[f"{side}_percentiles"] = {name: table[score_key(name, row, side)] for name, table in by_part.items()
                                          if score_key(name, row, side) in table}


def usable(row: dict, names: tuple[str, ...]) -> bool:
    return all(name in row["human_percentiles"] and name in row["negative_percentiles"] for name in names)


def differences(rows: list[dict], names: tuple[str, ...]) -> np.ndarray:
    return np.array([[row["human_percentiles"][m] - row["negative_percentiles"][m] for m in names] for row in rows]).reshape(-1, len(names))


def fit_weights(pair_sets: dict[str, list[dict]], names: tuple[str, ...]) -> dict:
    """Bradley-Terry weights on the fit halves, each set weighted equally; non-negative, summing to one."""
    from sklearn.linear_model import LogisticRegression

    blocks, sample_weights = [], []
    for rows in pair_sets.values():
        diff = differences(rows, names)
        blocks += [diff, -diff]
        sample_weights += [np.full(2 * len(diff), 1 / len(diff))] if len(diff) else []
    x = np.concatenate(blocks)
    y = np.concatenate([np.full(len(block), label) for block, label in zip(blocks, [1, 0] * len(pair_sets))])
    model = LogisticRegression(fit_intercept=False).fit(x, y, sample_weight=np.concatenate(sample_weights))
    raw = model.coef_[0]
    clipped = np.clip(raw, 0, None)
    if clipped.sum() == 0:  # nothing ranks pairs the right way: the plain mean is the honest fallback
        clipped = np.ones(len(names))
    return {"weights": dict(zip(names, (clipped / clipped.sum()).round(4).tolist())),
            "coefficients": dict(zip(names, raw.tolist()))}


def kind_measures(pair_sets: dict[str, list[dict]], weights: dict[str, float], across: dict[str, np.ndarray] | None = None) -> dict[str, float]:
    """set -> pair accuracy of ``weights``, and ``set/auc`` -> across-story AUC for the sets in ``across``."""
    measures = {name: pair_accuracy(rows, weights) for name, rows in pair_sets.items() if rows}
    for name, matches in (across or {}).items():
        if (auc := weighted_across_auc(pair_sets[name], matches, weights)) is not None:
            measures[f"{name}/auc"] = auc
    return measures


def fit_min_kind(pair_sets: dict[str, list[dict]], names: tuple[str, ...], steps: int = 100,
                 across: dict[str, np.ndarray] | None = None, incumbent: dict[str, float] | None = None) -> dict:
    """The weights whose lowest pair accuracy over the sets (kinds) is highest on the fit halves; ties go to the higher
    mean over the sets, then to the weights nearest the plain mean. ``across`` (set -> its :func:`across_matches`)
    adds those sets' across-story AUCs to the measures whose lowest is raised. With ``incumbent`` (the weights the
    config uses now), only weights that fall no more than the no-regression tolerance below it on any measure are
    eligible; the incumbent always is, so a fit that finds nothing better keeps it.

    A grid over the simplex, 1/``steps`` apart, searched whole: the objective is a minimum of step functions, which
    a gradient-based solver cannot follow, and a suite has two or three parts (5,151 points for three).
    """
    grid = (dict(zip(names, [c / steps for c in counts] + [(steps - sum(counts)) / steps]))
            for counts in itertools.product(range(steps + 1), repeat=len(names) - 1) if sum(counts) <= steps)
    floor = kind_measures(pair_sets, incumbent, across) if incumbent else None
    best, best_key, eligible = None, None, 0
    for weights in itertools.chain([incumbent] if incumbent else [], grid):
        measures = kind_measures(pair_sets, weights, across)
        if floor is not None and regressions(measures, floor):
            continue
        eligible += 1
        spread = sum((w - 1 / len(names)) ** 2 for w in weights.values())
        key = (min(measures.values()), float(np.mean(list(measures.values()))), -spread)
        if best_key is None or key > best_key:
            best, best_key = weights, key
    return {"weights": {m: round(w, 4) for m, w in best.items()}, "fit_min_accuracy": best_key[0], "fit_mean_accuracy": best_key[1]} | (
        {"incumbent": incumbent, "eligible_weightings": eligible} if incumbent else {})


def across_matches(rows: list[dict]) -> np.ndarray:
    """Which (human story of one pair, negative of another) comparisons the across-story AUC of ``rows`` makes."""
    return pairs_across_matches(across_metadata({side: [row[side] for row in rows] for side in ("id", "human", "negative")}))


def weighted_across_auc(rows: list[dict], matches: np.ndarray, weights: dict[str, float]) -> float | None:
    """Across-story AUC of the weighted percentiles: pairs' human stories above the other pairs' negatives."""
    names = tuple(weights)
    vector = np.array([weights[m] for m in names])
    sides = [np.array([[row[f"{side}_percentiles"][m] for m in names] for row in rows]).reshape(-1, len(names)) @ vector
             for side in ("human", "negative")]
    return matched_auc(*sides, matches)


def pair_accuracy(rows: list[dict], weights: dict[str, float]) -> float:
    """Share of pairs where the human story's weighted percentile is higher; a tie counts half."""
    names = tuple(weights)
    margin = differences(rows, names) @ np.array([weights[m] for m in names])
    return float(np.mean(np.where(margin > 0, 1.0, np.where(margin == 0, 0.5, 0.0))))


def evaluate_parts(pair_sets: dict[str, list[dict]], names: tuple[str, ...], with_context: bool,
                   objective: str = "bradley-terry", across_sets: tuple[str, ...] = (),
                   incumbent: dict[str, float] | None = None) -> dict | None:
    """Fit on the fit halves by ``objective``; pair accuracy of the plain mean and of the fit on each set's check half,
    their mean and their minimum; for ``across_sets``, their check halves' across-story AUCs too, and the worst of
    every accuracy and AUC. None where no pair of any set can be scored so (no pair has a context). ``incumbent``
    (min-kind only): the weights the config uses now, which the fit may not fall below (:func:`fit_min_kind`); the
    check halves' falls beyond the tolerance are reported as ``check_regressions_against_incumbent``, and every check
    measure has an ``incumbent`` entry beside ``mean`` and ``learned``."""
    usable_sets = {name: [row for row in rows if (row["with_context"] or not with_context) and usable(row, names)]
                   for name, rows in pair_sets.items()}
    usable_sets = {name: rows for name, rows in usable_sets.items() if rows}
    if not usable_sets:
        return None
    halves = {h: {name: [r for r in rows if r["half"] == h] for name, rows in usable_sets.items()} for h in ("fit", "check")}
    across = {h: {name: across_matches(halves[h][name]) for name in across_sets if name in usable_sets} for h in halves}
    fit = (fit_min_kind(halves["fit"], names, across=across["fit"], incumbent=incumbent) if objective == "min-kind"
           else fit_weights(halves["fit"], names))
    # the incumbent's own check measures too: a suite gaining a part is compared with the weights it ships, which for a
    # learned default are not the plain mean
    rules = {"mean": {m: 1 / len(names) for m in names}, "learned": fit["weights"]} | ({"incumbent": incumbent} if incumbent else {})
    checks = {name: {rule: pair_accuracy(rows, weights) for rule, weights in rules.items()} for name, rows in halves["check"].items()}
    across_checks = {name: {rule: weighted_across_auc(halves["check"][name], matches, weights) for rule, weights in rules.items()}
                     for name, matches in across["check"].items()}
    extra = {}
    if across_checks:
        extra = {"check_across_story_auc": across_checks,
                 "check_worst_measure": {rule: min([checks[name][rule] for name in checks]
                                                   + [a[rule] for a in across_checks.values() if a[rule] is not None]) for rule in rules}}
    if incumbent:
        extra["check_regressions_against_incumbent"] = regressions(kind_measures(halves["check"], fit["weights"], across["check"]),
                                                                   kind_measures(halves["check"], incumbent, across["check"]))
    return {
        "parts": list(names), **fit,
        "pairs": {name: {h: sum(r["half"] == h for r in rows) for h in ("fit", "check")} for name, rows in usable_sets.items()},
        "check_accuracy": checks,
        "check_accuracy_mean": {rule: float(np.mean([checks[name][rule] for name in checks])) for rule in rules},
        "check_accuracy_min": {rule: min(checks[name][rule] for name in checks) for rule in rules},
        **extra,
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Fit story_quality's learned combination on held-out auto-constructed pairs.")
    p.add_argument("--config", required=True, help=f"a story_quality config: {sorted(SUITE_CONFIGS)}")
    p.add_argument("--pairs", action="append", default=[], type=pair_folder, metavar="NAME=FOLDER", help="a pair folder (repeatable)")
    p.add_argument("--from-report", default=None, help="export this earlier report's fit (with --export-weights) without scoring")
    p.add_argument("--techniques", action="append", default=[], metavar="NAME=T1,T2",
                   help="keep only the pairs of set NAME made by these techniques (generators, for wp_machine_pairs)")
    p.add_argument("--split", default="validation", choices=["validation", "test"])
    p.add_argument("--max-pairs-per-set", type=int, default=None)
    p.add_argument("--add-part", action="append", default=[], type=part_spec, metavar="[NAME=]METRIC:CONFIG",
                   help="a candidate part to weigh beside the config's own (NAME: its columns' and weight's name, needed "
                        "for a second part of one metric)")
    p.add_argument("--objective", choices=OBJECTIVES, default="bradley-terry",
                   help="bradley-terry: a logistic fit over every set's pairs, each set weighted equally; min-kind: the weights "
                        "whose worst set is best (each set a kind of pair that must hold), and the default rule compares minima")
    p.add_argument("--across-story-sets", nargs="+", default=[], metavar="NAME",
                   help="with --objective min-kind: --pairs sets of (intact story, broken copy) pairs whose across-story AUC "
                        "(length-matched, against other pairs' broken copies) joins their pair accuracy in the worst measure")
    p.add_argument("--no-regression", action="store_true",
                   help="with --objective min-kind: only weights that fall no more than 0.02 below the config's current "
                        "combination on any set's measure (on the fit halves) are eligible; with none better, it is kept")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--output", default=None, help="the report (JSON); must not exist")
    p.add_argument("--scores-cache", default=None,
                   help="a JSON file of the parts' percentiles: read if it exists, written after each part (a rerun rescoring nothing it holds)")
    p.add_argument("--export-weights", default=None,
                   help="write the config's fit into this weights file (storyeval/analysis/suite_weights.json)")
    p.add_argument("--default", choices=COMBINATIONS, default=None,
                   help="the config's default combination in the weights file (default: by the declared rule)")
    return p


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    try:
        args.config = check_config(args.config)
    except ValueError as error:
        p.error(str(error))
    if args.from_report:
        if not args.export_weights or args.pairs or args.output:
            p.error("--from-report exports an earlier fit: give it --export-weights, and no --pairs or --output")
        if not Path(args.from_report).is_file():
            p.error(f"--from-report {args.from_report}: no such file")
        return args
    if not args.pairs or not args.output:
        p.error("give --pairs (at least one) and --output")
    if Path(args.output).exists():
        p.error(f"--output {args.output} exists: choose a new file")
    try:
        args.techniques = techniques_per_set(args.techniques, set_names(args.pairs))
    except ValueError as error:
        p.error(str(error))
    unknown = sorted(set(args.across_story_sets) - set(set_names(args.pairs)))
    if unknown:
        p.error(f"--across-story-sets {', '.join(unknown)}: not a --pairs set ({', '.join(set_names(args.pairs))})")
    if args.across_story_sets and args.objective != "min-kind":
        p.error("--across-story-sets selects on the worst measure: give --objective min-kind")
    if args.no_regression and args.objective != "min-kind":
        p.error("--no-regression keeps the min-kind fit's measures from falling: give --objective min-kind")
    if args.max_pairs_per_set is not None and args.max_pairs_per_set < 2:
        p.error("--max-pairs-per-set must be at least 2")
    names = [part.name for part in (*SUITE_CONFIGS[args.config], *args.add_part)]
    if len(set(names)) < len(names):
        p.error(f"--add-part: every part needs its own name, and {args.config}'s are {[part.name for part in SUITE_CONFIGS[args.config]]} "
                "(give a second part of a metric a name: NAME=METRIC:CONFIG)")
    try:  # last: every other mistake is named first, without reading anything
        checked_pair_folders(args.pairs)
    except ValueError as error:
        p.error(str(error))
    return args


def export(path: Path, config: str, report: dict, default: str | None) -> dict:
    """Merge the config's fit into the weights file; the default combination by the declared rule unless given."""
    if report["config"] != config:
        raise ValueError(f"the report fitted {report['config']!r}, not {config!r}")
    parts = [part_label(part) for part in SUITE_CONFIGS[config]]
    matching = [fit for fit in report["fits"].values() if sorted(fit["parts"]) == sorted(parts)]  # weights are keyed by part name
    if not matching:
        raise ValueError(f"no fit in the report has {config}'s parts {parts}: it has {[f['parts'] for f in report['fits'].values()]}")
    own = matching[0]
    if default is None:
        by = rule_measure(report.get("objective", "bradley-terry"), bool(report.get("across_story_sets")))
        learned, mean = own["without_contexts"][by]["learned"], own["without_contexts"][by]["mean"]
        # under --no-regression, weights that fall on a check half are not the default however their worst measure does
        held = not own["without_contexts"].get("check_regressions_against_incumbent")
        default = "learned" if learned >= mean + DEFAULT_RULE_MARGIN and held else "mean"
    fitted_with_contexts = own["with_contexts"]
    if (fitted_with_contexts and report.get("objective") == "min-kind"
            and set(fitted_with_contexts["pairs"]) != set(own["without_contexts"]["pairs"])):
        # a worst-kind fit over fewer kinds than the whole stories' is not one: the kinds whose pairs share no context
        # (on WP, all but origin) would get no say, and the part that fails them could take all the weight
        fitted_with_contexts = None
    with_contexts = fitted_with_contexts["weights"] if fitted_with_contexts else {
        # no fit with contexts to use: continuation quality weighs nothing, the story parts as fitted on whole stories
        **own["without_contexts"]["weights"], **{part.name: 0.0 for part in SUITE_CONFIGS[config] if part.metric == "continuation_quality"}}
    entries = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    entries[config] = {
        "default": default,
        "without_contexts": own["without_contexts"]["weights"],
        "with_contexts": with_contexts,
        "with_contexts_fitted": fitted_with_contexts is not None,
        # the package ships this file: its fitting command and pair sets name no path of the machine that fitted it
        "fitted": portable({key: report[key] for key in ("command", "pair_sets", "split", "seed")})
        | {"commit": report["environment"].get("commit", "unknown"), "objective": report.get("objective", "bradley-terry")}
        | ({"across_story_sets": report["across_story_sets"]} if report.get("across_story_sets") else {}),
    }
    path.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return entries[config]


def current_weights(config: str, names: tuple[str, ...], with_context: bool) -> dict[str, float]:
    """The weights ``config``'s default combination gives ``names`` now (a part it does not have weighs 0): what a
    ``--no-regression`` fit may not fall below."""
    from storyeval.analysis.suite import learned_weights

    entry = learned_weights().get(config)
    own = {part.name for part in SUITE_CONFIGS[config]} & set(names)
    if entry and entry["default"] == "learned":
        stored = entry["with_contexts" if with_context else "without_contexts"]
        weights = {m: float(stored.get(m, 0.0)) if m in own else 0.0 for m in names}
    else:
        weights = {m: 1 / len(own) if m in own else 0.0 for m in names}
    total = sum(weights.values())
    return {m: w / total for m, w in weights.items()} if total else {m: 1 / len(names) for m in names}


def rule_measure(objective: str, across: bool) -> str:
    """The check measure the default rule (and the log) compares: the mean over sets, their minimum, or (with
    across-story sets) the worst of every pair accuracy and across-story AUC."""
    if objective != "min-kind":
        return "check_accuracy_mean"
    return "check_worst_measure" if across else "check_accuracy_min"


def main(argv=None) -> None:
    import sys

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    if args.from_report:
        report = json.loads(Path(args.from_report).read_text(encoding="utf-8"))
        entry = export(Path(args.export_weights), args.config, report, args.default)
        logger.info("wrote %s's weights (default %s) to %s", args.config, entry["default"], args.export_weights)
        return
    run_environment = environment()  # before scoring: the commit the run started from
    try:
        pair_sets = {name: read_pairs(folder, args.split, args.techniques.get(name), args.max_pairs_per_set, args.seed)
                     for name, folder in args.pairs}
    except ValueError as error:  # a set without --split, or with no pair of the asked techniques: one line, nothing scored
        sys.exit(f"error: {error}")
    own = SUITE_CONFIGS[args.config]
    try:  # an added part with no checkpoint there, or no percentile reference for the corpus: one line, before any scoring
        suite = StoryQuality(args.config, parts=[*own, *args.add_part])
    except (FileNotFoundError, KeyError) as error:
        sys.exit(f"error: {error.args[0] if isinstance(error, KeyError) else error}")
    score_parts(suite, pair_sets, args.batch_size, Path(args.scores_cache) if args.scores_cache else None)
    candidates = {"own": own} | ({"with_added": (*own, *args.add_part)} if args.add_part else {})
    check_key = rule_measure(args.objective, bool(args.across_story_sets))
    across_sets = tuple(args.across_story_sets)
    fits = {}

    def incumbent(names: tuple[str, ...], with_context: bool) -> dict[str, float] | None:
        return current_weights(args.config, names, with_context) if args.no_regression else None

    for label, parts in candidates.items():
        story_names = tuple(part.name for part in parts if part.metric != "continuation_quality")
        all_names = tuple(part.name for part in parts)
        fits[label] = {"parts": [part_label(part) for part in parts],
                       "without_contexts": evaluate_parts(pair_sets, story_names, False, args.objective, across_sets,
                                                          incumbent(story_names, False)),
                       "with_contexts": evaluate_parts(pair_sets, all_names, True, args.objective, across_sets,
                                                       incumbent(all_names, True))}
        # each story part alone: what the suite adds over its best part, and where each part holds on the check halves
        alone = {m: evaluate_parts(pair_sets, (m,), False, across_sets=across_sets) for m in story_names}
        fits[label]["single_parts"] = {m: row[check_key]["mean"] for m, row in alone.items()}
        fits[label]["single_part_measures"] = {
            m: {key: {name: values["mean"] for name, values in row[key].items()}
                for key in ("check_accuracy", "check_across_story_auc") if key in row}
            for m, row in alone.items()}
    report = {
        "command": "python -m storyeval_training.recipes.fit_suite " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": args.config, "split": args.split, "seed": args.seed, "objective": args.objective,
        "no_regression": args.no_regression,
        "across_story_sets": list(across_sets),
        "pair_sets": {name: {"folder": str(folder), "pairs": len(pair_sets[name]), "techniques": args.techniques.get(name)}
                      for name, folder in args.pairs},
        "fits": fits, "environment": run_environment,
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for label, fit in fits.items():
        for mode in ("without_contexts", "with_contexts"):
            row = fit[mode]
            if row is None:
                logger.info("%s %s: no pair has a context", label, mode)
                continue
            # a fit with contexts has no across-story sets where their pairs have none: its minimum is logged then
            key = check_key if check_key in row else "check_accuracy_min"
            logger.info("%s %s: weights %s; check accuracy (%s) plain mean %.3f, learned %.3f%s", label, mode, row["weights"],
                        key, row[key]["mean"], row[key]["learned"],
                        f", incumbent {row[key]['incumbent']:.3f}" if "incumbent" in row[key] else "")
    if args.export_weights:
        entry = export(Path(args.export_weights), args.config, report, args.default)
        logger.info("wrote %s's weights (default %s) to %s", args.config, entry["default"], args.export_weights)


if __name__ == "__main__":
    main()
