"""Continuation quality: Spearman on held-out ratings, Story Cloze accuracy, speed, feature ablation.

    python -m benchmarks.agreement.continuation_quality                       # the bundled checkpoint
    python -m benchmarks.agreement.continuation_quality --ablation            # also retrain variants (features, cloze negatives)
    python -m benchmarks.agreement.continuation_quality --checkpoint <head> --cross-validate 5   # the recipe on every rated pair

The held-out ratings are the DeltaScore pairs whose contexts fall in the test
side of the grouped split (split seed 42, whatever the training seed), which training never saw; Story Cloze is
never used for training. Both are test sets: reported once, never tuned on. Each held-out
Spearman comes with a 95% bootstrap confidence interval (pairs resampled, BCa; pairs that
share a context are not independent, so the interval is, if anything, too narrow).

``--cross-validate K`` is the larger evaluation: the checkpoint's recipe (the arguments in its
``training_results.json``, its statistics and its learned encoder, if any) is retrained on K folds
of all the rated pairs, grouped by context, and each fold is scored by the head that did not see
it, so every rated pair is held out once (about 200 pairs instead of 44). A recipe with a learned
encoder is also retrained without it, the ablation of the learned group. These figures judge the
recipe, not the shipped checkpoint, and, like the others, are reported once and never tuned on.

``pairs_per_second`` is the whole scoring path of the checkpoint; for a checkpoint with a
learned encoder (``learned_path`` true) that is the learned path, not the count-only one.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

from storyeval_training.paths import data_dir

from ..common import BUNDLED, command_line, machine, results_name, write_results


def check_heldout_split(folder: Path) -> None:
    """Refuse a checkpoint trained on another split: its "held-out" pairs would include training ones."""
    from storyeval_training.data import continuation_data

    results = folder / "training_results.json"
    if not results.is_file():
        raise SystemExit(f"{folder} has no training_results.json, so its split of the rated pairs is unknown")
    recorded = json.loads(results.read_text())
    if recorded.get("rated_split_given"):
        raise SystemExit(f"{folder} was trained on a cross-validation fold's split of the rated pairs, not the held-out one")
    args = recorded["args"]
    split_seed = args.get("split_seed", args["seed"])  # older runs split with --seed
    if split_seed != continuation_data.HELDOUT_SPLIT_SEED:
        raise SystemExit(f"{folder} was trained with split seed {split_seed}; the held-out pairs are the test side of "
                         f"split seed {continuation_data.HELDOUT_SPLIT_SEED}, so some of them were its training or validation pairs")


def evaluate_checkpoint(folder: Path, batch_size: int = 512) -> dict:
    import datasets
    import torch

    from storyeval.models.continuation.model import CRITERIA
    from storyeval.scoring.continuation import ContinuationScorer
    from storyeval_training.data import continuation_data

    check_heldout_split(folder)
    scorer = ContinuationScorer(folder, device="cpu", preprocess=False)  # the loaders already normalise
    root = data_dir() / "continuation"
    rated = datasets.concatenate_datasets([continuation_data.read_deltascore(root / f"deltascore_crowdsource_{c}.jsonl") for c in ("roc", "wp")])
    test = continuation_data.grouped_split(rated, seed=continuation_data.HELDOUT_SPLIT_SEED)["test"]
    predictions = scorer.score(test["context"], test["continuation"], batch_size=batch_size)
    spearman = {}
    for criterion in CRITERIA:
        result = stats.spearmanr(predictions[criterion], test[criterion])
        spearman[criterion] = {"rho": float(result.statistic), "p": float(result.pvalue),
                               "ci95": spearman_interval(predictions[criterion], test[criterion])}

    cloze = continuation_data.read_story_cloze(root / "story_cloze_test_spring2016.tsv")
    started = time.perf_counter()
    first = scorer.score(cloze["context"], cloze["ending_1"], batch_size=batch_size)
    second = scorer.score(cloze["context"], cloze["ending_2"], batch_size=batch_size)
    seconds = time.perf_counter() - started
    accuracy = {criterion: cloze_accuracy(first[criterion], second[criterion], cloze["right"]) for criterion in CRITERIA}
    encoder = scorer.extractor.encoder
    learned = {}
    if encoder is not None:  # the learned feature alone, after the timed run: how much of the head's accuracy it carries
        learned["encoder_logit_story_cloze_accuracy"] = cloze_accuracy(
            encoder.logits(cloze["context"], cloze["ending_1"]), encoder.logits(cloze["context"], cloze["ending_2"]), cloze["right"])
    return {
        **learned,
        "heldout_pairs": len(test),
        "heldout_contexts": len(set(test["context"])),
        "spearman": spearman,
        "story_cloze_items": len(cloze),
        "story_cloze_accuracy": accuracy,
        "pairs_per_second": 2 * len(cloze) / seconds,
        "learned_path": scorer.extractor.encoder is not None,
        "torch_threads": torch.get_num_threads(),
    }


BOOTSTRAP_RESAMPLES = 2000


def spearman_interval(predictions, ratings, seed: int = 0) -> list[float]:
    """95% BCa bootstrap interval of Spearman's rho over resampled (prediction, rating) pairs."""
    result = stats.bootstrap((np.asarray(predictions), np.asarray(ratings)), lambda x, y: stats.spearmanr(x, y).statistic,
                             paired=True, vectorized=False, n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=0.95,
                             random_state=np.random.default_rng(seed))
    return [float(result.confidence_interval.low), float(result.confidence_interval.high)]


