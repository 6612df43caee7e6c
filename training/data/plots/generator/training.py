"""Fine-tuning the plot -> story generator on :mod:`storyeval_training.loop`."""
from __future__ import annotations

import argparse
import logging
import math
import warnings
from pathlib import Path

import datasets
import torch
from transformers import DataCollatorForSeq2Seq

from storyeval.checkpoints.resolution import OFFLINE_BACKBONE
from storyeval_training.data.builders import BUILDERS, load_split
from storyeval_training.data.plots.generator.model import (
    MAX_NEW_TOKENS,
    MAX_SOURCE_LENGTH,
    TEMPERATURE,
    TOP_K,
    build_generator,
    clamp,
    decoder_length_limit,
    encoder_length_limit,
    plot_to_text,
    save_generator,
    source_token_lengths,
)
from storyeval_training.loop import LoopArguments, TrainingLoop, add_loop_arguments, check_loop_arguments

logger = logging.getLogger(__name__)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Fine-tune a plot -> story generator.")
    p.add_argument("--dataset", choices=sorted(MAX_NEW_TOKENS), default="roc", help="builder to train on; sets the length defaults")
    p.add_argument("--plots-dir", help="instead of the builder: a save_to_disk dataset with `plot` and "
                                       "`story` (a DatasetDict with train/validation, or one Dataset to split)")
    p.add_argument("--model-name-or-path", default=OFFLINE_BACKBONE, help="a seq2seq checkpoint, or an encoder to warm-start both sides from")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--max-source-length", type=int, default=None, help="plot tokens (default: 128 ROC, 512 WP)")
    p.add_argument("--max-target-length", type=int, default=None, help="story tokens (default: 200 ROC, 1024 WP; capped by the decoder)")
    add_loop_arguments(p, per_device_train_batch_size=8, per_device_eval_batch_size=16)
    p.add_argument("--max-train-examples", type=int, default=None, help="e.g. a few thousand plots on CPU")
    p.add_argument("--max-eval-examples", type=int, default=200)
    p.add_argument("--extra-train-plots-dir", help="another save_to_disk dataset with `plot` and `story` (e.g. ROC's under WP), "
                                                   "added to training only: more text for the decoder; validation stays the main data's")
    p.add_argument("--max-extra-train-examples", type=int, default=None, help="a random subset of --extra-train-plots-dir")
    p.add_argument("--cache-dir", default=None, help="`datasets` cache")
    p.add_argument("--data-dir", default=None, help="data root (default: $STORYEVAL_DATA or ../shared/data)")
    args = p.parse_args(argv)
    check_loop_arguments(p, args, positive=("max_source_length", "max_target_length", "max_train_examples", "max_extra_train_examples"))
    if args.max_extra_train_examples and not args.extra_train_plots_dir:
        p.error("--max-extra-train-examples needs --extra-train-plots-dir")
    if args.max_eval_examples is not None and args.max_eval_examples < 0:
        p.error("--max-eval-examples must not be negative (0: all)")
    args.max_source_length = args.max_source_length or MAX_SOURCE_LENGTH[args.dataset]
    args.max_target_length = args.max_target_length or MAX_NEW_TOKENS[args.dataset]
    return args


