"""Agreement of the story_quality suite's ``combined`` score with every human set, beside its parts.

    python -m benchmarks.agreement.story_quality_correlation [--tier base]

``--tier base`` scores with the base tier's configs (``roc-base``, ``wp-base``) instead of ``roc`` and ``wp``.
A config with learned weights (``storyeval/analysis/suite_weights.json``) is reported with both combinations:
``combined`` (the plain mean) and ``combined_learned``, from the same percentiles.

Sets (all test sets: nothing here chooses anything; ``combined`` is a fixed mean of percentiles):

* ``union_roc`` (400 stories) and ``plot_amt_roc`` (300), with config ``roc``, scored two ways:
  the whole story as ``predictions`` (no contexts: UNION and plot coherence), and the first
  sentence as the context with the rest as the prediction (continuation quality joins);
* ``union_wp`` (200), with config ``wp``, whole stories only (its prompts are not marked off
  from the stories, so there is no context to pass; ``combined`` is then UNION's percentile alone);
* ``deltascore_roc`` and ``deltascore_wp``: the DeltaScore rated pairs held out from continuation
  quality's training (the test side of its grouped split, as in ``benchmarks/agreement/continuation_quality.py``),
  context = the opening sentence or prompt, prediction = the rated continuation, against the
  ``overall`` rating.

``--dtype int8 --output NAME`` measures instead the int8 fidelity rule's human-set part for the suite: on each story set,
whole stories, its ``combined`` score (and ``combined_learned`` where the config has learned weights) with its story
metrics in float32 and in int8 (each part's measured export scheme, or ``--int8-scheme NAME=SCHEME``'s), and how far
int8 moves each coefficient.

``--fitted-suite LABEL=REPORT --output NAME`` measures instead a candidate suite that ``fit_suite`` fitted (its added
parts and whole-story weights) on the story sets of its config's corpus, whole stories only, as a candidate's human
rows are measured once after its other ship rules hold.

Each row gives Pearson, Spearman and Kendall (``benchmarks.common.correlations``) for every
component's raw score, its percentile, and ``combined``. Results go to
``benchmarks/results/story_quality_correlation.json``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import checkpoint_spec, command_line, correlations, machine, results_name, write_results
from storyeval_training.paths import data_dir

from .story_scores import FITTED_HELP, parse_fitted_suites


def story_sets() -> dict[str, tuple[str, list[str], np.ndarray]]:
    """name -> (corpus, stories, human scores) for the story-level human sets."""
    from benchmarks.correlation import HUMAN_SETS, load_human_set

    sets = {name: load_human_set(name) for name in HUMAN_SETS}
    return {name: ("wp" if name == "union_wp" else "roc", human_set.stories, human_set.human) for name, human_set in sets.items()}


def deltascore_sets() -> dict[str, tuple[str, list[str], list[str], np.ndarray]]:
    """name -> (corpus, contexts, continuations, overall ratings) for the held-out DeltaScore pairs."""
    import datasets

    from storyeval_training.data import continuation_data

    root = data_dir() / "continuation"
    rated = datasets.concatenate_datasets([continuation_data.read_deltascore(root / f"deltascore_crowdsource_{c}.jsonl") for c in ("roc", "wp")])
    test = continuation_data.grouped_split(rated, seed=continuation_data.HELDOUT_SPLIT_SEED)["test"]
    out = {}
    for corpus in ("roc", "wp"):
        rows = test.filter(lambda source: source.startswith(f"deltascore_crowdsource_{corpus}:"), input_columns="source")
        out[f"deltascore_{corpus}"] = (corpus, rows["context"], rows["continuation"], np.array(rows["overall"]))
    return out


def split_opening(story: str) -> tuple[str, str] | None:
    from storyeval import text as textlib

    sentences = textlib.split_sentences(story)
    return (sentences[0], " ".join(sentences[1:])) if len(sentences) > 1 else None


def add_learned(suite, result: dict, with_contexts: bool) -> dict:
    """``result`` with ``combined_learned`` beside the plain mean, where the config has learned weights."""
    from storyeval.analysis.suite import learned_weights

    if suite.config not in learned_weights():
        return result
    return {**result, "combined_learned": suite.combine(result, "learned", with_contexts)}


def agreement(result: dict, human: np.ndarray) -> dict:
    keys = [key for key, values in result.items() if isinstance(values, list)]
    return {key: correlations(result[key], human) for key in keys}


def fitted_rows(fitted: dict[str, dict], batch_size: int) -> dict:
    """Per fitted suite: its fields and, on each story set of its config's corpus, the correlations of its combined
    score (whole stories) with people's ratings. The corpus's sets are scored together, each part loaded once."""
    from .story_scores import StoryScores

    story = story_sets()
    rows = {}
    for label, entry in fitted.items():
        corpus = entry["config"].removesuffix("-base")
        sets = {name: (stories, human) for name, (set_corpus, stories, human) in story.items() if set_corpus == corpus}
        started = time.perf_counter()
        combined, fields = StoryScores(sorted({s for stories, _ in sets.values() for s in stories}), batch_size).fitted_suite(entry)
        rows[label] = {**fields, "seconds": round(time.perf_counter() - started, 2), "sets": {}}
        for name, (stories, human) in sets.items():
            row = {"n": len(human), "correlations": {"combined_fitted": correlations([combined[s] for s in stories], human)}}
            rows[label]["sets"][name] = row
            print(f"{label} on {name}: combined_fitted Spearman {row['correlations']['combined_fitted']['spearman']:.4f}")
    return rows


def int8_rows(tier: str, batch_size: int, schemes: dict[str, str], names: list[str] | None = None) -> dict:
    """Per story set (whole stories; ``names``: these only): the config's combined scores' correlations in float32 and
    with its story metrics in int8, and each coefficient's move, float32 to int8."""
    from storyeval.analysis.suite import learned_weights

    from .story_scores import StoryScores

    suffix = "-base" if tier == "base" else ""
    rows = {}
    for name, (corpus, stories, human) in story_sets().items():
        if names and name not in names:
            continue
        config = corpus + suffix
        combinations = ["mean"] + (["learned"] if config in learned_weights() else [])
        scores = StoryScores(sorted(set(stories)), batch_size, progress_bar=False)
        row = rows[name] = {"config": config, "n": len(human), "correlations": {}, "moved": {}}
        for combination in combinations:
            key = "combined" if combination == "mean" else "combined_learned"
            float32, _ = scores.suite(config, combination)
            int8, fields = scores.suite(config, combination, int8_schemes=schemes)
            pair = {dtype: correlations([values[s] for s in stories], human) for dtype, values in (("float32", float32), ("int8", int8))}
            row["correlations"][key] = pair
            row["moved"][key] = {c: pair["int8"][c] - pair["float32"][c] for c in ("pearson", "spearman", "kendall")}
            row["settings"] = fields["settings"]
            print(f"{name} ({config}) {key}: " + ", ".join(f"{c} {pair['float32'][c]:.4f} -> {pair['int8'][c]:.4f}"
                                                      for c in ("pearson", "spearman", "kendall")))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--tier", choices=["default", "base"], default="default",
                        help="base: the roc-base and wp-base configs")
    parser.add_argument("--fitted-suite", action="append", default=[], metavar="LABEL=REPORT", help=FITTED_HELP)
    parser.add_argument("--output", type=results_name, default=None, help="the results file's name (required with --fitted-suite and --dtype int8)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "int8"],
                        help="int8: the suite's combined scores with its story metrics in float32 and in int8 (the int8 rule's human-set part)")
    parser.add_argument("--int8-scheme", action="append", default=[], type=checkpoint_spec, metavar="NAME=SCHEME",
                        help="with --dtype int8: the export scheme of the part checkpoint NAME instead of its measured one")
    parser.add_argument("--sets", nargs="+", default=None, choices=["union_roc", "union_wp", "plot_amt_roc"],
                        help="with --dtype int8: these story sets only (default: every one)")
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error("--batch-size must be positive")
    if (args.int8_scheme or args.sets) and args.dtype != "int8":
        parser.error("--int8-scheme and --sets go with --dtype int8")
    if args.dtype == "int8":
        if not args.output or args.fitted_suite:
            parser.error("--dtype int8: give --output (and no --fitted-suite), so that the shipped configs' results file is left as it is")
        payload = {"machine": machine(), "command": command_line(__name__, argv), "tier": args.tier,
                   "sets": int8_rows(args.tier, args.batch_size, dict(args.int8_scheme), args.sets)}
        print("wrote", write_results(args.output, payload))
        return
    if args.fitted_suite:
        if not args.output:
            parser.error("--fitted-suite: give --output, so that the shipped configs' results file is left as it is")
        try:
            fitted = parse_fitted_suites(args.fitted_suite)
        except ValueError as error:
            parser.error(str(error))
        payload = {"machine": machine(), "command": command_line(__name__, argv), "fitted_suites": fitted_rows(fitted, args.batch_size)}
        print("wrote", write_results(args.output, payload))
        return

    from storyeval.analysis.suite import StoryQuality

    story, rated = story_sets(), deltascore_sets()
    suffix = "-base" if args.tier == "base" else ""
    corpora = sorted({corpus for corpus, *_ in [*story.values(), *rated.values()]})  # only the corpora the sets are scored with
    suites = {corpus: StoryQuality(corpus + suffix) for corpus in corpora}
    payload = {"machine": machine(), "command": command_line(__name__, argv),
               "combined": "mean of the components' percentiles (continuation quality: overall)",
               "combined_learned": "the config's learned weights over the same percentiles (storyeval/analysis/suite_weights.json)",
               "sets": {}}

    def report(name: str, mode: str, corpus: str, result: dict, human: np.ndarray, seconds: float) -> None:
        config = suites[corpus].config
        rows = agreement(add_learned(suites[corpus], result, mode != "whole_story"), human)
        payload["sets"].setdefault(name, {})[mode] = {"config": config, "n": len(human), "seconds": round(seconds, 2),
                                                      "settings": result["settings"], "correlations": rows}
        print(f"{name} ({mode}, {config}): " + ", ".join(f"{key} {row['spearman']:.3f}" for key, row in rows.items()))

    for name, (corpus, stories, human) in story.items():
        started = time.perf_counter()
        report(name, "whole_story", corpus, suites[corpus].score(stories, batch_size=args.batch_size, combination="mean"), human, time.perf_counter() - started)
        if name == "union_wp":
            continue
        split = [split_opening(story) for story in stories]
        kept = [i for i, pair in enumerate(split) if pair is not None]
        if len(kept) != len(stories):
            raise SystemExit(f"{name}: {len(stories) - len(kept)} stories have a single sentence; the context mode needs two or more")
        started = time.perf_counter()
        result = suites[corpus].score([rest for _, rest in split], contexts=[opening for opening, _ in split], batch_size=args.batch_size,
                                      combination="mean")
        report(name, "first_sentence_as_context", corpus, result, human, time.perf_counter() - started)
    for name, (corpus, contexts, continuations, human) in rated.items():
        started = time.perf_counter()
        result = suites[corpus].score(continuations, contexts=contexts, batch_size=args.batch_size, combination="mean")
        report(name, "context_and_continuation", corpus, result, human, time.perf_counter() - started)
    print("wrote", write_results("story_quality_correlation" + ("_base" if args.tier == "base" else ""), payload))


if __name__ == "__main__":
    main()