def cloze_accuracy(first_scores, second_scores, right_endings) -> float:
    """Share of items whose higher-scored ending is the right one (``right_endings``: its index, 0 or 1); a tie counts half."""
    gap = np.array(second_scores) - np.array(first_scores)
    chose_right = (gap > 0) == (np.array(right_endings) == 1)
    return float(np.mean(np.where(gap == 0, 0.5, chose_right)))


def recipe_arguments(folder: Path, output_dir: str, statistics: Path, encoder: Path | None):
    """The training arguments the checkpoint in ``folder`` was trained with, for a new run into ``output_dir`` that
    reuses the statistics in ``statistics`` and reads ``encoder`` (None: the count-only twin)."""
    from storyeval_training.recipes import train_continuation

    recorded = json.loads((folder / "training_results.json").read_text())["args"]
    argv = ["--output-dir", output_dir, "--resources-dir", str(statistics), "--cloze-split", recorded.get("cloze_split", "train")]
    args = train_continuation.parse_args(argv + (["--encoder", str(encoder)] if encoder else []))
    kept = ("features", "input_mode", "epochs", "learning_rate", "batch_size", "cloze_pairs", "contradiction_share", "ranking_weight",
            "ranking_margin", "seed", "rated_pairs")
    vars(args).update({name: recorded[name] for name in kept if name in recorded})
    return args


