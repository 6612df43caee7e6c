"""Train a UNION-architecture scorer on ordered pairs of several kinds at once, and keep the step whose worst kind is best.

    python -m storyeval_training.recipes.train_ranker --pairs origin=runs/wp-kinds/origin \\
        --pairs damage=runs/wp-kinds/damage --pairs strength=runs/wp-kinds/strength \\
        --model-name-or-path all-mpnet-base-v2 --lora-rank 16 --learning-rate 2e-4 --output-dir runs/wp-ranker

Each ``--pairs NAME=FOLDER`` is a kind: a saved ``DatasetDict`` of (``human``: the story that should score
higher, ``negative``: the other), e.g. from :mod:`storyeval_training.data.wp_kinds`. The loss is
Bradley-Terry's: ``-log sigmoid(s(higher) - s(lower))`` on the model's logits, so the score is a ranking
learned from every kind's order, not a classifier of one kind's origin. ``--max-train-pairs-per-kind``
balances the kinds. Every evaluation measures the pair accuracy of each kind on its own held-out
validation pairs; the best checkpoint is the one whose **lowest** per-kind accuracy is highest
(``min_kind_pair_accuracy``), so that no kind can fail while the mean looks good. A kind with no
validation pairs is refused before anything trains. The model, its options (``--lora-rank``,
``--train-top-layers``) and its export are UNION's (:mod:`storyeval_training.recipes.train_union`).
"""
from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import datasets
import torch
from torch import nn
from transformers.utils import ModelOutput

from storyeval.checkpoints.resolution import OFFLINE_BACKBONE
from storyeval_training.data.named_sets import pair_folder, set_names
from storyeval_training.loop import LoopArguments, TrainingLoop, add_loop_arguments, check_loop_arguments
from storyeval_training.recipes import train_union

logger = logging.getLogger("storyeval_training.recipes.train_ranker")

SELECT_BY = "min_kind_pair_accuracy"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Train a scorer on ordered pairs of several kinds (Bradley-Terry), selected on the worst kind.")
    p.add_argument("--pairs", type=pair_folder, action="append", required=True, metavar="KIND=FOLDER",
                   help="a kind's pairs (train and validation splits), repeatable")
    p.add_argument("--model-name-or-path", default=OFFLINE_BACKBONE, help="encoder to start from, or a UNION checkpoint")
    p.add_argument("--output-dir", required=True)
    add_loop_arguments(p, per_device_train_batch_size=4, per_device_eval_batch_size=8)
    p.add_argument("--max-length", type=int, default=512, help="tokens per story in training (the scoring window too)")
    train_union.add_partial_training_arguments(p)
    p.add_argument("--max-train-pairs-per-kind", type=int, default=None, help="at most N training pairs of each kind (a seeded sample)")
    p.add_argument("--max-eval-pairs-per-kind", type=int, default=200, help="validation pairs of each kind evaluated (0: all)")
    p.add_argument("--export-dir", default=None, help="also export the best model here (its card is written when it ships)")
    return p


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    try:
        kinds = set_names(args.pairs)
    except ValueError as error:
        p.error(str(error))
    check_loop_arguments(p, args, positive=("max_length", "train_top_layers", "max_train_pairs_per_kind", "lora_rank", "lora_alpha"))
    train_union.check_partial_training_arguments(p, args)
    if args.max_eval_pairs_per_kind < 0:
        p.error("--max-eval-pairs-per-kind must not be negative (0: all)")
    args.kinds = kinds
    args.recon_weight = 0.0  # the ranking loss has no reconstruction term
    return args


def load_kinds(args) -> dict[str, datasets.DatasetDict]:
    """Each kind's pairs; refused before training when a kind has no training or no validation pairs."""
    kinds = {name: train_union.load_pair_folder(str(folder), f"--pairs {name}") for name, folder in args.pairs}
    empty = [f"{name} ({split})" for name, pairs in kinds.items() for split in ("train", "validation")
             if split not in pairs or len(pairs[split]) == 0]
    if empty:
        raise ValueError(f"kinds with no pairs to train on or select on: {', '.join(empty)}")
    return kinds


def sample(rows: datasets.Dataset, limit: int | None, seed: int) -> datasets.Dataset:
    return rows.shuffle(seed=seed).select(range(min(limit, len(rows)))) if limit else rows


def to_pair_examples(batch: dict, tokenizer, max_length: int, kind: int) -> dict:
    """Both stories of each pair, tokenised; a story longer than the window is refused, never cut."""
    out = {}
    for side in ("human", "negative"):
        ids = tokenizer(batch[side], truncation=False, verbose=False)["input_ids"]
        too_long = [len(i) for i in ids if len(i) > max_length]
        if too_long:
            raise ValueError(f"{len(too_long)} stories exceed --max-length {max_length} (longest {max(too_long)} tokens)")
        out[f"{side}_input_ids"] = ids
    out["kind"] = [kind] * len(batch["human"])
    return out


