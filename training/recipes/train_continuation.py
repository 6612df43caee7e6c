"""Train the continuation-quality scorer (Sagarkar et al., 2018).

    storyeval-train-continuation --output-dir hub_cards/continuation-quality
    storyeval-train-continuation --rated-pairs my_annotations.jsonl --output-dir out   # the paper's data shape

Steps: fit the 4-gram LM and the co-occurrence statistics on the ROC and WP
training stories; compute the features; train the charagram + feature network
with the multi-task MAE loss (Adam, lr 1e-3, 25 epochs), plus a margin ranking
loss on weak cloze pairs built from ROC stories (true last sentence above another
story's); keep the epoch with the best mean Spearman on the validation contexts.

The cloze pairs come from the same ROC stories as the statistics, so their features
are cross-fitted: the ROC stories are split into two folds, and a fold's pairs (true
and wrong endings both from that fold) are featurised with statistics fitted on the
other fold and the WP stories. Featurised with the full statistics, a true ending
would be one the LM had memorised after its own context, a signal no scored text has.

``--encoder`` adds the learned group: the logit of a continuation encoder trained by
``train_continuation_encoder`` (copied into the checkpoint's ``encoder/``). That encoder
was trained on the ROC training stories' true next sentences, so its cloze pairs must
come from stories it never saw: ``--cloze-split test`` (the ROC builder's test split,
which neither the encoder nor the statistics saw; featurised with the full statistics).
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import os
import random
import shutil
import time
from pathlib import Path

import datasets
import numpy as np
import torch
from accelerate.utils import set_seed
from scipy import stats
from tqdm.auto import tqdm

from storyeval import text as textlib
from storyeval.models.continuation.cooccurrence import CooccurrenceStats
from storyeval.models.continuation.encoder import ENCODER_FOLDER, ENCODER_KIND, ContinuationEncoder
from storyeval.models.continuation.features import FEATURE_GROUPS, FeatureExtractor, cooccurrence_words
from storyeval.models.continuation.model import CRITERIA, INPUT_MODES, ContinuationModel
from storyeval.models.continuation.ngram_lm import NgramLM
from storyeval_training import paths
from storyeval_training.data import continuation_data
from storyeval_training.data.builders import ROCStories, WritingPrompts, load_split
from storyeval_training.export.provenance import environment, published_record
from storyeval_training.loop import require_positive
from storyeval_training.selection import improves

logger = logging.getLogger("storyeval_training.recipes.train_continuation")

CLOZE_FOLDS = 2


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train the continuation-quality scorer.")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--rated-pairs", nargs="*", default=None, help="files in Sagarkar et al.'s shape (default: DeltaScore ratings)")
    p.add_argument("--features", nargs="*", default=list(FEATURE_GROUPS), choices=list(FEATURE_GROUPS), help="feature groups")
    p.add_argument("--input-mode", default="sim+cont", choices=list(INPUT_MODES),
                   help="charagram inputs beside the features (the paper's sim+cont or cont), or the features alone")
    p.add_argument("--epochs", type=int, default=25)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--cloze-pairs", type=int, default=20000, help="weak ROC cloze pairs (0 disables)")
    p.add_argument("--contradiction-share", type=float, default=0.0, help="share of cloze negatives that contradict "
                                                                          "the true ending (the bundled checkpoint: 0)")
    p.add_argument("--ranking-weight", type=float, default=1.0)
    p.add_argument("--ranking-margin", type=float, default=0.5)
    p.add_argument("--lm-order", type=int, default=None, help="order of the n-gram LM fitted on the corpus, 1..4 (default 4)")
    p.add_argument("--seed", type=int, default=42, help="initialisation, shuffling and cloze pairs; does not move the held-out split")
    p.add_argument("--split-seed", type=int, default=continuation_data.HELDOUT_SPLIT_SEED,
                   help="the grouped train/validation/test split of the rated pairs; change it only to build a different held-out set")
    p.add_argument("--resources-dir", default=None,
                   help="reuse lm.npz / cooccurrence.npz from here (and fold<k>/ for the cloze pairs), as --save-statistics writes them")
    p.add_argument("--save-statistics", default=None,
                   help="also write the fitted statistics here, the cross-fitted folds' in fold<k>/, for --resources-dir")
    p.add_argument("--encoder", default=None, help="a continuation encoder export (train_continuation_encoder): adds the 'encoder' feature group")
    p.add_argument("--cloze-split", choices=["train", "test"], default="train",
                   help="ROC builder split of the cloze pairs: train (cross-fitted statistics) or test (unseen by the statistics and the encoder)")
    p.add_argument("--cache-dir", default=None)
    args = p.parse_args(argv)
    if args.encoder and args.cloze_pairs and args.cloze_split != "test":
        p.error("--encoder was trained on the ROC training stories: its cloze pairs need --cloze-split test (or --cloze-pairs 0)")
    if args.encoder and not (Path(args.encoder) / "encoder_config.json").is_file():
        p.error(f"--encoder {args.encoder}: no encoder_config.json there (an export of train_continuation_encoder)")
    require_positive(p, args, ("epochs", "learning_rate", "batch_size"))
    if args.input_mode == "features" and not args.features and not args.encoder:
        p.error("--input-mode features reads the features alone: give some (--features) or a learned --encoder")
    if args.resources_dir and args.lm_order is not None:
        p.error("--lm-order sets the LM to fit; --resources-dir reuses an LM fitted already, whose order the run records")
    if args.lm_order is not None and not 1 <= args.lm_order <= 4:
        p.error(f"--lm-order must be 1..4, got {args.lm_order}")
    if args.cloze_pairs < 0 or not 0 <= args.contradiction_share <= 1:
        p.error("--cloze-pairs must not be negative and --contradiction-share must be in [0, 1]")
    # now, not after minutes of fitting
    for option, folder in (("--output-dir", args.output_dir), ("--save-statistics", args.save_statistics)):
        if folder and (problem := unwritable_folder(Path(folder))):
            p.error(f"{option} {folder}: {problem}")
    return args


def unwritable_folder(folder: Path) -> str | None:
    """Why ``folder`` could not be created or written into, or None; checked without creating anything."""
    existing = next(path for path in (folder, *folder.parents) if path.exists() or path == path.parent)
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def corpus_stories(cache_dir=None) -> tuple[list[list[str]], list[list[str]]]:
    """(ROC, WP) training stories as sentence lists (already tokenised by the builders)."""
    roc = load_split(ROCStories, "train", cache_dir=cache_dir)
    wp = load_split(WritingPrompts, "train", cache_dir=cache_dir)
    return list(roc["sentences"]), [[c] + s for c, s in zip(wp["context"], wp["sentences"])]


def load_statistics(folder: Path) -> tuple[NgramLM, CooccurrenceStats]:
    return NgramLM.load(folder / "lm.npz"), CooccurrenceStats.load(folder / "cooccurrence.npz")


def save_statistics(folder: Path, lm: NgramLM, cooccurrence: CooccurrenceStats) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lm.save(folder / "lm.npz")
    cooccurrence.save(folder / "cooccurrence.npz")


def story_fold(sentences: list[str]) -> int:
    """The cross-fitting fold of a ROC story, from its first four sentences: a cloze pair's context."""
    digest = hashlib.blake2b(" ".join(sentences[:4]).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % CLOZE_FOLDS


def fit_resources(stories: list[list[str]], order: int) -> tuple[NgramLM, CooccurrenceStats]:
    started = time.perf_counter()
    # whole stories, not sentences: a continuation is scored after its context's last words, so the LM
    # must have seen a sentence's first word follow another sentence's full stop
    lm = NgramLM(order=order).fit([word for sentence in story for word in sentence.split()] for story in stories)
    logger.info("fitted a %d-gram LM on %d stories in %.0f s", order, len(stories), time.perf_counter() - started)
    documents = [cooccurrence_words([w for s in story for w in s.split()]) for story in stories]
    cooccurrence = CooccurrenceStats().fit(documents)
    logger.info("fitted co-occurrence statistics (%d words) in %.0f s", len(cooccurrence.vocab), time.perf_counter() - started)
    return lm, cooccurrence


def feature_scaling(reference: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-feature mean and std of ``reference`` rows for the model's standardisation.

    NaN-aware: a missing feature (NaN) is left out of its column's statistics, and a column with
    no value gets mean 0. Population std, so a single row gives 0 (clamped), not NaN.
    """
    present = ~torch.isnan(reference)
    counts = present.sum(0).clamp_min(1)
    mean = torch.where(present, reference, torch.zeros(())).sum(0) / counts
    centred = torch.where(present, reference - mean, torch.zeros(()))
    return mean, ((centred**2).sum(0) / counts).sqrt().clamp_min(1e-6)


def featurize(extractor, contexts, continuations) -> torch.Tensor:
    return torch.from_numpy(extractor([c.split() for c in contexts], [n.split() for n in continuations]))


def mean_spearman(model, split, features) -> tuple[float, dict]:
    model.eval()
    with torch.no_grad():
        predictions = model(split["context"], split["continuation"], features).numpy()
    model.train()
    per = {c: float(stats.spearmanr(predictions[:, i], split[c]).statistic) for i, c in enumerate(CRITERIA)}
    per = {c: (v if np.isfinite(v) else 0.0) for c, v in per.items()}
    return float(np.mean(list(per.values()))), per


class MemoisedEncoder:
    """A :class:`ContinuationEncoder` that keeps each (context, candidate)'s logit: cross-validation trains a head
    per fold on the same cloze pairs, and a base-size encoder takes minutes to score them."""

    def __init__(self, folder: str):
        self.encoder = ContinuationEncoder(folder)
        self.logit_of: dict[tuple[str, str], float] = {}

    def logits(self, contexts: list[str], candidates: list[str]) -> list[float]:
        pairs = list(zip(contexts, candidates))
        missing = [pair for pair in dict.fromkeys(pairs) if pair not in self.logit_of]
        if missing:
            self.logit_of.update(zip(missing, self.encoder.logits([c for c, _ in missing], [n for _, n in missing])))
        return [self.logit_of[pair] for pair in pairs]


@functools.lru_cache(maxsize=2)
def load_encoder(folder: str) -> MemoisedEncoder:
    return MemoisedEncoder(folder)


def train(args, rated_splits: datasets.DatasetDict | None = None) -> dict:
    """Fit the statistics (or reuse them), featurise, train, and keep the epoch with the best validation Spearman.

    ``rated_splits`` (train / validation / test) replace the grouped split of the rated pairs: cross-validation
    gives each fold's. The rated pairs still keep every context they hold out of the statistics and cloze pairs.
    """
    set_seed(args.seed)
    output = Path(args.output_dir)
    started = time.perf_counter()
    run_environment = environment()  # taken at the start: the code the run ran, not what the checkout holds when it ends

    if args.rated_pairs:
        rated = datasets.concatenate_datasets([continuation_data.read_rated_pairs(p) for p in args.rated_pairs])
    else:
        root = paths.data_dir() / "continuation"
        rated = datasets.concatenate_datasets([continuation_data.read_deltascore(root / f"deltascore_crowdsource_{c}.jsonl") for c in ("roc", "wp")])
    splits = rated_splits if rated_splits is not None else continuation_data.grouped_split(rated, seed=args.split_seed)
    if not len(splits["train"]):
        raise ValueError(f"the grouped split left no rated pairs to train on ({len(rated)} pairs in all): give more contexts")

    # keep every evaluation context out of the corpus statistics and the cloze pairs
    exclude = {textlib.leakage_key(c) for c in rated["context"]}
    cloze_path = paths.data_dir() / "continuation" / "story_cloze_test_spring2016.tsv"
    if cloze_path.is_file():
        exclude |= {textlib.leakage_key(c) for c in continuation_data.read_story_cloze(cloze_path)["context"]}
    corpus_size = None  # statistics loaded from --resources-dir carry no count
    if args.resources_dir:
        reused = Path(args.resources_dir)
        missing = [str(reused / f"fold{fold}") for fold in range(CLOZE_FOLDS)
                   if args.cloze_pairs and args.cloze_split == "train" and not (reused / f"fold{fold}").is_dir()]
        if missing:
            raise FileNotFoundError(f"{missing}: no statistics for the cross-fitted cloze pairs; write them with "
                                    "--save-statistics, or pass --cloze-pairs 0")
        lm, cooccurrence = load_statistics(reused)
        args.lm_order = lm.order  # recorded, and named in the model card

        def out_of_fold_statistics(fold: int):
            return load_statistics(reused / f"fold{fold}")
    else:
        roc_stories, wp_stories = ([s for s in corpus if textlib.leakage_key(s[0]) not in exclude] for corpus in corpus_stories(args.cache_dir))
        args.lm_order = args.lm_order or 4
        lm, cooccurrence = fit_resources(roc_stories + wp_stories, args.lm_order)
        corpus_size = len(roc_stories) + len(wp_stories)

        def out_of_fold_statistics(fold: int):
            return fit_resources([s for s in roc_stories if story_fold(s) != fold] + wp_stories, args.lm_order)
    if args.save_statistics:
        save_statistics(Path(args.save_statistics), lm, cooccurrence)

    encoder = load_encoder(str(Path(args.encoder).resolve())) if args.encoder else None
    groups = tuple(args.features) + (("encoder",) if encoder else ())

    def extractor_for(lm, cooccurrence) -> FeatureExtractor:
        return FeatureExtractor(lm=lm if "lm" in args.features else None,
                                cooccurrence=cooccurrence if "pmi" in args.features else None,
                                groups=groups, encoder=encoder)

    extractor = extractor_for(lm, cooccurrence)

    features = {name: featurize(extractor, split["context"], split["continuation"]) for name, split in splits.items()}
    targets = torch.tensor(np.stack([splits["train"][c] for c in CRITERIA], axis=1), dtype=torch.float32)

    cloze = None
    if args.cloze_pairs and args.cloze_split == "test":
        from storyeval_training.data.negatives.substitution import KeywordLexicon

        # stories neither the statistics nor the encoder saw: the full statistics featurise them
        unseen = load_split(ROCStories, "test", cache_dir=args.cache_dir)
        cloze = continuation_data.cloze_pairs(unseen, seed=args.seed, exclude_keys=frozenset(exclude),
                                              lexicon=KeywordLexicon.from_data_dir(paths.data_dir()),
                                              contradiction_share=args.contradiction_share)
        cloze = cloze.select(range(min(args.cloze_pairs, len(cloze))))
        cloze_right = featurize(extractor, cloze["context"], cloze["right"])
        cloze_wrong = featurize(extractor, cloze["context"], cloze["wrong"])
    elif args.cloze_pairs:
        roc = load_split(ROCStories, "train", cache_dir=args.cache_dir)
        from storyeval_training.data.negatives.substitution import KeywordLexicon

        lexicon = KeywordLexicon.from_data_dir(paths.data_dir())
        folds, rights, wrongs = [], [], []
        for fold in range(CLOZE_FOLDS):
            # this fold's pairs, featurised with statistics that never saw its stories (module docstring)
            held_out = roc.filter(lambda row: story_fold(row["sentences"]) == fold, desc=f"cloze fold {fold}")
            pairs = continuation_data.cloze_pairs(held_out, seed=args.seed, exclude_keys=frozenset(exclude), lexicon=lexicon,
                                                  contradiction_share=args.contradiction_share)
            pairs = pairs.select(range(min(-(-args.cloze_pairs // CLOZE_FOLDS), len(pairs))))
            fold_statistics = out_of_fold_statistics(fold)
            if args.save_statistics:
                save_statistics(Path(args.save_statistics) / f"fold{fold}", *fold_statistics)
            out_of_fold = extractor_for(*fold_statistics)
            folds.append(pairs)
            rights.append(featurize(out_of_fold, pairs["context"], pairs["right"]))
            wrongs.append(featurize(out_of_fold, pairs["context"], pairs["wrong"]))
        cloze = datasets.concatenate_datasets(folds)
        cloze_right, cloze_wrong = torch.cat(rights), torch.cat(wrongs)

    model = ContinuationModel(num_features=len(extractor.names), input_mode=args.input_mode)
    reference = torch.cat([features["train"]] + ([cloze_right, cloze_wrong] if cloze is not None else []))
    if reference.shape[1]:
        mean, std = feature_scaling(reference)
        model.feature_mean.copy_(mean)
        model.feature_std.copy_(std)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)

    # plain lists: row access on an Arrow table inside the loop is slow
    train = splits["train"].to_dict()
    if cloze is not None:
        cloze = cloze.to_dict()
    rng = random.Random(args.seed)
    rated_index = list(range(len(splits["train"])))
    cloze_index = list(range(len(cloze["context"]))) if cloze is not None else []
    steps = max(len(rated_index), len(cloze_index) // 4) // args.batch_size + 1
    best, history = None, []
    output.mkdir(parents=True, exist_ok=True)  # only now, so that bad inputs leave nothing behind
    # a plain loop, not storyeval_training.loop: a network this small trains on one CPU, where accelerate adds nothing
    for epoch in tqdm(range(args.epochs), desc="epochs"):
        rng.shuffle(rated_index)
        rng.shuffle(cloze_index)
        for step in range(steps):
            batch = [rated_index[(step * args.batch_size + k) % len(rated_index)] for k in range(args.batch_size)]
            predictions = model([train["context"][i] for i in batch], [train["continuation"][i] for i in batch], features["train"][batch])
            loss = (predictions - targets[batch]).abs().mean(0).sum()  # sum over criteria of the MAE
            if cloze is not None and args.ranking_weight > 0:
                picks = [cloze_index[(step * args.batch_size + k) % len(cloze_index)] for k in range(args.batch_size)]
                contexts = [cloze["context"][i] for i in picks]
                right = model(contexts, [cloze["right"][i] for i in picks], cloze_right[picks])
                wrong = model(contexts, [cloze["wrong"][i] for i in picks], cloze_wrong[picks])
                # the true ending should score higher on overall quality and relevance
                margin = torch.relu(args.ranking_margin - (right[:, :2] - wrong[:, :2]))
                loss = loss + args.ranking_weight * margin.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        score, per = mean_spearman(model, splits["validation"], features["validation"])
        history.append({"epoch": epoch + 1, "validation_mean_spearman": score, **{f"validation_{k}": v for k, v in per.items()}})
        if improves(history[-1], best, "validation_mean_spearman"):
            best = history[-1]
            model.save(output)
    results = {
        "best_validation": best,
        "history": history,
        "features": extractor.names,
        "feature_version": extractor.version,
        "train_pairs": len(splits["train"]),
        "validation_pairs": len(splits["validation"]),
        "test_pairs": len(splits["test"]),
        "rated_split_given": rated_splits is not None,  # a cross-validation fold's, not the grouped split of --split-seed
        "cloze_pairs": len(cloze_index),
        "cloze_cross_fitted_folds": CLOZE_FOLDS if cloze is not None and args.cloze_split == "train" else None,
        "corpus_stories": corpus_size,
        "training_minutes": round((time.perf_counter() - started) / 60, 1),
        "args": vars(args),
        "environment": run_environment,
    }
    lm.save(output / "lm.npz")
    cooccurrence.save(output / "cooccurrence.npz")
    scorer_config = {"feature_groups": list(groups), "feature_version": extractor.version, "criteria": list(CRITERIA)}
    if encoder is not None:
        scorer_config["learned_encoder"] = ENCODER_KIND
        shutil.copytree(args.encoder, output / ENCODER_FOLDER, dirs_exist_ok=True)
    (output / "scorer_config.json").write_text(json.dumps(scorer_config, indent=2) + "\n")
    (output / "training_results.json").write_text(json.dumps(published_record(results), indent=2) + "\n")
    return results


@paths.one_line_errors
def main(argv=None) -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    train(parse_args(argv))


if __name__ == "__main__":
    main()
