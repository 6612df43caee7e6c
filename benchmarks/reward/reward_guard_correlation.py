"""Agreement with people of the plain and the guarded rewards, on the human-judged sets.

    python -m benchmarks.reward.reward_guard_correlation

These sets are test sets: the guard's design and bounds were declared in
benchmarks/experiments/reward_gaming.md, from the gaming strategies and the builders' training
split, before this ran; its rows are reported, never used to change the guard.

Each story goes to the reward as TRL would pass it: on ``union_roc`` and ``plot_amt_roc`` the
first sentence as the prompt and the rest as the completion; on ``union_wp``, whose prompts are
not marked off from the stories, the whole story as the completion with an empty prompt. Calls
hold 32 stories in the set's order (the guard's collapse term compares completions of different
prompts within a call, as in a GRPO batch). Per reward: Pearson, Spearman and Kendall with the
human scores, plain and guarded, and the share of stories whose guard factor is below 1.
Results: ``benchmarks/results/reward_guard_correlation.json``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import command_line, correlations, machine, results_name, write_results

# human set -> the reward configs measured on it (the rows BENCHMARKS.md has for that set)
ROWS = {
    "union_roc": (("union", "roc"), ("union", "roc-base")),
    "plot_amt_roc": (("plot_coherence", "roc"), ("plot_coherence", "roc-base"), ("union", "roc")),
    "union_wp": (("union", "wp"), ("union", "wp-base")),
}
CALL = 32


def prompts_and_completions(set_name: str, stories: list[str]) -> tuple[list[str], list[str]]:
    from storyeval import text as textlib

    if set_name == "union_wp":
        return [""] * len(stories), list(stories)
    prompts, completions = [], []
    for story in stories:
        sentences = textlib.split_sentences(story)
        prompts.append(sentences[0] if len(sentences) > 1 else "")
        completions.append(" ".join(sentences[1:]) if len(sentences) > 1 else story)
    return prompts, completions


def in_calls(reward, prompts: list[str], completions: list[str]) -> tuple[list[float], list[float]]:
    """The plain rewards and the guarded ones of a ``guard=True`` reward, in calls of ``CALL``: the guarded reward is the
    plain one (``reward.score``) times ``guard_factors`` of the same call (what calling it computes; tests/test_reward.py
    checks it), so each story is scored once, by one loaded checkpoint."""
    from storyeval.analysis.rewards import guard_factors

    plain, guarded = [], []
    for start in range(0, len(prompts), CALL):
        call_prompts, call_completions = prompts[start : start + CALL], completions[start : start + CALL]
        values = reward.score(call_prompts, call_completions)
        plain += values
        guarded += [v * f for v, f in zip(values, guard_factors(call_prompts, call_completions, reward.guard_corpus))]
    return plain, guarded


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=results_name, default="reward_guard_correlation")
    args = parser.parse_args(argv)

    import storyeval
    from benchmarks.correlation import load_human_set

    results = {}
    for set_name, configs in ROWS.items():
        human_set = load_human_set(set_name)
        prompts, completions = prompts_and_completions(set_name, human_set.stories)
        for metric, config in configs:
            started = time.perf_counter()
            plain, guarded = in_calls(storyeval.reward(metric, config, guard=True), prompts, completions)  # the config's guard corpus
            factors = np.divide(guarded, plain, out=np.ones(len(plain)), where=np.asarray(plain) > 0)
            results.setdefault(set_name, {})[f"{metric}:{config}"] = {
                "plain": correlations(plain, human_set.human), "guarded": correlations(guarded, human_set.human),
                "guarded_share": float(np.mean(factors < 1 - 1e-9)), "seconds": time.perf_counter() - started}
            row = results[set_name][f"{metric}:{config}"]
            print(f"{set_name} {metric}:{config}: Spearman plain {row['plain']['spearman']:.4f}, guarded "
                  f"{row['guarded']['spearman']:.4f}; {100 * row['guarded_share']:.1f}% of stories guarded", flush=True)
    path = write_results(args.output, {"command": command_line(__name__, argv), "machine": machine(), "call": CALL, "sets": results})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
