"""Train UNION on :mod:`storyeval_training.loop` (accelerate, in the style of transformers' run_glue_no_trainer).

    storyeval-train-union --dataset roc --output-dir outputs/union-roc

One command goes from a builder name to a checkpoint folder: it builds the
negative samples (cached by `datasets`), trains, keeps the best checkpoint by
validation accuracy on held-out auto-constructed pairs, and exports it with its
model card. Multi-GPU / multi-node: ``accelerate launch -m
storyeval_training.recipes.train_union ...`` with the same arguments.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from pathlib import Path

import datasets
import torch
from transformers import AutoTokenizer

from storyeval import text as textlib
from storyeval.checkpoints.backbones import published_backbone_name
from storyeval.checkpoints.registry import UNION_MODEL_TYPE
from storyeval.checkpoints.resolution import OFFLINE_BACKBONE, backbone_path
from storyeval.models import UnionModel
from storyeval.scoring.sequence import normalize_story
from storyeval_training import paths
from storyeval_training.data import build_negatives
from storyeval_training.export.model_card import write_union_card
from storyeval_training.export.provenance import published_record
from storyeval_training.loop import LoopArguments, TrainingLoop, add_loop_arguments, check_loop_arguments

logger = logging.getLogger("storyeval_training.recipes.train_union")


# UNION's own options that must be positive when set (the loop checks its own)
POSITIVE_OPTIONS = ("max_length", "train_top_layers", "max_train_pairs", "lora_rank", "lora_alpha")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Train a UNION checkpoint.")
    p.add_argument("--dataset", choices=["roc", "wp"], help="builder to train on (negatives are built from it)")
    p.add_argument("--pairs-dir", help="pairs from storyeval-build-negatives (instead of --dataset)")
    p.add_argument("--model-name-or-path", default=OFFLINE_BACKBONE, help="encoder to start from, or a UNION checkpoint")
    p.add_argument("--output-dir", required=True)
    add_loop_arguments(p)
    p.add_argument("--recon-weight", type=float, default=0.1, help="lambda; 0 is the paper's -Recon ablation")
    p.add_argument("--max-length", type=int, default=512, help="tokens per story in training (the scoring window too)")
    add_partial_training_arguments(p)
    p.add_argument("--max-train-pairs", type=int, default=None)
    p.add_argument("--max-eval-pairs", type=int, default=2000, help="validation pairs evaluated (0: all)")
    p.add_argument("--selection-pairs-dir", default=None,
                   help="pairs saved by storyeval-build-negatives or storyeval-train-plot-coherence (its pairs/ folder) whose "
                        "validation split chooses the best checkpoint instead of this run's own validation pairs, e.g. "
                        "model-generated negatives, which this run's perturbations do not resemble; normalised as scoring "
                        "normalises a story unless --selection-pairs-normalised")
    p.add_argument("--selection-pairs-normalised", action="store_true",
                   help="--selection-pairs-dir's pairs are in that form already (the pair builders' outputs, such as "
                        "modern_breaks' and window_pairs'): read them as they are, since normalising twice changes a text "
                        "(a closing '' read again becomes an opening ``)")
    p.add_argument("--select-by", choices=["accuracy", "pair_accuracy"], default=None,
                   help="what keeps the best evaluation: the stories' accuracy, or the share of pairs whose human story scores "
                        "higher (for a mix of negatives of different kinds, which a threshold of 0.5 suits unequally); measured "
                        "on --selection-pairs-dir when given (default there: pair_accuracy), else on the validation pairs "
                        "(default: accuracy)")
    p.add_argument("--negative-seeds", type=int, nargs="+", default=[42], help="one set of negatives per seed")
    p.add_argument("--export-dir", default=None, help="also export the best model here (fp16, with its reconstruction head) with a model card")
    p.add_argument("--cache-dir", default=None, help="`datasets` cache")
    p.add_argument("--data-dir", default=None)
    return p


def add_partial_training_arguments(p: argparse.ArgumentParser) -> None:
    """Options that train a part of a base-size encoder (its top layers, or LoRA adapters), so that its export ships only that part."""
    p.add_argument("--train-top-layers", type=int, default=None,
                   help="train only the encoder's top N layers and the heads (embeddings and lower layers frozen): faster steps, "
                        "and an export that ships only those layers (default: all layers; continuing a top-layer checkpoint: its N, "
                        "and no fewer)")
    p.add_argument("--lora-rank", type=int, default=None,
                   help="train LoRA adapters of this rank (peft) on every linear layer of the encoder's transformer layers, the "
                        "rest of the encoder frozen, and the heads: an export of the adapters and heads only; from a plain encoder")
    p.add_argument("--lora-alpha", type=float, default=None, help="the adapters' scale (default: twice --lora-rank)")
    p.add_argument("--base-model-name", default=None,
                   help="base_model for the model card (default: --model-name-or-path); with --train-top-layers also the backbone "
                        "the export loads onto, so give a name storyeval.checkpoints.backbones resolves (all-mpnet-base-v2), not a local folder")


def check_partial_training_arguments(p: argparse.ArgumentParser, args) -> None:
    if args.lora_rank and args.train_top_layers:
        p.error("give --lora-rank or --train-top-layers, not both")
    if args.lora_alpha and not args.lora_rank:
        p.error("--lora-alpha scales LoRA adapters: give --lora-rank too")


def check_args(p: argparse.ArgumentParser, args) -> None:
    """Usage errors for what would otherwise fail after the output folder exists."""
    if bool(args.dataset) == bool(args.pairs_dir):
        p.error("give exactly one of --dataset and --pairs-dir")
    if args.selection_pairs_dir and not Path(args.selection_pairs_dir).is_dir():
        p.error(f"--selection-pairs-dir {args.selection_pairs_dir}: no such folder")
    check_loop_arguments(p, args, positive=POSITIVE_OPTIONS)
    if args.max_eval_pairs < 0 or args.recon_weight < 0:
        p.error("--max-eval-pairs (0: all) and --recon-weight (0: no reconstruction) must not be negative")
    check_partial_training_arguments(p, args)
    if len(set(args.negative_seeds)) != len(args.negative_seeds):
        p.error(f"--negative-seeds repeats a seed ({args.negative_seeds}): each seed's pairs would be trained on twice")


def selection_key(args) -> str:
    """The evaluation key that picks a run's best checkpoint (held-out pairs either way, never human judgments)."""
    if getattr(args, "selection_pairs_dir", None):
        return f"selection_{getattr(args, 'select_by', None) or 'pair_accuracy'}"
    return getattr(args, "select_by", None) or "accuracy"


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    check_args(p, args)
    return args


