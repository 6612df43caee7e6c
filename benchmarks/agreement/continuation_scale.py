"""Where continuation quality's scores leave the 1-5 scale of its training ratings, and why.

    python -m benchmarks.agreement.continuation_scale

The checkpoint is a regression (a ReLU layer, then three linear outputs) trained on ratings from 1 to 5, with no
bound on what it outputs: a pair unlike its training pairs can score far outside that range. This measures how far,
on text a user brings, never on people's judgments:

* the checkpoint's own reference scores (``reference_scores.json``): ROC and WP test stories' continuations given
  their opening, as the ``story_quality`` suite's percentiles read them;
* GPT-3.5 and GPT-4 stories for a WritingPrompts prompt (``wp_extra/machine.jsonl``, the prompt as the context), and
  human stories for a prompt (``wp_extra/human.jsonl``, a seeded sample);
* the same GPT stories cut to their first N words (``--cut-words``: 20 to 200, from the rated pairs' lengths to the
  WP builder's cut), to see what length alone does;

and for each: the range, the share above 5 and below 1, the Spearman correlation of ``overall`` with the
continuation's length in words, and the features furthest from the training pairs: each feature's median distance
from the training mean in training standard deviations (the standardisation the checkpoint applies before its
network), the largest first. Also recorded: the training continuations' length as the checkpoint standardises it
(over the rated pairs and the cloze signal's single sentences), and the rated pairs' lengths (the DeltaScore
continuations; their lengths only, no rating is read).
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from ..common import checkpoint_spec, command_line, machine, write_results

GPT = ("gpt-3.5-turbo", "gpt-4")
BOUNDS = (1.0, 5.0)  # the training ratings' scale


def summary(scores: dict[str, list[float]], words: list[int] | None = None) -> dict:
    """Per criterion: range, percentiles, the shares outside 1-5; and overall's Spearman with length in words."""
    import numpy as np
    from scipy.stats import spearmanr

    result = {}
    for criterion, values in scores.items():
        values = np.asarray(values, dtype=float)
        low, p5, median, p95, high = np.percentile(values, [0, 5, 50, 95, 100])
        result[criterion] = {"min": round(low, 2), "p5": round(p5, 2), "median": round(median, 2), "p95": round(p95, 2),
                             "max": round(high, 2), "above_5": round(float((values > BOUNDS[1]).mean()), 3),
                             "below_1": round(float((values < BOUNDS[0]).mean()), 3)}
    if words is not None:
        result["words"] = {"median": int(np.median(words)), "max": int(max(words))}
        result["overall_spearman_with_words"] = round(float(spearmanr(scores["overall"], words).statistic), 3)
    return result


def furthest_features(scorer, contexts: list[str], stories: list[str], shown: int = 4) -> dict[str, float]:
    """The ``shown`` features whose median standardised value is furthest from 0 (the training mean), with it."""
    import numpy as np

    from storyeval.text import normalize_story

    features = scorer.extractor([normalize_story(c).split() for c in contexts], [normalize_story(s).split() for s in stories])
    mean, std = scorer.model.feature_mean.numpy(), scorer.model.feature_std.numpy()
    medians = np.nanmedian((features - mean) / std, axis=0)
    order = np.argsort(-np.abs(medians))[:shown]
    return {scorer.extractor.names[i]: round(float(medians[i]), 1) for i in order}


