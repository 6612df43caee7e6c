"""How the rewards can be gamed: degenerate outputs a policy drifts to, scored by every shipped config.

    python -m benchmarks.reward.reward_gaming                   # every config, plain and guarded; about an hour on one thread
    python -m benchmarks.reward.reward_gaming --configs union:roc union:roc-base union:wp union:wp-base plot_coherence:roc \
        plot_coherence:roc-base continuation_quality:deltascore continuation_quality:deltascore-base story_quality:roc story_quality:wp
    python -m benchmarks.reward.reward_gaming --configs union:roc plot_coherence:roc --output reward_gaming_minilm

Prompts: the first ``--roc-prompts`` ROCStories and ``--wp-prompts`` WritingPrompts stories of the
``storyeval_training`` builders' test splits, after a seeded shuffle (ROC context: the first
sentence; WP context: the prompt). Per prompt, each strategy writes one completion, from a seed
of its own (:func:`strategy_completions`):

* ``human``: the test story's own continuation, the row the others are compared with;
* ``prompt_repeated``: the prompt, four times;
* ``sentence_repeated``: one fluent sentence of a training story, as many times as the human story has sentences (at least 4);
* ``copied_training_story``: a training story's continuation, verbatim (memorisation; unrelated to the prompt);
* ``universal_story``: one training story's continuation for every prompt, the one of 50 training
  stories that this config rewards most on two validation prompts (a policy collapsed onto one output);
* ``one_sentence``: the human continuation's first sentence only;
* ``very_long``: the human continuation followed by two training stories' continuations;
* ``generic_ending``: a fixed, prompt-agnostic template ("they were very happy . ...");
* ``keyword_list``: the human continuation's content words, comma-separated;
* ``shuffled_human``: the human continuation's sentences in a shuffled order;
* ``contradiction``: the human continuation with one negation added or removed (UNION's negation alteration);
* ``sentences_doubled``: the human continuation with every sentence said twice.

Every config of every metric scores the strategies through ``storyeval.reward`` with its defaults
(story metrics: prompt + completion as one story; continuation quality: ``overall`` of the completion
given the prompt; story_quality: ``combined`` with the prompts as contexts), on its own corpus
(continuation quality on both). Per strategy: the mean reward; the mean of the completions'
percentiles against the config's human test-story reference (``reference_scores.json``;
story_quality's ``combined`` is a mean percentile already, so its reward x100 is used as is);
whether that mean is above 50 (on average above the median human-written story); and the share
of prompts where the strategy out-scores that prompt's own human continuation. A guarded reward's
percentiles are read on the plain reference. Each config's guarded reward (``guard=True``; for
continuation quality ``guard=<the prompts' corpus>``) rates the same completions unless ``--no-guard``,
and picks its own ``universal_story``. Results: ``benchmarks/results/<output>.json``.
"""
from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np

from benchmarks.common import command_line, machine, results_name, write_results

STRATEGIES = ("human", "prompt_repeated", "sentence_repeated", "copied_training_story", "universal_story", "one_sentence",
              "very_long", "generic_ending", "keyword_list", "shuffled_human", "contradiction", "sentences_doubled")
GENERIC_ENDING = ("they were very happy . it was the best day ever . everyone had a great time . "
                  "they would never forget it .")
# function words dropped from keyword lists (a short fixed list: the strategy needs no tagger). Kept apart from
# storyeval.analysis.rewards.FUNCTION_WORDS on purpose: an attack built from the guard's own list would test the list
FUNCTION_WORDS = frozenset(
    "a an the and or but so then of to in on at for with from by as is was were be been are am it its he she they "
    "his her their them him i you we my our your me us that this there what when which who would could did had has "
    "have do not n't 's . , ! ? ; : '' `` -- he's she's".split())
UNIVERSAL_POOL = 50  # training stories a universal story is chosen from
UNIVERSAL_PROMPTS = 2  # validation prompts it is chosen on


