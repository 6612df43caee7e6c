"""Agreement of the story_quality suite's ``combined`` score with every human set, beside its parts.

    python -m benchmarks.story_quality_correlation

Sets (all test sets: nothing here chooses anything; ``combined`` is a fixed mean of percentiles):

* ``union_roc`` (400 stories) and ``plot_amt_roc`` (300), with config ``roc``, scored two ways:
  the whole story as ``predictions`` (no contexts: UNION and plot coherence), and the first
  sentence as the context with the rest as the prediction (continuation quality joins);
* ``union_wp`` (200), with config ``wp``, whole stories only (its prompts are not marked off
  from the stories, so there is no context to pass; ``combined`` is then UNION's percentile alone);
* ``deltascore_roc`` and ``deltascore_wp``: the DeltaScore rated pairs held out from continuation
  quality's training (the test side of its grouped split, as in ``benchmarks/continuation_quality.py``),
  context = the opening sentence or prompt, prediction = the rated continuation, against the
  ``overall`` rating.

Each row gives Pearson, Spearman and Kendall (``benchmarks.common.correlations``) for every
component's raw score, its percentile, and ``combined``. Results go to
``benchmarks/results/story_quality_correlation.json``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import command_line, correlations, machine, write_results
from storyeval_training.paths import data_dir


def story_sets() -> dict[str, tuple[str, list[str], np.ndarray]]:
    """name -> (suite config, stories, human scores) for the story-level human sets."""
    from benchmarks.correlation import HUMAN_SETS, load_human_set

    sets = {name: load_human_set(name) for name in HUMAN_SETS}
    return {name: ("wp" if name == "union_wp" else "roc", human_set.stories, human_set.human) for name, human_set in sets.items()}


def deltascore_sets() -> dict[str, tuple[str, list[str], list[str], np.ndarray]]:
    """name -> (suite config, contexts, continuations, overall ratings) for the held-out DeltaScore pairs."""
    import datasets

    from storyeval_training import continuation_data

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


def agreement(result: dict, human: np.ndarray) -> dict:
    keys = [key for key, values in result.items() if isinstance(values, list)]
    return {key: correlations(result[key], human) for key in keys}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error("--batch-size must be positive")

    from storyeval.analysis.suite import StoryQuality

    story, rated = story_sets(), deltascore_sets()
    configs = sorted({config for config, *_ in [*story.values(), *rated.values()]})  # only the configs the sets are scored with
    suites = {config: StoryQuality(config) for config in configs}
    payload = {"machine": machine(), "command": command_line(__name__, argv),
               "combined": "mean of the components' percentiles (continuation quality: overall)", "sets": {}}

    def report(name: str, mode: str, config: str, result: dict, human: np.ndarray, seconds: float) -> None:
        rows = agreement(result, human)
        payload["sets"].setdefault(name, {})[mode] = {"config": config, "n": len(human), "seconds": round(seconds, 2), "correlations": rows}
        print(f"{name} ({mode}, {config}): " + ", ".join(f"{key} {row['spearman']:.3f}" for key, row in rows.items()))

    for name, (config, stories, human) in story.items():
        started = time.perf_counter()
        report(name, "whole_story", config, suites[config].score(stories, batch_size=args.batch_size), human, time.perf_counter() - started)
        if name == "union_wp":
            continue
        split = [split_opening(story) for story in stories]
        kept = [i for i, pair in enumerate(split) if pair is not None]
        if len(kept) != len(stories):
            raise SystemExit(f"{name}: {len(stories) - len(kept)} stories have a single sentence; the context mode needs two or more")
        started = time.perf_counter()
        result = suites[config].score([rest for _, rest in split], contexts=[opening for opening, _ in split], batch_size=args.batch_size)
        report(name, "first_sentence_as_context", config, result, human, time.perf_counter() - started)
    for name, (config, contexts, continuations, human) in rated.items():
        started = time.perf_counter()
        result = suites[config].score(continuations, contexts=contexts, batch_size=args.batch_size)
        report(name, "context_and_continuation", config, result, human, time.perf_counter() - started)
    print("wrote", write_results("story_quality_correlation", payload))


if __name__ == "__main__":
    main()
