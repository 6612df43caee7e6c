"""Train the continuation encoder: a cross-encoder, (context, candidate next sentence) -> relevance logit.

    python -m storyeval_training.recipes.train_continuation_encoder --output-dir outputs/continuation-encoder \\
        --time-budget-minutes 35 --export-dir outputs/continuation-encoder-export
    python -m storyeval_training.recipes.train_continuation_encoder --model-name-or-path all-mpnet-base-v2 --lora-rank 16 \\
        --learning-rate 2e-4 --output-dir outputs/continuation-encoder-base --export-dir outputs/continuation-encoder-base-export

Self-supervised on the ROC builder's training split (:mod:`storyeval_training.data.continuation_pairs`:
the true next sentence against another story's, a later one of the same story, a perturbed
true one and, for the stories the plot paper released implausible versions of, the
model-generated sentences those depart with), with a binary cross-entropy loss per
candidate, on the shared loop (:mod:`storyeval_training.loop`, whose options it takes).
The model is :class:`storyeval.models.UnionModel` without its reconstruction head, so the
base tier's options apply: ``--lora-rank`` or ``--train-top-layers`` on MPNet-base give an
export of a few MB that loads onto the backbone. Stories whose first sentence opens a Story
Cloze item are dropped first, and counted. The best step is chosen on held-out pairs from
the builder's validation split (``--select-by``; by default the pair accuracy on the
model-generated negatives, the held-out pairs most like a wrong ending that stays on topic),
never by a human-judged set. The export (fp16, with ``encoder_config.json``) is what
``train_continuation --encoder`` reads.
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import datasets
import torch
from transformers import AutoTokenizer

from storyeval.checkpoints.backbones import published_backbone_name
from storyeval.checkpoints.resolution import OFFLINE_BACKBONE, backbone_path
from storyeval.models import UnionModel
from storyeval.models.continuation.encoder import encode_pairs, pad, save_encoder_config
from storyeval_training.data import continuation_pairs
from storyeval_training.export.provenance import published_record
from storyeval_training.loop import LoopArguments, TrainingLoop, add_loop_arguments, check_loop_arguments
from storyeval_training.recipes import train_union

logger = logging.getLogger("storyeval_training.recipes.train_continuation_encoder")

SELECT_BY = ("pair_accuracy_generated", "pair_accuracy")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train the continuation encoder (a cross-encoder for continuation relevance).")
    p.add_argument("--model-name-or-path", default=OFFLINE_BACKBONE, help="the backbone (all-MiniLM-L6-v2, all-mpnet-base-v2, a folder)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--export-dir", default=None, help="export the best model here (fp16), for train_continuation --encoder")
    add_loop_arguments(p, learning_rate=3e-5, per_device_train_batch_size=32, per_device_eval_batch_size=64,
                       num_train_epochs=1, num_warmup_steps=50, eval_steps=200, checkpointing_steps=200)
    train_union.add_partial_training_arguments(p)
    p.add_argument("--max-length", type=int, default=128, help="tokens per training pair (ROC pairs fit); the export scores with 512")
    p.add_argument("--scoring-max-length", type=int, default=512, help="the exported encoder's window")
    p.add_argument("--max-train-pairs", type=int, default=None, help="candidates trained on (after shuffling)")
    p.add_argument("--max-eval-pairs", type=int, default=2000,
                   help="held-out candidates of the self-supervised kinds evaluated, whole stories (0: all); every held-out "
                        "generated group is evaluated")
    p.add_argument("--no-generated", action="store_true", help="leave out the model-generated negatives (train and validation)")
    p.add_argument("--select-by", choices=SELECT_BY, default=None,
                   help="held-out pair accuracy that picks the best step: on the generated negatives (the default) or on all")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    check_loop_arguments(p, args, positive=("max_length", "scoring_max_length", "max_train_pairs", "train_top_layers", "lora_rank", "lora_alpha"))
    train_union.check_partial_training_arguments(p, args)
    if args.max_eval_pairs < 0:
        p.error("--max-eval-pairs must not be negative (0: all)")
    if args.no_generated and args.select_by == "pair_accuracy_generated":
        p.error("--select-by pair_accuracy_generated needs the generated negatives: drop --no-generated")
    args.select_by = args.select_by or ("pair_accuracy" if args.no_generated else "pair_accuracy_generated")
    if args.export_dir and Path(args.export_dir).exists():
        p.error(f"--export-dir {args.export_dir} exists: give a new folder")
    return args


def first_groups(pairs, limit: int):
    """The first rows of ``pairs`` up to ``limit``, never splitting a story's group (pair accuracy needs its true row)."""
    if not limit or limit >= len(pairs):
        return pairs
    groups = pairs["group"]
    end = limit
    while end < len(groups) and groups[end] == groups[end - 1]:
        end += 1
    return pairs.select(range(end))


def held_out_pairs(pairs: datasets.Dataset, limit: int) -> datasets.Dataset:
    """The first ``limit`` candidates of the self-supervised groups (whole groups) and every generated group."""
    generated = [g.endswith(continuation_pairs.GENERATED_GROUP_SUFFIX) for g in pairs["group"]]
    own = pairs.select([i for i, is_generated in enumerate(generated) if not is_generated])
    rest = pairs.select([i for i, is_generated in enumerate(generated) if is_generated])
    return datasets.concatenate_datasets([first_groups(own, limit), rest])