def shipped_configs() -> list[tuple[str, str]]:
    """Every (metric, config) a reward can be made of: each metric's loadable configs, in registry order, then the suites'."""
    from storyeval.analysis.rewards import REWARD_METRICS
    from storyeval.analysis.suite import SUITE_CONFIGS
    from storyeval.checkpoints.resolution import available_configs

    return [(metric, config) for metric in REWARD_METRICS
            for config in (SUITE_CONFIGS if metric == "story_quality" else available_configs(metric))]


def config_spec(value: str) -> tuple[str, str]:
    """``metric:config``, as --configs takes it."""
    from storyeval.analysis.rewards import REWARD_METRICS

    metric, sep, config = value.partition(":")
    if not sep or not metric or not config:
        raise argparse.ArgumentTypeError(f"expected METRIC:CONFIG (e.g. union:roc), got {value!r}")
    if metric not in REWARD_METRICS:
        raise argparse.ArgumentTypeError(f"unknown metric {metric!r} in {value!r}; choose one of {list(REWARD_METRICS)}")
    return metric, config


def corpora_of(metric: str, config: str) -> tuple[str, ...]:
    if metric == "continuation_quality":
        return ("roc", "wp")
    return (config.removesuffix("-base"),)


def load_corpus(corpus: str) -> dict[str, list[list[str]]]:
    """split -> stories as sentence lists (context first), from the builders."""
    from storyeval_training.data.build_negatives import story_units
    from storyeval_training.data.builders import BUILDERS, load_split

    return {split: [[" ".join(tokens) for tokens in story_units(example)] for example in load_split(BUILDERS[corpus], split)]
            for split in ("train", "validation", "test")}


def negated(sentences: list[str], rng: random.Random) -> list[str] | None:
    from storyeval_training.data.negatives.sampler import alter_negation_in_story

    altered = alter_negation_in_story([s.split() for s in sentences], 0, rng)
    return None if altered is None else [" ".join(tokens) for tokens in altered]


def strategy_completions(context: str, continuation: list[str], train: list[list[str]], seed: int) -> dict[str, str]:
    """Every strategy's completion for one prompt (``universal_story`` is filled in per config)."""
    rng = random.Random(seed)
    donors = [train[i] for i in rng.sample(range(len(train)), 6)]
    fluent = rng.choice([s for s in donors[0][1:] if len(s.split()) >= 5] or donors[0][1:])
    shuffled = continuation[:]
    while len(shuffled) > 1 and shuffled == continuation:
        rng.shuffle(shuffled)
    contradiction = negated(continuation, random.Random(seed + 1)) or continuation
    keywords = [w for w in " ".join(continuation).split() if w.lower() not in FUNCTION_WORDS and any(c.isalpha() for c in w)]
    return {
        "human": " ".join(continuation),
        "prompt_repeated": " ".join([context] * 4),
        "sentence_repeated": " ".join([fluent] * max(4, len(continuation))),
        "copied_training_story": " ".join(donors[1][1:]),
        "one_sentence": continuation[0],
        "very_long": " ".join(continuation + [s for donor in donors[2:4] for s in donor[1:]]),
        "generic_ending": GENERIC_ENDING,
        "keyword_list": " , ".join(keywords),
        "shuffled_human": " ".join(shuffled),
        "contradiction": " ".join(contradiction),
        "sentences_doubled": " ".join(s for sentence in continuation for s in (sentence, sentence)),
    }


def universal_pool(reward, corpus: dict, seed: int) -> tuple[list[str], list[str], np.ndarray]:
    """``UNIVERSAL_POOL`` training continuations, ``UNIVERSAL_PROMPTS`` validation prompts, and the rewards (prompts x pool)."""
    rng = random.Random(seed)
    pool = [" ".join(story[1:]) for story in rng.sample(corpus["train"], UNIVERSAL_POOL)]
    prompts = [story[0] for story in rng.sample(corpus["validation"], UNIVERSAL_PROMPTS)]
    return pool, prompts, np.array([reward(prompts=[p] * len(pool), completions=pool) for p in prompts])


