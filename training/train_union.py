"""Train UNION with accelerate, in the style of transformers' run_glue_no_trainer.

    storyeval-train-union --dataset roc --output-dir outputs/union-roc

One command goes from a builder name to a checkpoint folder: it builds the
negative samples (cached by `datasets`), trains, keeps the best checkpoint by
validation accuracy on held-out auto-constructed pairs, and exports it with its
model card. Multi-GPU / multi-node: ``accelerate launch -m
storyeval_training.train_union ...`` with the same arguments.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import re
import shutil
import time
from pathlib import Path

import datasets
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import AutoTokenizer, SchedulerType, get_scheduler
from transformers.trainer_pt_utils import LengthGroupedSampler

from storyeval import text as textlib
from storyeval.checkpoints import OFFLINE_BACKBONE, backbone_path
from storyeval.models import UnionModel
from storyeval.scoring import normalize_story
from storyeval_training import build_negatives
from storyeval_training.model_card import write_union_card
from storyeval_training.provenance import environment
from storyeval_training.selection import best_by, improves

logger = logging.getLogger("storyeval_training.train_union")


TRAINER_STATE = "trainer_state.json"


POSITIVE_OPTIONS = (
    "per_device_train_batch_size", "per_device_eval_batch_size", "learning_rate", "num_train_epochs", "max_train_steps",
    "time_budget_minutes", "gradient_accumulation_steps", "eval_steps", "checkpointing_steps", "max_length", "train_top_layers",
)


def require_positive(parser: argparse.ArgumentParser, args, names) -> None:
    """A usage error for each option in ``names`` that is set and not positive: a zero batch, interval or
    count would fail deep into training (a division by zero) or, as a falsy limit, mean no limit at all."""
    bad = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in names if getattr(args, name) is not None and getattr(args, name) <= 0]
    if bad:
        parser.error(f"must be positive: {', '.join(bad)}")


SCHEDULERS = [scheduler.value for scheduler in SchedulerType]


def check_loop_options(parser: argparse.ArgumentParser, args) -> None:
    """Usage errors, before anything is written, for the options the training loops share beyond
    :func:`require_positive`: ones that would fail only after the output folder exists."""
    negative = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in ("weight_decay", "num_warmup_steps") if getattr(args, name) < 0]
    if negative:
        parser.error(f"must not be negative: {', '.join(negative)}")
    if args.resume_from_checkpoint == "latest":
        args.resume_from_checkpoint = latest_state(Path(args.output_dir))
    if args.resume_from_checkpoint:
        state = Path(args.resume_from_checkpoint)
        if not re.fullmatch(r"step_\d+", state.name) or not (state / "optimizer.bin").is_file():
            parser.error(f"--resume-from-checkpoint {state}: expected a step_N folder written by --checkpointing-steps "
                         "(with optimizer.bin); best/ and exported checkpoints hold weights only")


def latest_state(output_dir: Path) -> str | None:
    """The newest complete step_N folder in ``output_dir`` (None: start afresh). States are written
    under a temporary name and renamed when complete, so a run killed while saving leaves none half-written."""
    states = [d for d in output_dir.glob("step_*") if re.fullmatch(r"step_\d+", d.name) and (d / "optimizer.bin").is_file()]
    return str(max(states, key=lambda d: int(d.name.split("_")[1]))) if states else None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train a UNION checkpoint.")
    p.add_argument("--dataset", choices=["roc", "wp"], help="builder to train on (negatives are built from it)")
    p.add_argument("--pairs-dir", help="pairs from storyeval-build-negatives (instead of --dataset)")
    p.add_argument("--model-name-or-path", default=OFFLINE_BACKBONE, help="encoder to start from, or a UNION checkpoint")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--per-device-train-batch-size", type=int, default=10)
    p.add_argument("--per-device-eval-batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--num-train-epochs", type=float, default=3)
    p.add_argument("--max-train-steps", type=int, default=None, help="overrides --num-train-epochs")
    p.add_argument("--time-budget-minutes", type=float, default=None, help="stop (after a final evaluation) when exceeded")
    p.add_argument("--gradient-accumulation-steps", type=int, default=1)
    p.add_argument("--lr-scheduler-type", default="linear", choices=SCHEDULERS)
    p.add_argument("--num-warmup-steps", type=int, default=0)
    p.add_argument("--recon-weight", type=float, default=0.1, help="lambda; 0 is the paper's -Recon ablation")
    p.add_argument("--max-length", type=int, default=512, help="tokens per story in training (the scoring window too)")
    p.add_argument("--eval-steps", type=int, default=500)
    p.add_argument("--checkpointing-steps", type=int, default=1000, help="save resumable state every N steps")
    p.add_argument("--resume-from-checkpoint", default=None,
                   help="a step_N folder written by --checkpointing-steps, or 'latest': the newest one in --output-dir (a fresh start if none)")
    p.add_argument("--train-top-layers", type=int, default=None,
                   help="train only the encoder's top N layers and the heads (embeddings and lower layers frozen): faster steps, "
                        "and an export that ships only those layers")
    p.add_argument("--max-train-pairs", type=int, default=None)
    p.add_argument("--max-eval-pairs", type=int, default=2000, help="validation pairs evaluated (0: all)")
    p.add_argument("--selection-pairs-dir", default=None,
                   help="pairs saved by storyeval-build-negatives or storyeval-train-plot-coherence (its pairs/ folder) whose "
                        "validation split chooses the best checkpoint instead of this run's own validation pairs, e.g. "
                        "model-generated negatives, which this run's perturbations do not resemble")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--negative-seeds", type=int, nargs="+", default=[42], help="one set of negatives per seed")
    p.add_argument("--base-model-name", default=None, help="base_model for the model card (default: --model-name-or-path)")
    p.add_argument("--export-dir", default=None, help="also export the best model here (fp16, with its reconstruction head) with a model card")
    p.add_argument("--cache-dir", default=None, help="`datasets` cache")
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    if bool(args.dataset) == bool(args.pairs_dir):
        p.error("give exactly one of --dataset and --pairs-dir")
    if args.selection_pairs_dir and not Path(args.selection_pairs_dir).is_dir():
        p.error(f"--selection-pairs-dir {args.selection_pairs_dir}: no such folder")
    require_positive(p, args, POSITIVE_OPTIONS + ("max_train_pairs",))
    check_loop_options(p, args)
    if args.max_eval_pairs < 0 or args.recon_weight < 0:
        p.error("--max-eval-pairs (0: all) and --recon-weight (0: no reconstruction) must not be negative")
    if len(set(args.negative_seeds)) != len(args.negative_seeds):
        p.error(f"--negative-seeds repeats a seed ({args.negative_seeds}): each seed's pairs would be trained on twice")
    return args


def load_pair_folder(folder: str, option: str) -> datasets.DatasetDict:
    """Pairs saved by build-negatives (or the plot pipeline), with an error naming the option."""
    if not (Path(folder) / "dataset_dict.json").is_file():
        raise FileNotFoundError(f"{option} {folder}: no saved DatasetDict there (dataset_dict.json)")
    return datasets.load_from_disk(folder)


def load_pairs(args) -> datasets.DatasetDict:
    if args.pairs_dir:
        pairs = load_pair_folder(args.pairs_dir, "--pairs-dir")
        stats = Path(args.pairs_dir) / "negatives_stats.json"
        if stats.is_file():
            # recorded by build-negatives; the model card names the corpus and seed from them
            recorded = json.loads(stats.read_text())
            args.dataset = getattr(args, "dataset", None) or recorded.get("dataset")
            args.negative_seeds = [recorded["seed"]] if "seed" in recorded else args.negative_seeds
        return pairs
    sets = [
        build_negatives.build(args.dataset, ("train", "validation"), seed=seed, cache_dir=args.cache_dir, data_dir=args.data_dir)
        for seed in args.negative_seeds
    ]
    return datasets.DatasetDict({s: datasets.concatenate_datasets([p[s] for p in sets]) for s in ("train", "validation")})


def to_examples(batch: dict, tokenizer, max_length: int) -> dict:
    """Each pair gives a human example (label 1) and a negative (label 0) whose
    reconstruction target is the original story's words, aligned by position
    (special tokens such as [CLS] and [SEP] are not targets)."""
    human = tokenizer(batch["human"], truncation=True, max_length=max_length)
    negative = tokenizer(batch["negative"], truncation=True, max_length=max_length)
    framed = tokenizer(batch["original"], truncation=True, max_length=max_length, return_special_tokens_mask=True)
    original = [[-100 if special else token for token, special in zip(ids, mask)]
                for ids, mask in zip(framed["input_ids"], framed["special_tokens_mask"])]
    out = {"input_ids": [], "attention_mask": [], "labels": [], "recon_labels": [], "pair": []}
    for i, pair_id in enumerate(batch["id"]):
        out["input_ids"] += [human["input_ids"][i], negative["input_ids"][i]]
        out["attention_mask"] += [human["attention_mask"][i], negative["attention_mask"][i]]
        out["labels"] += [1, 0]
        length = len(negative["input_ids"][i])
        target = original[i][:length] + [-100] * max(0, length - len(original[i]))
        # a human story has nothing to reconstruct; only negatives carry targets
        out["recon_labels"] += [[-100] * len(human["input_ids"][i]), target]
        out["pair"] += [pair_id, pair_id]
    return out


def load_selection_pairs(folder: str, delexicalize: bool) -> datasets.Dataset:
    """The validation split of ``folder``, normalised as scoring normalises a story.

    The run's own pairs are already in that form; pairs from elsewhere (the plot
    paper's released stories keep names and their own spacing) may not be.
    """
    pairs = load_pair_folder(folder, "--selection-pairs-dir")
    if "validation" not in pairs or len(pairs["validation"]) == 0:
        raise ValueError(f"--selection-pairs-dir {folder}: needs a non-empty validation split, has {dict(pairs.num_rows)}")
    columns = ("human", "negative", "original")
    # not from the cache: its key would not change with the normalisation code, and one split is cheap
    return pairs["validation"].map(
        lambda row: {c: normalize_story(row[c], delexicalize) for c in columns}, desc="normalising selection pairs",
        load_from_cache_file=False,
    )


def drop_selection_stories(train: datasets.Dataset, selection: datasets.Dataset) -> tuple[datasets.Dataset, int]:
    """Training pairs whose human story is not one the selection pairs judge, and how many were dropped.

    The plot paper's released stories come from the same ROC corpus, so without
    this a checkpoint would be chosen partly on stories it was trained to call human.
    Stories are matched by the leakage rule's key (the normalised first sentence).
    """
    selected = {textlib.leakage_key(story) for story in selection["human"]}
    kept = train.filter(lambda row: textlib.leakage_key(row["human"]) not in selected, desc="dropping the selection pairs' stories")
    dropped = len(train) - len(kept)
    logger.info("dropped %d training pairs whose human story the selection pairs judge", dropped)
    return kept, dropped


class Collator:
    """Dynamic padding; recon_labels are padded with -100."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        recon = [f.pop("recon_labels") for f in features]
        for f in features:
            f.pop("pair", None)
        batch = self.tokenizer.pad(features, return_tensors="pt", pad_to_multiple_of=8)
        width = batch["input_ids"].shape[1]
        batch["recon_labels"] = torch.tensor([r + [-100] * (width - len(r)) for r in recon])
        return batch