def load_story_plots(args) -> datasets.DatasetDict:
    """train / validation splits with `id`, `plot`, `story` (and `manipulated_plot` where known)."""
    if args.plots_dir:
        loaded = datasets.load_from_disk(args.plots_dir)
        if isinstance(loaded, datasets.Dataset):
            split = loaded.train_test_split(test_size=max(1, len(loaded) // 20), seed=args.seed)
            loaded = datasets.DatasetDict({"train": split["train"], "validation": split["test"]})
    else:
        config = {"data_dir": str(Path(args.data_dir) / args.dataset)} if args.data_dir else {}  # a root, as in the other commands
        if args.dataset == "wp":
            # the plot covers the whole story: truncating the target would teach the model to drop plot parts.
            # The decoder's window (512 for MiniLM) can still cut long stories: train() warns with the count.
            config["max_words"] = 0
        builder = BUILDERS[args.dataset]
        loaded = datasets.DatasetDict({s: load_split(builder, s, cache_dir=args.cache_dir, **config) for s in ("train", "validation")})
    return loaded.filter(lambda ex: any(ex["plot"]), desc="dropping stories without a plot")


def select_train_examples(train: datasets.Dataset, limit: int | None, seed: int) -> datasets.Dataset:
    """A random subset, preferring stories without a manipulated plot.

    Those (ROC's lm_dev stories, the ones the paper tuned its generator on)
    never become negatives, so the generator does not later regenerate
    stories it has memorised.
    """
    train = train.shuffle(seed=seed)
    if "manipulated_plot" in train.column_names:
        has_manipulated = [bool(any(p)) for p in train["manipulated_plot"]]
        train = train.select(sorted(range(len(train)), key=lambda i: has_manipulated[i]))
    return train.select(range(min(limit, len(train)))) if limit else train


def add_extra_train_examples(train: datasets.Dataset, folder: str, limit: int | None, seed: int) -> datasets.Dataset:
    """``train`` and a random subset of another corpus's (id, plot, story) rows, shuffled together."""
    extra = datasets.load_from_disk(folder)
    if not isinstance(extra, datasets.Dataset):
        raise ValueError(f"--extra-train-plots-dir {folder}: expected one Dataset, found splits {sorted(extra)}")
    missing = {"id", "plot", "story"} - set(extra.column_names)
    if missing:
        raise ValueError(f"--extra-train-plots-dir {folder}: no column(s) {sorted(missing)}")
    extra = extra.filter(lambda ex: any(ex["plot"]), desc="dropping extra stories without a plot").shuffle(seed=seed)
    if limit:
        extra = extra.select(range(min(limit, len(extra))))
    train = train.select_columns(["id", "plot", "story"])
    combined = datasets.concatenate_datasets([train, extra.select_columns(train.column_names).cast(train.features)])
    return combined.shuffle(seed=seed)


def to_features(batch: dict, tokenizer, max_source_length: int, max_target_length: int, drop_first_target_token: bool) -> dict:
    """Tokenised plots and stories, cut to the limits; ``*_truncated`` flag the cut ones so train() can count them."""
    sources = [plot_to_text(p) for p in batch["plot"]]
    features = tokenizer(sources, max_length=max_source_length, truncation=True)
    features.pop("token_type_ids", None)
    target_length = max_target_length + drop_first_target_token
    targets = tokenizer(text_target=batch["story"], max_length=target_length, truncation=True)["input_ids"]
    # the model prepends the start token itself when it shifts the labels
    features["labels"] = [t[1:] for t in targets] if drop_first_target_token else targets
    features["source_truncated"] = [n > max_source_length for n in source_token_lengths(tokenizer, sources)]
    full_targets = tokenizer(text_target=batch["story"], verbose=False)["input_ids"]
    features["target_truncated"] = [len(ids) > target_length for ids in full_targets]
    return features


def count_truncated(features: datasets.DatasetDict, max_source_length: int, max_target_length: int) -> tuple[datasets.DatasetDict, dict]:
    """Drop the ``*_truncated`` flags, warning with their counts: a cut story teaches the model to drop plot parts."""
    counts = {}
    for name, split in features.items():
        counts[name] = {"sources": sum(split["source_truncated"]), "targets": sum(split["target_truncated"]), "examples": len(split)}
        if counts[name]["sources"] or counts[name]["targets"]:
            logger.warning(
                "%s: %d of %d plots cut at --max-source-length %d and %d stories cut at --max-target-length %d",
                name, counts[name]["sources"], len(split), max_source_length, counts[name]["targets"], max_target_length,
            )
    return features.remove_columns(["source_truncated", "target_truncated"]), counts


@torch.inference_mode()
def evaluate_loss(model, dataloader, accelerator) -> dict:
    """Token-level cross-entropy and perplexity on the validation stories."""
    model.eval()
    total_loss = total_tokens = 0.0
    for batch in dataloader:
        labels = batch["labels"]
        logits = model(**batch).logits
        # per story, so that gather_for_metrics can drop the stories a process repeats to fill its last batch
        token_losses = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="none")
        losses, counts = accelerator.gather_for_metrics((token_losses.view(labels.shape).sum(1), (labels != -100).sum(1)))
        total_loss += losses.sum().item()
        total_tokens += counts.sum().item()
    model.train()
    loss = total_loss / max(total_tokens, 1)
    return {"loss": loss, "perplexity": math.exp(min(loss, 50))}


def main(argv=None) -> None:
    train(parse_args(argv))


def train(args) -> dict:
    """Run fine-tuning; returns what it writes to all_results.json."""
    loop = TrainingLoop(LoopArguments.from_namespace(args))
    accelerator = loop.accelerator
    # EncoderDecoderModel warns on every forward with labels that the loss moved there in v4.12
    warnings.filterwarnings("ignore", message="Version v4.12.0 introduces", category=FutureWarning)

    model, tokenizer = build_generator(args.model_name_or_path)
    args.max_source_length = clamp(args.max_source_length, encoder_length_limit(model), "--max-source-length")
    args.max_target_length = clamp(args.max_target_length, decoder_length_limit(model), "--max-target-length")
    # the checkpoint carries its sampling defaults, so generation needs no dataset flag
    generation = model.generation_config
    generation.do_sample, generation.top_k, generation.temperature, generation.num_beams = True, TOP_K, TEMPERATURE, 1
    generation.max_new_tokens = args.max_target_length
    start_token = model.generation_config.decoder_start_token_id
    drop_first = start_token is not None and tokenizer("a")["input_ids"][0] == start_token

    with accelerator.main_process_first():
        splits = load_story_plots(args)
        splits["train"] = select_train_examples(splits["train"], args.max_train_examples, args.seed)
        if args.extra_train_plots_dir:
            splits["train"] = add_extra_train_examples(splits["train"], args.extra_train_plots_dir, args.max_extra_train_examples, args.seed)
            splits["validation"] = splits["validation"].select_columns(["id", "plot", "story"])
        if args.max_eval_examples:
            splits["validation"] = splits["validation"].shuffle(seed=args.seed).select(range(min(args.max_eval_examples, len(splits["validation"]))))
        train_ids = list(splits["train"]["id"]) if "id" in splits["train"].column_names else []
        features = splits.map(
            to_features,
            batched=True,
            fn_kwargs={"tokenizer": tokenizer, "max_source_length": args.max_source_length, "max_target_length": args.max_target_length,
                       "drop_first_target_token": drop_first},
            remove_columns=splits["train"].column_names,
            desc="tokenising",
        )
    features, truncated = count_truncated(features, args.max_source_length, args.max_target_length)
    train_set = features["train"]
    info = {"dataset": args.dataset, "max_source_length": args.max_source_length, "max_target_length": args.max_target_length, "train_ids": train_ids}
    run = loop.train(
        model, train_set,
        # no model given: the model shifts the labels itself and masks padding in the decoder
        DataCollatorForSeq2Seq(tokenizer, pad_to_multiple_of=8),
        lengths=[len(ids) for ids in train_set["labels"]], eval_sets={"validation": features["validation"]},
        evaluate=lambda model, loaders: evaluate_loss(model, loaders["validation"], accelerator),
        select_by="loss", lowest=True, save_best=lambda model, folder: save_generator(model, tokenizer, folder, info),
    )
    results = loop.results(run, args, train_pairs=len(train_set), truncated=truncated)
    loop.write_results(results)
    accelerator.end_training()
    return results