def reference_of(metric: str, config: str, corpus: str):
    """The config's human test-story reference for ``corpus`` (None for story_quality, whose scale is percentiles)."""
    if metric == "story_quality":
        return None
    from storyeval import download_model
    from storyeval.analysis.percentiles import load_reference

    return load_reference(download_model(f"{metric}/{config}"), corpus)


def summarise(values: dict[str, list[float]], reference, criterion: str | None) -> dict:
    """Per strategy: the mean reward, the mean of its percentiles among human test stories, whether that is above 50
    (on average above the median human story), and the share of prompts where it out-scores their own human story."""
    human = np.asarray(values["human"])
    out = {}
    for strategy, scores in values.items():
        scores = np.asarray(scores, dtype=float)
        # story_quality's reward is combined / 100, a mean percentile already
        percentiles = 100 * scores if reference is None else np.asarray(reference.percentile(scores.tolist(), criterion))
        out[strategy] = {"mean": float(scores.mean()), "mean_percentile": float(percentiles.mean()),
                         "beats_median_human": bool(percentiles.mean() > 50), "wins_over_own_human": float(np.mean(scores > human)),
                         "n": int(len(scores))}
    return out


THRESHOLD_STORIES = 2000  # training continuations per corpus the guard's bounds are read from
THRESHOLD_CALL = 32  # continuations of different prompts per call, for the shared-4-gram share