def arguments(loop: LoopArguments, **options) -> argparse.Namespace:
    """What :func:`parse_args` gives for ``loop`` and UNION's ``options`` (the rest at their defaults),
    checked as it checks them: for a script that trains with this loop on its own options."""
    p = build_parser()
    defaults = {action.dest: action.default for action in p._actions if action.dest != "help"}
    unknown = set(options) - set(defaults)
    if unknown:
        raise TypeError(f"not train_union options: {sorted(unknown)}")
    args = argparse.Namespace(**{**defaults, **dataclasses.asdict(loop), **options})
    check_args(p, args)
    return args


def load_pair_folder(folder: str, option: str) -> datasets.DatasetDict:
    """Pairs saved by build-negatives (or the plot pipeline), with an error naming the option."""
    if not (Path(folder) / "dataset_dict.json").is_file():
        raise FileNotFoundError(f"{option} {folder}: no saved DatasetDict there (dataset_dict.json)")
    return datasets.load_from_disk(folder)


def load_pairs(args) -> datasets.DatasetDict:
    if args.pairs_dir:
        # a folder the modern-text check saved has a test split too: its report, which no run trains or selects on
        pairs = load_pair_folder(args.pairs_dir, "--pairs-dir")
        pairs = datasets.DatasetDict({split: rows for split, rows in pairs.items() if split != "test"})
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


def load_selection_pairs(folder: str, delexicalize: bool, normalised: bool = False) -> datasets.Dataset:
    """The validation split of ``folder``, normalised as scoring normalises a story unless it is ``normalised`` already.

    The builders' pairs are in that form; pairs from elsewhere (the plot paper's
    released stories keep names and their own spacing) may not be.
    """
    pairs = load_pair_folder(folder, "--selection-pairs-dir")
    if "validation" not in pairs or len(pairs["validation"]) == 0:
        raise ValueError(f"--selection-pairs-dir {folder}: needs a non-empty validation split, has {dict(pairs.num_rows)}")
    if normalised:
        return pairs["validation"]
    return normalise_pairs(pairs["validation"], delexicalize, "normalising selection pairs")