def pair_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of pairs whose human story outscores its negative (a tie counts half).

    ``to_examples`` lays each pair out as (human, negative) at positions 2i, 2i+1,
    and evaluation keeps that order. Unlike ``accuracy`` this needs no threshold:
    it is what a metric is used for (ranking), and it stays meaningful on pairs
    unlike the training ones, where the scores may all sit on one side of 0.5.
    """
    if logits.numel() % 2 or not (labels[0::2] == 1).all() or not (labels[1::2] == 0).all():
        raise ValueError("evaluation examples must alternate human (1) and negative (0) stories of the same pair")
    human, negative = logits[0::2], logits[1::2]
    return ((human > negative).float() + 0.5 * (human == negative).float()).mean().item()


@torch.inference_mode()
def evaluate(model, dataloader, accelerator) -> dict:
    model.eval()
    cls_losses, recon_losses, all_logits, all_labels = [], [], [], []
    for batch in dataloader:
        out = model(**batch)
        logits, labels = accelerator.gather_for_metrics((out.logits, batch["labels"]))
        all_logits.append(logits.float())
        all_labels.append(labels)
        cls_losses.append(accelerator.gather_for_metrics(out.cls_loss.reshape(1)).mean().item())
        if out.recon_loss is not None:
            recon_losses.append(accelerator.gather_for_metrics(out.recon_loss.reshape(1)).mean().item())
    model.train()
    if not all_logits:
        raise ValueError("no evaluation pairs")
    logits, labels = torch.cat(all_logits), torch.cat(all_labels)
    scores = torch.sigmoid(logits)
    human_scores, negative_scores = scores[labels == 1].tolist(), scores[labels == 0].tolist()
    results = {"accuracy": ((logits > 0).long() == labels).float().mean().item(), "pair_accuracy": pair_accuracy(logits, labels),
               "cls_loss": sum(cls_losses) / max(len(cls_losses), 1)}
    if recon_losses:
        results["recon_loss"] = sum(recon_losses) / len(recon_losses)
    if human_scores and negative_scores:
        results["mean_human_score"] = sum(human_scores) / len(human_scores)
        results["mean_negative_score"] = sum(negative_scores) / len(negative_scores)
    return results


def main(argv=None) -> None:
    train(parse_args(argv))


def train(args, config_overrides: dict | None = None, write_card=write_union_card) -> dict:
    """Run training; returns what it writes to all_results.json.

    ``config_overrides`` set fields of the model's config, new or continued (the plot-coherence
    classifier reuses this loop with ``metric`` and ``delexicalize`` set), and
    ``write_card`` writes the exported checkpoint's model card.
    """
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if accelerator.is_local_main_process:
        datasets.utils.logging.set_verbosity_warning()
    else:
        datasets.utils.logging.set_verbosity_error()
    set_seed(args.seed)
    started = time.perf_counter()
    run_environment = environment()  # taken at the start: the code the run ran, not what the checkout holds when it ends

    encoder_path = backbone_path(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(encoder_path)
    if args.max_length > tokenizer.model_max_length:
        raise ValueError(f"--max-length {args.max_length} exceeds the {tokenizer.model_max_length} tokens the tokenizer of {args.model_name_or_path} allows")
    # this run's settings, whether the model is new or continued: a continued
    # checkpoint may come from another metric (UNION weights as the plot
    # classifier's start), and scoring must see the inputs this run trains on
    settings = {"recon_weight": args.recon_weight, "max_length": args.max_length, "window_stride": args.max_length // 2,
                **(config_overrides or {})}
    if (Path(encoder_path) / "config.json").is_file() and "storyeval-union" in (Path(encoder_path) / "config.json").read_text():
        # continue from a UNION checkpoint; bundled ones are fp16 on disk, train in fp32
        model = UnionModel.from_pretrained(encoder_path, dtype=torch.float32)
        if not settings.pop("has_reconstruction_head", True):
            model.drop_reconstruction_head()
        for key, value in settings.items():
            setattr(model.config, key, value)
        model.config.validate()  # setattr checks each field alone, not max_length against the encoder
    else:
        model = UnionModel.from_encoder(encoder_path, **settings)
    if args.recon_weight > 0 and not model.config.has_reconstruction_head:
        raise ValueError("--recon-weight > 0 needs a checkpoint with its reconstruction head")
    if args.train_top_layers:
        model.train_top_layers_only(args.train_top_layers)
    with accelerator.main_process_first():
        pairs = load_pairs(args)
        selection, selection_overlap = None, 0
        if args.selection_pairs_dir:
            selection = load_selection_pairs(args.selection_pairs_dir, model.config.delexicalize)
            pairs["train"], selection_overlap = drop_selection_stories(pairs["train"], selection)
        if args.max_train_pairs:
            pairs["train"] = pairs["train"].shuffle(seed=args.seed).select(range(min(args.max_train_pairs, len(pairs["train"]))))
        if args.max_eval_pairs:
            pairs["validation"] = pairs["validation"].shuffle(seed=args.seed).select(range(min(args.max_eval_pairs, len(pairs["validation"]))))
        examples = pairs.map(
            to_examples,
            batched=True,
            fn_kwargs={"tokenizer": tokenizer, "max_length": args.max_length},
            remove_columns=pairs["train"].column_names,
            desc="tokenising",
        )
        selection_set = None
        if selection is not None:
            selection_set = selection.map(
                to_examples, batched=True, fn_kwargs={"tokenizer": tokenizer, "max_length": args.max_length},
                remove_columns=selection.column_names, desc="tokenising selection pairs",
            )
    # only now, so that a bad argument or pair folder leaves nothing behind
    output_dir = Path(args.output_dir)
    if accelerator.is_main_process:
        output_dir.mkdir(parents=True, exist_ok=True)
    train_set, eval_set = examples["train"], examples["validation"]
    collator = Collator(tokenizer)
    # length grouping: batches of similar lengths waste little on padding
    generator = torch.Generator().manual_seed(args.seed)
    sampler = LengthGroupedSampler(
        args.per_device_train_batch_size * accelerator.num_processes,
        lengths=[len(ids) for ids in train_set["input_ids"]],
        generator=generator,
    )
    train_loader = DataLoader(train_set, sampler=sampler, batch_size=args.per_device_train_batch_size, collate_fn=collator)
    eval_loader = DataLoader(eval_set, batch_size=args.per_device_eval_batch_size, collate_fn=collator)
    selection_loader = None
    if selection_set is not None:
        selection_loader = DataLoader(selection_set, batch_size=args.per_device_eval_batch_size, collate_fn=collator)
    # what picks the best checkpoint: held-out pairs either way, never human judgments
    select_by = "selection_pair_accuracy" if selection_loader is not None else "accuracy"

    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in trained if not any(nd in n for nd in no_decay)], "weight_decay": args.weight_decay},
        {"params": [p for n, p in trained if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate)

    scheduler = get_scheduler(args.lr_scheduler_type, optimizer=optimizer, **schedule_lengths(args, len(train_loader), accelerator.num_processes))
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(model, optimizer, train_loader, eval_loader, scheduler)
    if selection_loader is not None:
        selection_loader = accelerator.prepare(selection_loader)
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
        best, history, earlier_minutes = load_trainer_state(Path(args.resume_from_checkpoint), output_dir, completed_steps, select_by,
                                                           main_process=accelerator.is_main_process)
        logger.info("resumed from %s at step %d", args.resume_from_checkpoint, completed_steps)

    logger.info(
        "training on %d examples (%d pairs), %d steps, batch %d x %d processes",
        len(train_set), len(train_set) // 2, max_train_steps, args.per_device_train_batch_size, accelerator.num_processes,
    )
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
                out = model(**batch)
                accelerator.backward(out.loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if not accelerator.sync_gradients:
                continue
            completed_steps += 1
            progress.update(1)
            progress.set_postfix(loss=f"{out.loss.item():.3f}", cls=f"{out.cls_loss.item():.3f}")
            if args.time_budget_minutes and time.perf_counter() - started > 60 * args.time_budget_minutes:
                out_of_time = True
            last = completed_steps >= max_train_steps or out_of_time
            if completed_steps % args.eval_steps == 0 or last:
                metrics = evaluate(model, eval_loader, accelerator)
                if selection_loader is not None:
                    selection_metrics = evaluate(model, selection_loader, accelerator)
                    metrics["selection_accuracy"] = selection_metrics["accuracy"]
                    metrics["selection_pair_accuracy"] = selection_metrics["pair_accuracy"]
                metrics.update(step=completed_steps, epoch=epoch, minutes=round(earlier_minutes + (time.perf_counter() - started) / 60, 1))
                history.append(metrics)
                logger.info("eval %s", json.dumps(metrics))
                if improves(metrics, best, select_by):
                    best = metrics
                    accelerator.wait_for_everyone()
                    if accelerator.is_main_process:
                        accelerator.unwrap_model(model).save_pretrained(output_dir / "best")
                        tokenizer.save_pretrained(output_dir / "best")
            if completed_steps % args.checkpointing_steps == 0:
                save_training_state(accelerator, output_dir, completed_steps, best, history, earlier_minutes + (time.perf_counter() - started) / 60)
            if last:
                break
        if completed_steps >= max_train_steps or out_of_time:
            break

    minutes = round(earlier_minutes + (time.perf_counter() - started) / 60, 1)
    results = {
        "best_validation": best,
        "selected_by": select_by,
        "history": history,
        "train_pairs": len(train_set) // 2,
        "train_pairs_dropped_for_selection": selection_overlap,
        "completed_steps": completed_steps,
        "stopped_by_time_budget": out_of_time,
        "training_minutes": minutes,
        "args": vars(args),
        "environment": run_environment,
    }
    if accelerator.is_main_process:
        (output_dir / "all_results.json").write_text(json.dumps(results, indent=2) + "\n")
        if args.export_dir:
            export(output_dir / "best", Path(args.export_dir), results, write_card=write_card)
    accelerator.end_training()
    return results


def schedule_lengths(args, batches: int, num_processes: int) -> dict[str, int]:
    """The scheduler's warmup and total steps for a loader of ``batches`` before it is sharded.

    Each process makes ceil(batches / num_processes / accumulation) optimizer steps an epoch,
    and accelerate steps a prepared scheduler once per process at each of them, so its lengths
    are counted in optimizer steps times processes. (Counting the unsharded loader's steps
    before multiplying would stretch an epoch-length schedule num_processes times, leaving the
    learning rate far from zero at the end.)
    """
    per_process = math.ceil(math.ceil(batches / num_processes) / args.gradient_accumulation_steps)
    max_train_steps = args.max_train_steps or math.ceil(args.num_train_epochs * per_process)
    return {"num_warmup_steps": args.num_warmup_steps * num_processes, "num_training_steps": max_train_steps * num_processes}


def resume_position(completed_steps: int, batches_per_epoch: int, accumulation_steps: int) -> tuple[int, int]:
    """(epoch, batches of it already trained) after ``completed_steps`` optimizer steps.

    accelerate also steps on an epoch's last, shorter accumulation, so an epoch
    has ceil(batches / accumulation) steps, not batches / accumulation.
    """
    epoch, steps_into_epoch = divmod(completed_steps, math.ceil(batches_per_epoch / accumulation_steps))
    return epoch, steps_into_epoch * accumulation_steps


def epoch_batches(accelerator, loader, skipped: int = 0):
    """An epoch's batches after the first ``skipped`` (a resumed run), drawing nothing from torch's RNG.

    Starting a DataLoader iterator draws a seed from the global generator. The
    uninterrupted run drew it at the start of the epoch, before the state a
    resumed run restores was saved, so a resumed run puts the state back after
    its first batch; otherwise every later dropout mask would differ.
    """
    if not skipped:
        yield from loader
        return
    state = torch.get_rng_state()
    batches = iter(accelerator.skip_first_batches(loader, skipped))
    first = next(batches, None)  # the draw happens here, when the iterator starts
    torch.set_rng_state(state)
    if first is not None:
        yield first
        yield from batches


def save_training_state(accelerator, output_dir: Path, step: int, best: dict | None, history: list, minutes: float) -> None:
    """Resumable state in ``step_N``, with the best weights so far, which a resume into another folder needs."""
    state_dir = output_dir / f"step_{step}"
    partial = output_dir / f"step_{step}.partial"  # renamed when complete: a kill while saving leaves no step_N behind
    if accelerator.is_main_process and partial.exists():
        shutil.rmtree(partial)
    accelerator.save_state(str(partial))
    if accelerator.is_main_process:
        if best is not None:
            shutil.copytree(output_dir / "best", partial / "best", dirs_exist_ok=True)
        (partial / TRAINER_STATE).write_text(json.dumps({"best": best, "history": history, "minutes": minutes}) + "\n")
        if state_dir.exists():
            shutil.rmtree(state_dir)
        partial.rename(state_dir)
    accelerator.wait_for_everyone()


def load_trainer_state(
    state_dir: Path, output_dir: Path, step: int, select_by: str = "accuracy", lowest: bool = False, main_process: bool = True
) -> tuple[dict | None, list, float]:
    """Best metrics, eval history and minutes spent up to ``step``, so a resumed
    run keeps selecting against what it had already seen; the main process puts
    the best weights saved with the state back in ``output_dir/best``."""
    if (state_dir / TRAINER_STATE).is_file():
        state = json.loads((state_dir / TRAINER_STATE).read_text())
        # the best is derived from the history, so a run resumed with another selection rule selects by its own
        best, history, minutes = best_by(state["history"], select_by, lowest), state["history"], state["minutes"]
        saved_step = (state["best"] or {}).get("step")  # the step whose weights were saved with the state
    else:
        # states saved before trainer_state.json existed: rebuild from the run's results
        results_file = output_dir / "all_results.json"
        if not results_file.is_file():
            logger.warning("no %s in %s and no %s: best-checkpoint tracking starts afresh", TRAINER_STATE, state_dir, results_file)
            return None, [], 0.0
        history = [m for m in json.loads(results_file.read_text())["history"] if m["step"] <= step]
        best, minutes = best_by(history, select_by, lowest), history[-1]["minutes"] if history else 0.0
        saved_step = None
    if best is not None and (state_dir / "best").is_dir() and saved_step == best["step"]:
        if main_process:
            shutil.copytree(state_dir / "best", output_dir / "best", dirs_exist_ok=True)
    elif best is not None and not (output_dir / "best").is_dir():
        # states from before the best weights were saved with them, resumed into a new folder
        logger.warning("the weights of the best step %d are not in %s: best-checkpoint tracking starts afresh", best["step"], state_dir)
        best = None
    return best, history, minutes


def export(best_dir: Path, export_dir: Path, results: dict, keep_reconstruction_head: bool = True, write_card=write_union_card) -> None:
    """fp16 with a model card: a Hub repo ready to push.

    The reconstruction head is kept by default: it reuses the input embeddings,
    so it adds only ~0.2M parameters, and it lets training resume from the
    export with reconstruction. Scorers drop it when they load.
    """
    model = UnionModel.from_pretrained(best_dir)
    if not keep_reconstruction_head:
        model.drop_reconstruction_head()
    model.half().save_pretrained(export_dir)
    AutoTokenizer.from_pretrained(best_dir).save_pretrained(export_dir)
    (export_dir / "training_results.json").write_text(json.dumps({k: v for k, v in results.items() if k != "history"}, indent=2) + "\n")
    write_card(export_dir, results)


if __name__ == "__main__":
    main()