def tokenise(batch: dict, tokenizer, max_length: int) -> dict:
    ids, types, *_ = encode_pairs(tokenizer, batch["context"], batch["candidate"], max_length)
    out = {"input_ids": ids, "labels": [float(label) for label in batch["label"]]}
    if types is not None:
        out["token_type_ids"] = types
    return out


class Collator:
    """Dynamic padding; labels as a float tensor for the binary cross-entropy."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        types = [f["token_type_ids"] for f in features] if "token_type_ids" in features[0] else None
        batch = pad(self.tokenizer, [f["input_ids"] for f in features], types)
        batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.float32)
        return batch


def new_model(args, path: str) -> UnionModel:
    """UNION's architecture without the reconstruction head, on the backbone, with adapters or top layers trained where asked."""
    model = UnionModel.from_encoder(path, has_reconstruction_head=False, recon_weight=0.0, max_length=args.max_length,
                                    window_stride=args.max_length // 2, metric="continuation_quality")
    if args.train_top_layers:
        model.train_top_layers_only(args.train_top_layers)
    if args.lora_rank:
        model.add_lora_adapters(args.lora_rank, args.lora_alpha)
    return model


def main(argv=None) -> None:
    train(parse_args(argv))


def train(args) -> dict:
    loop = TrainingLoop(LoopArguments.from_namespace(args))
    accelerator = loop.accelerator
    path = backbone_path(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = new_model(args, path)
    with accelerator.main_process_first():
        pairs, dropped = continuation_pairs.build_splits(seed=args.seed, cache_dir=args.cache_dir, generated=not args.no_generated,
                                                         data_dir=Path(args.data_dir) if args.data_dir else None)
        logger.info("leakage check: dropped %s stories whose first sentence opens a Story Cloze item", dropped)
        train_pairs = pairs["train"].shuffle(seed=args.seed)
        if args.max_train_pairs:
            train_pairs = train_pairs.select(range(min(args.max_train_pairs, len(train_pairs))))
        validation = held_out_pairs(pairs["validation"], args.max_eval_pairs)
        columns = list(continuation_pairs.PAIR_FEATURES)
        fn_kwargs = {"tokenizer": tokenizer, "max_length": args.max_length}
        train_set = train_pairs.map(tokenise, batched=True, fn_kwargs=fn_kwargs, remove_columns=columns, desc="tokenising")
        eval_set = validation.map(tokenise, batched=True, fn_kwargs=fn_kwargs, remove_columns=columns, desc="tokenising")

    @torch.inference_mode()
    def evaluate(model, loaders) -> dict:
        model.eval()
        logits, losses = [], []
        for batch in loaders["validation"]:
            out = model(**batch)
            logits.append(accelerator.gather_for_metrics(out.logits.float()))
            losses.append(out.loss.item())
        model.train()
        scores = torch.cat(logits).tolist()  # in the dataset's order: the loaders do not shuffle
        by_kind = continuation_pairs.pair_accuracy_by_kind(validation["group"], validation["kind"], scores)
        return {"pair_accuracy": by_kind.pop("all"), **{f"pair_accuracy_{k}": v for k, v in by_kind.items()},
                "loss": sum(losses) / len(losses)}

    def save_best(model, folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    run = loop.train(model, train_set, Collator(tokenizer), lengths=[len(ids) for ids in train_set["input_ids"]],
                     eval_sets={"validation": eval_set}, evaluate=evaluate, select_by=args.select_by, save_best=save_best)
    results = loop.results(run, args, selected_by=args.select_by, leakage_dropped_story_cloze_stories=dropped,
                           train_pairs=len(train_set), validation_pairs=len(eval_set),
                           train_pairs_by_kind={k: train_pairs["kind"].count(k) for k in continuation_pairs.KINDS})
    loop.write_results(results)
    if accelerator.is_main_process and args.export_dir:
        export(loop.output_dir / "best", Path(args.export_dir), args.scoring_max_length, results,
               base_model=args.base_model_name or args.model_name_or_path)
    accelerator.end_training()
    return results


def export(best_dir: Path, export_dir: Path, max_length: int, results: dict, base_model: str) -> None:
    """fp16 weights (only the adapters or top layers, and the head, where only those trained), the tokenizer,
    and ``encoder_config.json`` (the scoring window and the run's record)."""
    model = UnionModel.from_pretrained(best_dir)
    model.config.encoder._name_or_path = published_backbone_name(model.config.encoder._name_or_path)
    if model.config.trained_top_layers is not None or model.config.lora_rank:
        model.save_trained_parameters(export_dir, base_model=base_model)
    else:
        model.half().save_pretrained(export_dir)
    AutoTokenizer.from_pretrained(best_dir).save_pretrained(export_dir)
    save_encoder_config(export_dir, max_length, trained_max_length=results["args"]["max_length"],
                        best_validation=results["best_validation"], selected_by=results["selected_by"],
                        leakage_dropped_story_cloze_stories=results["leakage_dropped_story_cloze_stories"])
    record = published_record({k: v for k, v in results.items() if k != "history"})
    (export_dir / "training_results.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    main()
