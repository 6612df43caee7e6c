"""Do WP checkpoints prefer the story readers upvoted? StoryER's rank pairs of human WP stories (``wp_extra``).

    python -m benchmarks.agreement.wp_rank_pairs --checkpoint union-wp-base=hub_cards/union-wp-base --splits validation test

``rank_pairs.jsonl`` pairs two human stories written for the same WP prompt, the one with more reddit upvotes
first (its README: upvotes are a preference signal, not a rating of quality, and a prompt's pairs cross its
high- and low-upvote sets, so they are not independent). Each story is scored as the WP builder's ``extra``
config gives it (preprocessed and cut at 200 words, as the WP checkpoints trained). Pair accuracy is the share
where the upvoted story scores higher (a tie counts half), with a 95% bootstrap interval over prompts, the unit
that is independent. The WP checkpoints train on the builder's train split, which holds most of these stories
as positives, so ``--splits`` keeps the pairs whose two stories lie in the named splits (default: validation
and test, which no checkpoint trains on). A length-only rule ("the longer story is upvoted") on the same pairs
says how much length alone explains.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from ..common import add_checkpoint_options, checked_checkpoints, command_line, machine, results_name, write_results
from .wp_extra_pairs import outcome

RANK_FILE = "rank_pairs.jsonl"


def read_rank_pairs(path) -> list[dict]:
    """The pairs, each with its prompt and the two ids; a row without them is an error naming its line."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no rank pairs at {path} (wp_extra's {RANK_FILE}; STORYEVAL_DATA names the data folder)")
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{lineno}: not a JSON line ({error.msg})") from None
            if not isinstance(row, dict) or not all(isinstance(row.get(key), str) and row[key] for key in ("better_id", "worse_id")):
                raise ValueError(f"{path}:{lineno}: a rank pair needs better_id and worse_id")
            pairs.append({"prompt": row.get("prompt", ""), "better": row["better_id"], "worse": row["worse_id"]})
    return pairs


def pair_accuracy(pairs: list[dict], scores: dict[str, float], seed: int = 0) -> dict:
    """Accuracy over pairs, its mean per prompt, and a 95% bootstrap interval of that mean over prompts."""
    import numpy as np
    from scipy import stats

    by_prompt: dict[str, list[float]] = defaultdict(list)
    for pair in pairs:
        by_prompt[pair["prompt"]].append(outcome(scores[pair["better"]], scores[pair["worse"]]))
    values = [v for group in by_prompt.values() for v in group]
    per_prompt = np.array([sum(group) / len(group) for group in by_prompt.values()])
    result = {"accuracy": round(sum(values) / len(values), 4), "pairs": len(values), "prompts": len(per_prompt),
              "mean_over_prompts": round(float(per_prompt.mean()), 4)}
    if len(per_prompt) > 1:
        interval = stats.bootstrap((per_prompt,), np.mean, confidence_level=0.95, rng=np.random.default_rng(seed)).confidence_interval
        result["mean_over_prompts_95ci"] = [round(float(interval.low), 4), round(float(interval.high), 4)]
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", nargs="+", default=["validation", "test"], choices=["train", "validation", "test"],
                        help="keep the pairs whose two stories are both in these WP builder splits")
    add_checkpoint_options(parser, batch_size=16)
    parser.add_argument("--cache-dir", default=None, help="`datasets` cache for the WP builder")
    parser.add_argument("--output", type=results_name, default="wp_rank_pairs")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args)

    from storyeval.scoring.sequence import load_story_classifier
    from storyeval_training.data.builders import WritingPrompts, load_split
    from storyeval_training.data.builders.wp_extra import default_extra_dir

    stories, split_of = {}, {}
    for split in ("train", "validation", "test"):
        rows = load_split(WritingPrompts, split, cache_dir=args.cache_dir, config_name="extra")
        for story_id, story in zip(rows["id"], rows["story"]):
            stories[story_id], split_of[story_id] = story, split
    every_pair = read_rank_pairs(default_extra_dir() / RANK_FILE)
    missing = {i for p in every_pair for i in (p["better"], p["worse"]) if i not in stories}
    pairs = [p for p in every_pair if p["better"] in stories and p["worse"] in stories
             and split_of[p["better"]] in args.splits and split_of[p["worse"]] in args.splits]
    if not pairs:
        parser.error(f"no rank pair has both stories in the splits {args.splits}")
    ids = sorted({i for p in pairs for i in (p["better"], p["worse"])})
    payload = {"machine": machine(), "command": command_line(__name__, argv), "splits": args.splits, "pairs": len(pairs),
               "stories": len(ids), "pairs_in_file": len(every_pair), "stories_not_in_the_builder": len(missing),
               "length_only": pair_accuracy(pairs, {i: float(len(stories[i].split())) for i in ids}), "checkpoints": {}}
    print(f"{len(pairs)} pairs of {len(every_pair)} ({len(ids)} stories) in {args.splits}; length only: {payload['length_only']}")
    for label, folder in checkpoints.items():
        scorer = load_story_classifier(folder, device="cpu")
        scores = dict(zip(ids, scorer.score([stories[i] for i in ids], batch_size=args.batch_size)))
        payload["checkpoints"][label] = {"path": folder, "settings": scorer.settings(), **pair_accuracy(pairs, scores)}
        print(label, json.dumps(payload["checkpoints"][label]))
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
