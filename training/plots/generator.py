"""Plot-conditioned story generator (Ghazarian et al., 2021, stage 3).

    storyeval-train-plot-generator --dataset roc --output-dir outputs/plot-generator-roc --max-train-examples 4000
    storyeval-generate-negatives --plots-dir data/plots-roc --model-name-or-path outputs/plot-generator-roc/best \\
        --output-dir data/candidates-roc

The paper fine-tunes BART on (plot -> story) pairs, then samples stories from
manipulated plots: these are the candidate implausible stories that
``adversarial_filter`` narrows down. Offline, the default generator is an
``EncoderDecoderModel`` warm-started from all-MiniLM-L6-v2 on both sides (the
BERT2BERT recipe of Rothe et al., 2020); pass ``facebook/bart-base`` to follow
the paper. The training loop follows ``train_union`` (run_glue_no_trainer style).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import re
import time
import warnings
from pathlib import Path

import datasets
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    EncoderDecoderModel,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    get_scheduler,
)
from transformers.trainer_pt_utils import LengthGroupedSampler

from storyeval.checkpoints import OFFLINE_BACKBONE, backbone_path
from storyeval_training.builders import BUILDERS, load_split
from storyeval_training.provenance import environment
from storyeval_training.selection import improves
from storyeval_training.train_union import (
    POSITIVE_OPTIONS,
    SCHEDULERS,
    check_loop_options,
    epoch_batches,
    load_trainer_state,
    require_positive,
    resume_position,
    save_training_state,
    schedule_lengths,
)

logger = logging.getLogger("storyeval_training.plots.generator")

SENTENCE_MARKER = "#"
PHRASE_SEPARATOR = ";"
# the paper's generation lengths, in tokens; a checkpoint stores its own in generation_config
MAX_NEW_TOKENS = {"roc": 200, "wp": 1024}
MAX_SOURCE_LENGTH = {"roc": 128, "wp": 512}
TOP_K = 50
TEMPERATURE = 0.8
# written next to a trained generator: its data settings and the stories it was trained on
GENERATOR_INFO = "plot_generator.json"
# what storyeval-generate-negatives writes: a human story and its sampled candidates
CANDIDATE_FEATURES = datasets.Features(
    {"id": datasets.Value("string"), "story": datasets.Value("string"), "candidates": datasets.List(datasets.Value("string"))}
)


def plot_to_text(plot: list[list[str]]) -> str:
    """[["kw1", "kw2"], ["kw3"]] -> "kw1 ; kw2 # kw3" (empty sentences keep their marker)."""
    sentences = [f" {PHRASE_SEPARATOR} ".join(p.strip() for p in phrases if p.strip()) for phrases in plot]
    return re.sub(r"\s+", " ", f" {SENTENCE_MARKER} ".join(sentences)).strip()


def has_phrases(plot: list[list[str]]) -> bool:
    """Whether any sentence of ``plot`` holds a non-blank phrase to generate from."""
    return any(phrase.strip() for phrases in plot for phrase in phrases)


def source_token_lengths(tokenizer: PreTrainedTokenizerBase, sources: list[str]) -> list[int]:
    """Tokens per ``plot_to_text`` source, special tokens included, untruncated."""
    return [len(ids) for ids in tokenizer(sources, verbose=False)["input_ids"]]


def build_generator(model_name_or_path: str = OFFLINE_BACKBONE) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A seq2seq model and its tokenizer.

    A seq2seq checkpoint (BART, T5, a saved generator) loads as it is; an
    encoder-only one becomes an ``EncoderDecoderModel`` whose decoder is the same
    checkpoint as a causal LM with new, randomly initialised cross-attention.
    """
    path = backbone_path(model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if AutoConfig.from_pretrained(path).is_encoder_decoder:
        return AutoModelForSeq2SeqLM.from_pretrained(path), tokenizer
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(path, path)
    # BERT-style vocabularies have no BOS/EOS: [CLS] starts the story and [SEP] ends it
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    end = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if None in (start, end, tokenizer.pad_token_id):
        raise ValueError(f"{path}: the tokenizer needs start ([CLS]/BOS), end ([SEP]/EOS) and pad tokens")
    model.config.decoder_start_token_id = start
    model.config.pad_token_id = tokenizer.pad_token_id
    model.config.eos_token_id = end
    model.config.vocab_size = model.config.decoder.vocab_size
    # generate() reads the generation config, not the model config
    generation = model.generation_config
    generation.decoder_start_token_id = generation.bos_token_id = start
    generation.eos_token_id = end
    generation.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def decoder_length_limit(model: PreTrainedModel) -> int | None:
    """Longest target the decoder's position embeddings allow (None: no limit)."""
    return getattr(model.get_decoder().config, "max_position_embeddings", None)


def encoder_length_limit(model: PreTrainedModel) -> int | None:
    return getattr(model.get_encoder().config, "max_position_embeddings", None)


def _clamp(requested: int, limit: int | None, what: str) -> int:
    if limit is not None and requested > limit:
        logger.warning("%s %d exceeds the model's %d positions: using %d", what, requested, limit, limit)
        return limit
    return requested


# ---------------------------------------------------------------- decoding

_PLACEHOLDER = re.compile(r"\[ (male|female|neutral) \]")
_SPLIT_CONTRACTION = re.compile(r" ' (s|m|d|ll|re|ve)\b")
_SPLIT_NT = re.compile(r" n ' t\b")
_SPLIT_HYPHEN = re.compile(r"(\w) - (?=\w)")
_SPLIT_NUMBER = re.compile(r"(\d) ([:,./]) (?=\d)")


def decode_story(tokenizer: PreTrainedTokenizerBase, ids) -> str:
    """Generated ids as text in the corpora's format ("did n't", "[MALE]", "store .").

    Uncased WordPiece decoding glues punctuation ("store.") and splits the
    placeholders and contractions ("[ male ]", "n ' t"): the filter and the
    plausibility classifier would learn that format instead of plausibility.
    Re-spacing the word pieces ourselves gives back the Treebank format for
    all but a few rare tokens; other tokenizers decode as trained.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or type(backend.decoder).__name__ != "WordPiece":
        return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False).strip()
    special = set(tokenizer.all_special_ids)
    pieces = tokenizer.convert_ids_to_tokens([i for i in ids if i not in special])
    text = " ".join(pieces).replace(" ##", "").removeprefix("##")
    text = _PLACEHOLDER.sub(lambda m: f"[{m.group(1).upper()}]", text)
    text = _SPLIT_NT.sub(" n't", text)
    text = _SPLIT_CONTRACTION.sub(r" '\1", text)
    text = _SPLIT_HYPHEN.sub(r"\1-", text)
    text = _SPLIT_NUMBER.sub(r"\1\2", text)
    return text.replace("` `", "``").replace("' '", "''").strip()


@torch.inference_mode()
def generate_stories(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    plots: list[list[list[str]]],
    *,
    num_candidates: int = 1,
    top_k: int = TOP_K,
    temperature: float = TEMPERATURE,
    max_new_tokens: int | None = None,
    max_source_length: int = MAX_SOURCE_LENGTH["roc"],
    batch_size: int = 8,
    seed: int | None = None,
    progress_bar: bool = False,
) -> list[list[str]]:
    """``num_candidates`` sampled stories per plot, in input order.

    ``max_new_tokens`` defaults to the checkpoint's generation config (set at
    training: 200 for ROC, 1024 for WP), capped by the decoder's positions.
    ``batch_size`` counts plots: each call samples ``batch_size * num_candidates``.
    """
    if not plots:
        return []
    if seed is not None:
        torch.manual_seed(seed)
    if max_new_tokens is None:
        max_new_tokens = model.generation_config.max_new_tokens or MAX_NEW_TOKENS["roc"]
    max_new_tokens = _clamp(max_new_tokens, decoder_length_limit(model), "max_new_tokens")
    max_source_length = _clamp(max_source_length, encoder_length_limit(model), "max_source_length")
    sources = [plot_to_text(p) for p in plots]
    empty = [i for i, plot in enumerate(plots) if not has_phrases(plot)]
    if empty:
        raise ValueError(f"plots {empty[:5]} have no phrases: there is nothing to generate a story from")
    too_long = [(i, n) for i, n in enumerate(source_token_lengths(tokenizer, sources)) if n > max_source_length]
    if too_long:
        shown = ", ".join(f"plot {i} has {n}" for i, n in too_long[:5])
        raise ValueError(
            f"{len(too_long)} plot(s) exceed max_source_length={max_source_length} tokens ({shown}); "
            "plots are not truncated silently: raise max_source_length or shorten them"
        )
    model.eval()
    # similar lengths in a batch waste little on padding; the order is restored below
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]), reverse=True)
    stories: list[list[str]] = [[] for _ in sources]
    progress = tqdm(total=len(sources), disable=not progress_bar, desc="generating")
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        inputs = tokenizer(
            [sources[i] for i in chunk], max_length=max_source_length, truncation=True, padding=True, return_tensors="pt"
        ).to(model.device)
        inputs.pop("token_type_ids", None)
        output = model.generate(
            **inputs,
            do_sample=True,
            top_k=top_k,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            num_return_sequences=num_candidates,
            num_beams=1,  # plain sampling, even where a checkpoint's defaults ask for beams (BART's do)
        )
        texts = [decode_story(tokenizer, ids.tolist()) for ids in output]
        for position, i in enumerate(chunk):
            stories[i] = texts[position * num_candidates : (position + 1) * num_candidates]
        progress.update(len(chunk))
    progress.close()
    return stories


# ---------------------------------------------------------------- training

def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Fine-tune a plot -> story generator.")
    p.add_argument("--dataset", choices=sorted(MAX_NEW_TOKENS), default="roc", help="builder to train on; sets the length defaults")
    p.add_argument("--plots-dir", help="instead of the builder: a save_to_disk dataset with `plot` and `story` (a DatasetDict with train/validation, or one Dataset to split)")
    p.add_argument("--model-name-or-path", default=OFFLINE_BACKBONE, help="a seq2seq checkpoint, or an encoder to warm-start both sides from")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--max-source-length", type=int, default=None, help="plot tokens (default: 128 ROC, 512 WP)")
    p.add_argument("--max-target-length", type=int, default=None, help="story tokens (default: 200 ROC, 1024 WP; capped by the decoder)")
    p.add_argument("--per-device-train-batch-size", type=int, default=8)
    p.add_argument("--per-device-eval-batch-size", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--num-train-epochs", type=float, default=3)
    p.add_argument("--max-train-steps", type=int, default=None, help="overrides --num-train-epochs")
    p.add_argument("--time-budget-minutes", type=float, default=None, help="stop (after a final evaluation) when exceeded")
    p.add_argument("--gradient-accumulation-steps", type=int, default=1)
    p.add_argument("--lr-scheduler-type", default="linear", choices=SCHEDULERS)
    p.add_argument("--num-warmup-steps", type=int, default=0)
    p.add_argument("--max-train-examples", type=int, default=None, help="e.g. a few thousand plots on CPU")
    p.add_argument("--max-eval-examples", type=int, default=200)
    p.add_argument("--eval-steps", type=int, default=500)
    p.add_argument("--checkpointing-steps", type=int, default=1000, help="save resumable state every N steps")
    p.add_argument("--resume-from-checkpoint", default=None, help="a step_N folder written by --checkpointing-steps")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--cache-dir", default=None, help="`datasets` cache")
    p.add_argument("--data-dir", default=None, help="data root (default: $STORYEVAL_DATA or ../shared/data)")
    args = p.parse_args(argv)
    require_positive(p, args, tuple(n for n in POSITIVE_OPTIONS if n != "max_length")
                     + ("max_source_length", "max_target_length", "max_train_examples"))
    check_loop_options(p, args)
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
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if accelerator.is_local_main_process:
        datasets.utils.logging.set_verbosity_warning()
    else:
        datasets.utils.logging.set_verbosity_error()
    # EncoderDecoderModel warns on every forward with labels that the loss moved there in v4.12
    warnings.filterwarnings("ignore", message="Version v4.12.0 introduces", category=FutureWarning)
    set_seed(args.seed)
    output_dir = Path(args.output_dir)
    if accelerator.is_main_process:
        output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    run_environment = environment()  # taken at the start: the code the run ran, not what the checkout holds when it ends

    model, tokenizer = build_generator(args.model_name_or_path)
    args.max_source_length = _clamp(args.max_source_length, encoder_length_limit(model), "--max-source-length")
    args.max_target_length = _clamp(args.max_target_length, decoder_length_limit(model), "--max-target-length")
    # the checkpoint carries its sampling defaults, so generation needs no dataset flag
    generation = model.generation_config
    generation.do_sample, generation.top_k, generation.temperature, generation.num_beams = True, TOP_K, TEMPERATURE, 1
    generation.max_new_tokens = args.max_target_length
    start_token = model.generation_config.decoder_start_token_id
    drop_first = start_token is not None and tokenizer("a")["input_ids"][0] == start_token

    with accelerator.main_process_first():
        splits = load_story_plots(args)
        splits["train"] = select_train_examples(splits["train"], args.max_train_examples, args.seed)
        if args.max_eval_examples:
            splits["validation"] = splits["validation"].shuffle(seed=args.seed).select(range(min(args.max_eval_examples, len(splits["validation"]))))
        train_ids = list(splits["train"]["id"]) if "id" in splits["train"].column_names else []
        features = splits.map(
            to_features,
            batched=True,
            fn_kwargs={"tokenizer": tokenizer, "max_source_length": args.max_source_length, "max_target_length": args.max_target_length, "drop_first_target_token": drop_first},
            remove_columns=splits["train"].column_names,
            desc="tokenising",
        )
    features, truncated = count_truncated(features, args.max_source_length, args.max_target_length)
    train_set, eval_set = features["train"], features["validation"]
    # no model given: the model shifts the labels itself and masks padding in the decoder
    collator = DataCollatorForSeq2Seq(tokenizer, pad_to_multiple_of=8)
    generator = torch.Generator().manual_seed(args.seed)
    sampler = LengthGroupedSampler(
        args.per_device_train_batch_size * accelerator.num_processes,
        lengths=[len(ids) for ids in train_set["labels"]],
        generator=generator,
    )
    train_loader = DataLoader(train_set, sampler=sampler, batch_size=args.per_device_train_batch_size, collate_fn=collator)
    eval_loader = DataLoader(eval_set, batch_size=args.per_device_eval_batch_size, collate_fn=collator)

    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate)
    scheduler = get_scheduler(args.lr_scheduler_type, optimizer=optimizer, **schedule_lengths(args, len(train_loader), accelerator.num_processes))
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(model, optimizer, train_loader, eval_loader, scheduler)
    # optimizer steps on this process: the loader is sharded now
    steps_per_epoch = math.ceil(len(train_loader) / args.gradient_accumulation_steps)
    max_train_steps = args.max_train_steps or math.ceil(args.num_train_epochs * steps_per_epoch)
    num_epochs = math.ceil(max_train_steps / steps_per_epoch)

    completed_steps, start_epoch, resume_step = 0, 0, None
    best, history, earlier_minutes = None, [], 0.0
    if args.resume_from_checkpoint:
        accelerator.load_state(args.resume_from_checkpoint)
        completed_steps = int(Path(args.resume_from_checkpoint).name.split("_")[-1])
        start_epoch, resume_step = resume_position(completed_steps, len(train_loader), args.gradient_accumulation_steps)
        best, history, earlier_minutes = load_trainer_state(Path(args.resume_from_checkpoint), output_dir, completed_steps, "loss", lowest=True,
                                                           main_process=accelerator.is_main_process)
        logger.info("resumed from %s at step %d", args.resume_from_checkpoint, completed_steps)

    logger.info("training on %d (plot, story) pairs, %d steps, batch %d x %d processes", len(train_set), max_train_steps, args.per_device_train_batch_size, accelerator.num_processes)
    info = {"dataset": args.dataset, "max_source_length": args.max_source_length, "max_target_length": args.max_target_length, "train_ids": train_ids}
    progress = tqdm(range(max_train_steps), initial=completed_steps, disable=not accelerator.is_local_main_process, desc="training")
    out_of_time = False
    model.train()
    for epoch in range(start_epoch, num_epochs):
        if completed_steps >= max_train_steps:  # resumed from the last step: nothing left to train
            break
        generator.manual_seed(args.seed + epoch)  # each epoch's order from its number alone, so a resumed run sees the same
        skipped = resume_step if resume_step is not None and epoch == start_epoch else 0
        for batch in epoch_batches(accelerator, train_loader, skipped):
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if not accelerator.sync_gradients:
                continue
            completed_steps += 1
            progress.update(1)
            progress.set_postfix(loss=f"{loss.item():.3f}")
            if args.time_budget_minutes and time.perf_counter() - started > 60 * args.time_budget_minutes:
                out_of_time = True
            last = completed_steps >= max_train_steps or out_of_time
            if completed_steps % args.eval_steps == 0 or last:
                metrics = evaluate_loss(model, eval_loader, accelerator)
                metrics.update(step=completed_steps, epoch=epoch, minutes=round(earlier_minutes + (time.perf_counter() - started) / 60, 1))
                history.append(metrics)
                logger.info("eval %s", json.dumps(metrics))
                if improves(metrics, best, "loss", lowest=True):
                    best = metrics
                    accelerator.wait_for_everyone()
                    if accelerator.is_main_process:
                        save_generator(accelerator.unwrap_model(model), tokenizer, output_dir / "best", info)
            if completed_steps % args.checkpointing_steps == 0:
                save_training_state(accelerator, output_dir, completed_steps, best, history, earlier_minutes + (time.perf_counter() - started) / 60)
            if last:
                break
        if completed_steps >= max_train_steps or out_of_time:
            break

    results = {
        "best_validation": best,
        "history": history,
        "train_pairs": len(train_set),
        "truncated": truncated,
        "completed_steps": completed_steps,
        "stopped_by_time_budget": out_of_time,
        "training_minutes": round(earlier_minutes + (time.perf_counter() - started) / 60, 1),
        "args": vars(args),
        "environment": run_environment,
    }
    if accelerator.is_main_process:
        (output_dir / "all_results.json").write_text(json.dumps(results, indent=2) + "\n")
    accelerator.end_training()
    return results


def save_generator(model: PreTrainedModel, tokenizer, folder: Path, info: dict) -> None:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / GENERATOR_INFO).write_text(json.dumps(info) + "\n")


# ---------------------------------------------------------------- negatives

def parse_generate_args(argv=None):
    p = argparse.ArgumentParser(description="Sample candidate implausible stories from manipulated plots.")
    p.add_argument("--plots-dir", required=True, help="save_to_disk dataset (or DatasetDict) with id, story, manipulated_plot")
    p.add_argument("--model-name-or-path", required=True, help="a generator from storyeval-train-plot-generator (its best/ folder)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--num-candidates", type=int, default=6, help="stories sampled per manipulated plot")
    p.add_argument("--top-k", type=int, default=TOP_K)
    p.add_argument("--temperature", type=float, default=TEMPERATURE)
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: the generator's own (200 ROC, 1024 WP)")
    p.add_argument("--max-source-length", type=int, default=None, help="default: the generator's training setting")
    p.add_argument("--batch-size", type=int, default=8, help="plots per generate call")
    p.add_argument("--splits", nargs="*", default=None, help="splits of a DatasetDict to process (default: all)")
    p.add_argument("--max-examples", type=int, default=None, help="per split")
    p.add_argument("--keep-generator-train-stories", action="store_true", help="also generate for stories the generator was trained on")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    if args.num_candidates < 1 or args.batch_size < 1 or (args.max_examples is not None and args.max_examples < 1):
        p.error("--num-candidates, --batch-size and --max-examples must be positive")
    return args


def generate_main(argv=None) -> None:
    generate_negatives(parse_generate_args(argv))


def generate_negatives(args) -> dict:
    """Write (id, story, candidates) rows; returns the run summary also saved as JSON."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = build_generator(args.model_name_or_path)
    model.to(device)
    info_file = Path(args.model_name_or_path) / GENERATOR_INFO
    info = json.loads(info_file.read_text()) if info_file.is_file() else {}
    max_source_length = args.max_source_length or info.get("max_source_length") or MAX_SOURCE_LENGTH["roc"]
    max_source_length = _clamp(max_source_length, encoder_length_limit(model), "max_source_length")
    skip_ids = set() if args.keep_generator_train_stories else set(info.get("train_ids", []))

    loaded = datasets.load_from_disk(args.plots_dir)
    single = isinstance(loaded, datasets.Dataset)
    splits = {"train": loaded} if single else {name: loaded[name] for name in (args.splits or loaded)}
    outputs, summary = {}, {"args": vars(args), "splits": {}, "environment": environment()}
    for offset, (name, rows) in enumerate(splits.items()):
        manipulated_plots = list(rows["manipulated_plot"])
        with_plot = [i for i, plot in enumerate(manipulated_plots) if has_phrases(plot)]
        ids = list(rows["id"])
        usable = [i for i in with_plot if ids[i] not in skip_ids]
        # a plot longer than the source window is left out and counted, never cut short
        lengths = source_token_lengths(tokenizer, [plot_to_text(manipulated_plots[i]) for i in usable])
        too_long = sum(n > max_source_length for n in lengths)
        usable = [i for i, n in zip(usable, lengths) if n <= max_source_length]
        if args.max_examples:
            usable = usable[: args.max_examples]
        rows = rows.select(usable)
        started = time.perf_counter()
        candidates = generate_stories(
            model,
            tokenizer,
            list(rows["manipulated_plot"]),
            num_candidates=args.num_candidates,
            top_k=args.top_k,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
            max_source_length=max_source_length,
            batch_size=args.batch_size,
            seed=args.seed + offset,
            progress_bar=True,
        )
        seconds = time.perf_counter() - started
        generated = len(candidates) * args.num_candidates
        outputs[name] = datasets.Dataset.from_dict({"id": list(rows["id"]), "story": list(rows["story"]), "candidates": candidates}, features=CANDIDATE_FEATURES)
        summary["splits"][name] = {
            "stories": len(rows),
            "skipped_without_manipulated_plot": len(ids) - len(with_plot),
            "skipped_generator_train_stories": sum(ids[i] in skip_ids for i in with_plot),
            "skipped_plots_longer_than_source_window": too_long,
            "generated": generated,
            "seconds": round(seconds, 1),
            "stories_per_second": round(generated / seconds, 2) if seconds else None,
        }
        logger.info(
            "%s: %d stories from %d manipulated plots in %.0f s (%.2f stories/s on %s); skipped %d without a manipulated plot, "
            "%d the generator trained on, %d longer than %d source tokens",
            name, generated, len(rows), seconds, generated / max(seconds, 1e-9), device,
            summary["splits"][name]["skipped_without_manipulated_plot"], summary["splits"][name]["skipped_generator_train_stories"],
            too_long, max_source_length,
        )
    output_dir = Path(args.output_dir)
    result = outputs["train"] if single else datasets.DatasetDict(outputs)
    result.save_to_disk(str(output_dir))
    (output_dir / "generation_results.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    main()