class PairCollator:
    """Both sides of a batch of pairs padded to one width: the higher stories first, then the lower ones."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        sides = [{"input_ids": f[f"{side}_input_ids"]} for side in ("human", "negative") for f in features]
        batch = self.tokenizer.pad(sides, return_tensors="pt", pad_to_multiple_of=8)
        batch["kind"] = torch.tensor([f["kind"] for f in features])
        return batch


@dataclass
class RankerOutput(ModelOutput):
    loss: torch.Tensor | None = None
    margins: torch.Tensor | None = None


class PairwiseRanker(nn.Module):
    """A scorer and the Bradley-Terry loss over a batch laid out as [higher stories; lower stories]."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, kind=None) -> RankerOutput:
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits.float()
        half = logits.shape[0] // 2
        margins = logits[:half] - logits[half:]
        return RankerOutput(loss=nn.functional.softplus(-margins).mean(), margins=margins)


@torch.inference_mode()
def evaluate(model, loader, accelerator, kind_names: list[str]) -> dict:
    """Each kind's pair accuracy (a tie counts half), their minimum and mean, and the loss."""
    model.eval()
    margins, kinds = [], []
    for batch in loader:
        out = model(**batch)
        gathered = accelerator.gather_for_metrics((out.margins, batch["kind"]))
        margins.append(gathered[0])
        kinds.append(gathered[1])
    model.train()
    margins, kinds = torch.cat(margins), torch.cat(kinds)
    wins = (margins > 0).float() + 0.5 * (margins == 0).float()
    per_kind = {name: wins[kinds == index].mean().item() for index, name in enumerate(kind_names) if (kinds == index).any()}
    metrics = {f"pair_accuracy_{name}": value for name, value in per_kind.items()}
    metrics.update({SELECT_BY: min(per_kind.values()), "mean_kind_pair_accuracy": sum(per_kind.values()) / len(per_kind),
                    "loss": nn.functional.softplus(-margins).mean().item()})
    return metrics


def main(argv=None) -> None:
    train(parse_args(argv))


def train(args) -> dict:
    loop = TrainingLoop(LoopArguments.from_namespace(args))
    accelerator = loop.accelerator
    model, tokenizer = train_union.build_model(args)
    with accelerator.main_process_first():
        kinds = load_kinds(args)
        train_parts, eval_parts, counts = [], [], {}
        for index, (name, pairs) in enumerate(kinds.items()):
            fn_kwargs = {"tokenizer": tokenizer, "max_length": args.max_length, "kind": index}
            chosen = {"train": sample(pairs["train"], args.max_train_pairs_per_kind, args.seed),
                      "validation": sample(pairs["validation"], args.max_eval_pairs_per_kind or None, args.seed)}
            tokenised = {split: rows.map(to_pair_examples, batched=True, fn_kwargs=fn_kwargs, remove_columns=rows.column_names,
                                         desc=f"tokenising {name} ({split})") for split, rows in chosen.items()}
            train_parts.append(tokenised["train"])
            eval_parts.append(tokenised["validation"])
            counts[name] = {split: len(rows) for split, rows in chosen.items()}
        train_set = datasets.concatenate_datasets(train_parts)
        validation = datasets.concatenate_datasets(eval_parts)
    names = list(kinds)
    logger.info("pairs per kind: %s", counts)
    ranker = PairwiseRanker(model)

    def save_best(wrapper, folder: Path) -> None:
        wrapper.model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    run = loop.train(ranker, train_set, PairCollator(tokenizer),
                     lengths=[max(len(h), len(n)) for h, n in zip(train_set["human_input_ids"], train_set["negative_input_ids"])],
                     eval_sets={"validation": validation}, evaluate=lambda m, loaders: evaluate(m, loaders["validation"], accelerator, names),
                     select_by=SELECT_BY, save_best=save_best)
    args.pairs = [f"{name}={folder}" for name, folder in args.pairs]  # as typed, for the JSON record
    results = loop.results(run, args, selected_by=SELECT_BY, pairs_per_kind=counts)
    loop.write_results(results)
    if accelerator.is_main_process and args.export_dir:
        train_union.export(loop.output_dir / "best", Path(args.export_dir), results, write_card=None,
                           base_model=args.base_model_name or args.model_name_or_path)
    accelerator.end_training()
    return results


if __name__ == "__main__":
    main()