def cross_validate(folder: Path, folds: int, with_encoder: bool, rated=None) -> dict:
    """Out-of-fold predictions of ``folder``'s recipe for every rated pair (``rated``: the DeltaScore pairs), and their
    Spearman per criterion."""
    import datasets
    from sklearn.model_selection import GroupKFold, GroupShuffleSplit

    from storyeval.models.continuation.model import CRITERIA
    from storyeval.scoring.continuation import ContinuationScorer
    from storyeval_training.data import continuation_data
    from storyeval_training.recipes import train_continuation

    if rated is None:
        root = data_dir() / "continuation"
        rated = datasets.concatenate_datasets([continuation_data.read_deltascore(root / f"deltascore_crowdsource_{c}.jsonl") for c in ("roc", "wp")])
    encoder = folder / "encoder" if with_encoder else None
    predictions = {criterion: [0.0] * len(rated) for criterion in CRITERIA}
    history = []
    with tempfile.TemporaryDirectory() as statistics:
        statistics = Path(statistics)
        for fold, (rest, held) in enumerate(GroupKFold(n_splits=folds).split(rated["context"], groups=rated["context"])):
            # the fold's validation contexts (a fifth) come out of its training side, as the held-out split's do
            side = rated.select(rest)
            fit, check = next(GroupShuffleSplit(n_splits=1, test_size=0.2, random_state=continuation_data.HELDOUT_SPLIT_SEED)
                              .split(side["context"], groups=side["context"]))
            splits = datasets.DatasetDict({"train": side.select(fit), "validation": side.select(check), "test": rated.select(held)})
            with tempfile.TemporaryDirectory() as run:
                args = recipe_arguments(folder, run, folder, encoder)
                if args.cloze_split == "train":  # cross-fitted cloze pairs need per-fold statistics: fitted on the first fold, then reused
                    args.resources_dir, args.save_statistics = (str(statistics), None) if fold else (None, str(statistics))
                trained = train_continuation.train(args, rated_splits=splits)
                scores = ContinuationScorer(run, device="cpu", preprocess=False).score(splits["test"]["context"], splits["test"]["continuation"])
            for criterion in CRITERIA:
                for index, score in zip(held, scores[criterion]):
                    predictions[criterion][index] = score
            history.append({"fold": fold, "train_pairs": len(splits["train"]), "validation_pairs": len(splits["validation"]),
                            "test_pairs": len(held), "best_validation": trained["best_validation"]})
    spearman = {}
    for criterion in CRITERIA:
        result = stats.spearmanr(predictions[criterion], rated[criterion])
        spearman[criterion] = {"rho": float(result.statistic), "p": float(result.pvalue),
                               "ci95": spearman_interval(predictions[criterion], rated[criterion])}
    return {"folds": folds, "pairs": len(rated), "contexts": len(set(rated["context"])), "spearman": spearman, "per_fold": history}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=str(BUNDLED / "continuation-quality"))
    parser.add_argument("--update-card", action="store_true", help="rewrite the checkpoint's model card with these figures")
    parser.add_argument("--output", type=results_name, default="continuation_quality", help="results file name under benchmarks/results/")
    parser.add_argument("--ablation", action="store_true",
                        help="retrain with all features, without each feature group, and with contradicting "
                             "cloze negatives (the first run fits the LM / PMI statistics, the others reuse them)")
    parser.add_argument("--cross-validate", type=int, default=0, metavar="K",
                        help="also retrain the checkpoint's recipe on K folds of all the rated pairs (with and without its learned "
                             "encoder) and report out-of-fold Spearman over every pair, in <output>_cross_validated")
    args = parser.parse_args(argv)
    if args.cross_validate == 1 or args.cross_validate < 0:
        parser.error("--cross-validate needs at least 2 folds (0: none)")
    checkpoint = Path(args.checkpoint)
    payload = {"machine": machine(), "command": command_line(__name__, argv),
               "checkpoint": str(checkpoint), "full": evaluate_checkpoint(checkpoint)}
    print("full:", json.dumps(payload["full"], indent=1))
    if args.ablation:
        from storyeval.models.continuation.features import FEATURE_GROUPS
        from storyeval_training.recipes import train_continuation

        ablation = {"machine": payload["machine"], "command": payload["command"], "checkpoint": str(checkpoint),
                    "variants": {"all (bundled checkpoint)": payload["full"]}}
        # every variant, the all-features baseline included, is retrained by this code, so
        # differences come from the features alone and not from code changed since the bundled run
        variants = {"all (retrained)": ["--features", *FEATURE_GROUPS]}
        variants.update({f"-{group}": ["--features", *[g for g in FEATURE_GROUPS if g != group]] for group in FEATURE_GROUPS})
        variants["no features (charagram only)"] = ["--features"]
        # a training-data choice, not a feature group: judged on validation, like every variant
        variants["all, contradiction share 0.5"] = ["--features", *FEATURE_GROUPS, "--contradiction-share", "0.5"]
        with tempfile.TemporaryDirectory() as statistics:
            for index, (name, extra) in enumerate(variants.items()):
                # the first variant fits the statistics (the cross-fitted folds' too), the others reuse them
                reuse = ["--save-statistics", statistics] if index == 0 else ["--resources-dir", statistics]
                with tempfile.TemporaryDirectory() as tmp:
                    trained = train_continuation.train(train_continuation.parse_args(["--output-dir", tmp, *reuse, *extra]))
                    ablation["variants"][name] = {"best_validation": trained["best_validation"], **evaluate_checkpoint(Path(tmp))}
                print(name, json.dumps(ablation["variants"][name]["spearman"]), json.dumps(ablation["variants"][name]["story_cloze_accuracy"]))
        # its own file, so rerunning the main figures keeps the ablation
        print("wrote", write_results("continuation_quality_ablation", ablation))
    if args.cross_validate:
        learned = (checkpoint / "encoder").is_dir()
        variants = {"recipe": cross_validate(checkpoint, args.cross_validate, with_encoder=learned)}
        if learned:  # the ablation of the learned group: the same recipe, statistics and cloze pairs without it
            variants["recipe without its encoder"] = cross_validate(checkpoint, args.cross_validate, with_encoder=False)
        for name, result in variants.items():
            print(name, json.dumps({c: round(v["rho"], 3) for c, v in result["spearman"].items()}))
        print("wrote", write_results(f"{args.output}_cross_validated", {"machine": payload["machine"], "command": payload["command"],
                                                                       "checkpoint": str(checkpoint), "variants": variants}))
        payload["cross_validated"] = {name: result["spearman"] for name, result in variants.items()}
    if args.update_card:
        from storyeval_training.export.model_card import write_continuation_card

        results = json.loads((checkpoint / "training_results.json").read_text())
        write_continuation_card(checkpoint, results, {**payload["full"], "command": payload["command"],
                                                      "cross_validated": payload.get("cross_validated")})
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