def normalise_pairs(rows: datasets.Dataset, delexicalize: bool, desc: str) -> datasets.Dataset:
    """Every story of ``rows`` (human, negative and, where there is one, original) normalised as scoring normalises a story."""
    columns = [c for c in ("human", "negative", "original") if c in rows.column_names]
    # not from the cache: its key would not change with the normalisation code, and a split or a sample is cheap
    return rows.map(lambda row: {c: normalize_story(row[c], delexicalize) for c in columns}, desc=desc, load_from_cache_file=False)


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


@paths.one_line_errors
def main(argv=None) -> None:
    train(parse_args(argv))


class StartRefused(ValueError, paths.RunRefused):
    """The model to start from cannot be trained as asked (a window past its tokenizer's, partial-training options its
    checkpoint does not allow): each recipe's ``main`` reports it in one line."""


def build_model(args, config_overrides: dict | None = None) -> tuple[UnionModel, "AutoTokenizer"]:
    """The model to train and its tokenizer: a new UNION model on a plain encoder, or a UNION checkpoint continued,
    with the run's settings, and only the parts ``--train-top-layers`` or ``--lora-rank`` say trainable.

    ``config_overrides`` set fields of the model's config, new or continued (the plot-coherence
    classifier reuses this with ``metric`` and ``delexicalize`` set).
    """
    encoder_path = backbone_path(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(encoder_path)
    if args.max_length > tokenizer.model_max_length:
        raise StartRefused(f"--max-length {args.max_length} exceeds the {tokenizer.model_max_length} tokens the tokenizer of {args.model_name_or_path} allows")
    # this run's settings, whether the model is new or continued: a continued
    # checkpoint may come from another metric (UNION weights as the plot
    # classifier's start), and scoring must see the inputs this run trains on
    settings = {"recon_weight": args.recon_weight, "max_length": args.max_length, "window_stride": args.max_length // 2,
                **(config_overrides or {})}
    config_file = Path(encoder_path) / "config.json"
    started = json.loads(config_file.read_text()) if config_file.is_file() else {}
    from_checkpoint = started.get("model_type") == UNION_MODEL_TYPE
    # an export of LoRA adapters on its backbone: training continues the same adapters, so its export is again adapters only
    continues_adapters = from_checkpoint and bool(started.get("lora_rank")) and bool(started.get("base_model_sha256"))
    if continues_adapters and (args.train_top_layers or args.lora_alpha or args.lora_rank not in (None, started["lora_rank"])):
        raise StartRefused(f"{args.model_name_or_path} ships LoRA adapters of rank {started['lora_rank']}: training continues them, "
                         "so give no --train-top-layers, --lora-alpha or other --lora-rank")
    if from_checkpoint and args.lora_rank and not continues_adapters:
        # an export records the backbone its adapters sit on; on a fine-tuned start that would be this checkpoint, not a backbone
        raise StartRefused(f"--lora-rank adapts a plain encoder (a backbone such as all-mpnet-base-v2); {args.model_name_or_path} "
                         "is a UNION checkpoint: continue it with --train-top-layers, or fine-tune it whole")
    if from_checkpoint:
        # continue from a UNION checkpoint; bundled ones are fp16 on disk, train in fp32
        model = UnionModel.from_pretrained(encoder_path, dtype=torch.float32, merge_adapters=not continues_adapters)
        if not settings.pop("has_reconstruction_head", True):
            model.drop_reconstruction_head()
        for key, value in settings.items():
            setattr(model.config, key, value)
        model.config.validate()  # setattr checks each field alone, not max_length against the encoder
    else:
        model = UnionModel.from_encoder(encoder_path, **settings)
    if args.recon_weight > 0 and not model.config.has_reconstruction_head:
        raise StartRefused("--recon-weight > 0 needs a checkpoint with its reconstruction head")
    started_top = model.config.trained_top_layers  # a top-layer checkpoint: below its top layers it is its backbone
    if started_top and not args.train_top_layers:
        args.train_top_layers = started_top  # else every layer would train, and the export (those layers only) would lose the rest
    if started_top and args.train_top_layers < started_top:
        raise StartRefused(f"{args.model_name_or_path} was trained in its top {started_top} layers: --train-top-layers "
                         f"{args.train_top_layers} would freeze some of them and export without them; use {started_top} or more")
    if args.train_top_layers:
        model.train_top_layers_only(args.train_top_layers)
    if continues_adapters:
        args.lora_rank = started["lora_rank"]  # for the run's record
    elif args.lora_rank:
        model.add_lora_adapters(args.lora_rank, args.lora_alpha)
    return model, tokenizer


def train(args, config_overrides: dict | None = None, write_card=write_union_card) -> dict:
    """Run training; returns what it writes to all_results.json.

    ``config_overrides`` set fields of the model's config, new or continued (the plot-coherence
    classifier reuses this loop with ``metric`` and ``delexicalize`` set), and
    ``write_card`` writes the exported checkpoint's model card.
    """
    loop = TrainingLoop(LoopArguments.from_namespace(args))
    accelerator = loop.accelerator
    model, tokenizer = build_model(args, config_overrides)
    with accelerator.main_process_first():
        pairs = load_pairs(args)
        selection, selection_overlap = None, 0
        if args.selection_pairs_dir:
            selection = load_selection_pairs(args.selection_pairs_dir, model.config.delexicalize,
                                             args.selection_pairs_normalised)
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
        eval_sets = {"validation": examples["validation"]}
        if selection is not None:
            eval_sets["selection"] = selection.map(
                to_examples, batched=True, fn_kwargs={"tokenizer": tokenizer, "max_length": args.max_length},
                remove_columns=selection.column_names, desc="tokenising selection pairs",
            )
    train_set = examples["train"]
    # what picks the best checkpoint: held-out pairs either way, never human judgments
    select_by = selection_key(args)

    def evaluate_all(model, loaders) -> dict:
        metrics = evaluate(model, loaders["validation"], accelerator)
        if "selection" in loaders:
            selection_metrics = evaluate(model, loaders["selection"], accelerator)
            metrics["selection_accuracy"] = selection_metrics["accuracy"]
            metrics["selection_pair_accuracy"] = selection_metrics["pair_accuracy"]
        return metrics

    def save_best(model, folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    logger.info("training on %d pairs", len(train_set) // 2)
    run = loop.train(
        model, train_set, Collator(tokenizer), lengths=[len(ids) for ids in train_set["input_ids"]], eval_sets=eval_sets,
        evaluate=evaluate_all, select_by=select_by, save_best=save_best,
        progress=lambda out: {"loss": f"{out.loss.item():.3f}", "cls": f"{out.cls_loss.item():.3f}"},
    )
    results = loop.results(run, args, selected_by=select_by, train_pairs=len(train_set) // 2,
                           train_pairs_dropped_for_selection=selection_overlap)
    loop.write_results(results)
    if accelerator.is_main_process and args.export_dir:
        export(loop.output_dir / "best", Path(args.export_dir), results, write_card=write_card,
               base_model=args.base_model_name or args.model_name_or_path)
    accelerator.end_training()
    return results


def export(best_dir: Path, export_dir: Path, results: dict, keep_reconstruction_head: bool = True, write_card=write_union_card,
           base_model: str | None = None) -> None:
    """fp16 with a model card: a Hub repo ready to push.

    The reconstruction head is kept by default: it reuses the input embeddings,
    so it adds only ~0.2M parameters, and it lets training resume from the
    export with reconstruction. Scorers drop it when they load.

    A model trained only in its top layers, or through LoRA adapters, exports just those layers
    (or adapters) and the heads, on top of ``base_model`` (the backbone it started from, by a name
    :mod:`storyeval.checkpoints.backbones` resolves, or a folder), without the reconstruction head.
    """
    model = UnionModel.from_pretrained(best_dir)
    # a run continued from an older checkpoint may carry the folder its backbone was read from
    model.config.encoder._name_or_path = published_backbone_name(model.config.encoder._name_or_path)
    if model.config.trained_top_layers is not None or model.config.lora_rank:
        model.save_trained_parameters(export_dir, base_model=model.config.base_model or base_model)
    else:
        if not keep_reconstruction_head:
            model.drop_reconstruction_head()
        model.half().save_pretrained(export_dir)
    AutoTokenizer.from_pretrained(best_dir).save_pretrained(export_dir)
    record = published_record({k: v for k, v in results.items() if k != "history"})
    (export_dir / "training_results.json").write_text(json.dumps(record, indent=2) + "\n")
    if write_card is not None:  # None: the recipe writes its own card once the checkpoint ships
        write_card(export_dir, results)


if __name__ == "__main__":
    main()