def rows(path: Path, keep) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [row for row in map(json.loads, handle) if keep(row)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=checkpoint_spec, default=("continuation-quality", "hub_cards/continuation-quality"),
                        help="label=folder (default: the bundled continuation-quality, config deltascore)")
    parser.add_argument("--human-sample", type=int, default=1000, help="human stories with a prompt drawn from wp_extra")
    parser.add_argument("--gpt-sample", type=int, default=None, help="GPT stories drawn (default: all 987)")
    parser.add_argument("--cut-words", type=int, nargs="+", default=[20, 50, 100, 200],
                        help="the GPT stories cut to their first N words, for each N")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--output", default="continuation_quality_scale")
    args = parser.parse_args(argv)
    if min(args.human_sample, args.gpt_sample or 1, args.batch_size, *args.cut_words) < 1:
        parser.error("--human-sample, --gpt-sample, --batch-size and --cut-words must be positive")

    from storyeval.scoring.sequence import load_scorer
    from storyeval_training import paths
    from storyeval_training.data.builders.wp_extra import HUMAN_FILE, MACHINE_FILE, default_extra_dir

    label, folder = args.checkpoint
    scorer = load_scorer("continuation_quality", folder, device="cpu")
    names = scorer.extractor.names
    mean, std = (scorer.model.feature_mean.tolist(), scorer.model.feature_std.tolist())
    length = names.index("length")
    payload = {"machine": machine(), "command": command_line(__name__, argv), "checkpoint": {label: folder},
               "settings": scorer.settings(), "bounds": list(BOUNDS),
               "training_length_words": {"mean": round(mean[length], 2), "std": round(std[length], 2)}, "sets": {}}
    print(f"training pairs' continuation length: {mean[length]:.1f} +- {std[length]:.1f} words (the standardisation)")

    def record(name: str, result: dict) -> None:
        payload["sets"][name] = result
        overall = result["overall"]
        extra = f", Spearman with words {result['overall_spearman_with_words']}" if "words" in result else ""
        print(f"{name:>34}: overall {overall['min']}-{overall['max']} (median {overall['median']}), "
              f"{overall['above_5']:.1%} above 5{extra}; {result.get('furthest_features_median_z', '')}")

    references = json.loads((Path(folder) / "reference_scores.json").read_text())["references"]
    for corpus, reference in references.items():
        record(f"reference_{corpus}_test", {"items": reference["items"], "scored": reference["scored"], **summary(reference["scores"])})

    # the rated pairs' continuations (the DeltaScore crowd ratings, of which the checkpoint trained on a split): their
    # lengths only, no rating is read
    rated = [len(row["story"].split()) for corpus in ("roc", "wp")
             for row in rows(paths.data_dir() / "continuation" / f"deltascore_crowdsource_{corpus}.jsonl", lambda row: True)]
    payload["rated_pairs_words"] = {"min": min(rated), "median": sorted(rated)[len(rated) // 2], "max": max(rated), "pairs": len(rated)}
    print(f"rated pairs' continuations: {min(rated)}-{max(rated)} words")
    extra = default_extra_dir()
    gpt = rows(extra / MACHINE_FILE, lambda row: row["generator"] in GPT and row["prompt"].strip())
    humans = rows(extra / HUMAN_FILE, lambda row: row["prompt"].strip())
    humans = random.Random(args.seed).sample(humans, min(args.human_sample, len(humans)))
    if args.gpt_sample:
        gpt = random.Random(args.seed).sample(gpt, min(args.gpt_sample, len(gpt)))

    def scored(name: str, pairs: list[tuple[str, str]], by_length: bool = True) -> None:
        contexts, stories = zip(*pairs)
        words = [len(story.split()) for story in stories]
        result = summary(scorer.score(list(contexts), list(stories), batch_size=args.batch_size), words if by_length else None)
        result["furthest_features_median_z"] = furthest_features(scorer, list(contexts), list(stories))
        record(name, {"items": len(pairs), **result})

    scored("gpt_3.5_and_4_wp_prompted", [(row["prompt"], row["story"]) for row in gpt])
    scored("human_wp_prompted_sample", [(row["prompt"], row["story"]) for row in humans])
    for words in args.cut_words:  # nearly every story is longer than the cut: no length left to correlate with
        scored(f"gpt_3.5_and_4_first_{words}_words", [(row["prompt"], " ".join(row["story"].split()[:words])) for row in gpt],
               by_length=False)
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