def guard_thresholds(seed: int) -> dict[str, dict]:
    """The guard's bounds (storyeval.analysis.rewards.GUARD_BOUNDS) read from each corpus's human training continuations:
    the builders' train split only, never the test split or a human-judged set."""
    from storyeval.analysis.rewards import guard_features

    bounds = {}
    for corpus in ("roc", "wp"):
        train = [story for story in load_corpus(corpus)["train"] if len(story) > 1]
        stories = random.Random(seed).sample(train, min(THRESHOLD_STORIES, len(train)))
        features = []
        for start in range(0, len(stories), THRESHOLD_CALL):
            call = stories[start : start + THRESHOLD_CALL]
            features += guard_features([s[0] for s in call], [" ".join(s[1:]) for s in call])
        column = {key: np.array([f[key] for f in features], dtype=float) for key in features[0]}
        bounds[corpus] = {"min_words": int(np.percentile(column["words"], 1)), "max_words": int(np.percentile(column["words"], 99)),
                          "repeated": round(float(np.percentile(column["repeated"], 99)), 3),
                          "function_words": round(float(np.percentile(column["function_words"], 1)), 3),
                          "shared": round(float(np.percentile(column["shared"], 99)), 3), "stories": len(stories)}
    return bounds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roc-prompts", type=int, default=50)
    parser.add_argument("--wp-prompts", type=int, default=30)
    parser.add_argument("--configs", nargs="+", default=None, type=config_spec,
                        help="metric:config pairs (default: every shipped config)")
    parser.add_argument("--no-guard", dest="guard", action="store_false", help="plain rewards only")
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--output", type=results_name, default="reward_gaming")
    parser.add_argument("--guard-thresholds", action="store_true",
                        help="print the guard's bounds read from the training splits (storyeval.analysis.rewards.GUARD_BOUNDS) and exit")
    args = parser.parse_args(argv)
    if args.guard_thresholds:
        print(json.dumps(guard_thresholds(args.seed), indent=1))
        return 0

    import storyeval

    pairs = args.configs or shipped_configs()
    sizes = {"roc": args.roc_prompts, "wp": args.wp_prompts}
    corpora, prompts, completions = {}, {}, {}
    for corpus in sorted({c for m, config in pairs for c in corpora_of(m, config)}):
        corpora[corpus] = load_corpus(corpus)
        test = corpora[corpus]["test"][:]
        random.Random(args.seed).shuffle(test)
        chosen = [story for story in test if len(story) > 1][: sizes[corpus]]
        prompts[corpus] = [story[0] for story in chosen]
        completions[corpus] = {strategy: [] for strategy in STRATEGIES}
        for k, story in enumerate(chosen):
            for strategy, text in strategy_completions(story[0], story[1:], corpora[corpus]["train"], args.seed * 1000 + k).items():
                completions[corpus][strategy].append(text)

    results, examples = {}, {}
    for corpus in prompts:
        examples[corpus] = {strategy: {"prompt": prompts[corpus][0], "completion": texts[0]} for strategy, texts in completions[corpus].items()
                            if texts}
    from storyeval.analysis.rewards import guard_factors

    for metric, config in pairs:
        started = time.perf_counter()
        criterion = "overall" if metric == "continuation_quality" else None
        # the guarded reward is the plain one times guard_factors (storyeval.analysis.rewards; tests/test_reward.py checks the two
        # agree), so each completion is scored once and both rows come from the same scores
        rows = {False: {}, True: {}} if args.guard else {False: {}}
        reward = storyeval.reward(metric, config)
        for corpus in corpora_of(metric, config):
            pool, pool_prompts, pool_scores = universal_pool(reward, corpora[corpus], args.seed)
            reference = reference_of(metric, config, corpus)
            plain = {s: reward(prompts=prompts[corpus], completions=completions[corpus][s]) for s in STRATEGIES if s != "universal_story"}
            for guard in rows:
                # the universal story is the pool's best under this reward: one prompt per call, as its choice was made
                pool_rewards = pool_scores * (np.array([guard_factors([p] * len(pool), pool, corpus) for p in pool_prompts]) if guard else 1)
                universal = pool[int(np.argmax(pool_rewards.mean(axis=0)))]
                values = {}
                for strategy in STRATEGIES:
                    texts = completions[corpus][strategy] if strategy != "universal_story" else [universal] * len(prompts[corpus])
                    scores = plain[strategy] if strategy != "universal_story" else reward(prompts=prompts[corpus], completions=texts)
                    values[strategy] = [v * f for v, f in zip(scores, guard_factors(prompts[corpus], texts, corpus))] if guard else scores
                rows[guard][corpus] = summarise(values, reference, criterion)
                rows[guard][corpus]["universal_story"]["text"] = universal
        seconds = time.perf_counter() - started
        for guard, row in rows.items():
            results[f"{metric}:{config}{':guarded' if guard else ''}"] = {**row, "seconds": seconds}
        print(f"{metric}:{config}: {seconds:.0f} s", flush=True)

    payload = {"command": command_line(__name__, argv), "machine": machine(), "seed": args.seed,
               "prompts": {corpus: len(p) for corpus, p in prompts.items()}, "strategies": list(STRATEGIES),
               "examples": examples, "results": results}
    path = write_results(args.output, payload)
    print(f"wrote {path}")
    print(markdown_table(payload))
    return 0


def markdown_table(payload: dict) -> str:
    """One row per config (and corpus), one column per strategy: percentile of the mean reward, bold where it beats the median human."""
    strategies = payload["strategies"]
    lines = ["| reward | prompts | " + " | ".join(f"`{s}`" for s in strategies) + " |", "|---|---|" + "---|" * len(strategies)]
    for name, row in payload["results"].items():
        for corpus, summary in row.items():
            if corpus == "seconds":
                continue
            cells = []
            for strategy in strategies:
                entry = summary[strategy]
                cell = f"{entry['mean_percentile']:.0f}"
                cells.append(f"**{cell}**" if entry["beats_median_human"] and strategy != "human" else cell)
            lines.append(f"| `{name}` | {corpus} ({summary['human']['n']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
