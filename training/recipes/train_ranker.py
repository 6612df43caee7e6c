"""Train a UNION-architecture scorer on ordered pairs of several kinds at once, and keep the step whose worst kind is best.

    python -m storyeval_training.recipes.train_ranker --pairs origin=runs/wp-kinds/origin \\
        --pairs damage=runs/wp-kinds/damage --pairs strength=runs/wp-kinds/strength \\
        --model-name-or-path all-mpnet-base-v2 --lora-rank 16 --learning-rate 2e-4 --output-dir runs/wp-ranker

Each ``--pairs NAME=FOLDER`` is a kind: a saved ``DatasetDict`` of (``human``: the story that should score
higher, ``negative``: the other), e.g. from :mod:`storyeval_training.data.wp_kinds`. The loss is
Bradley-Terry's: ``-log sigmoid(s(higher) - s(lower))`` on the model's logits, so the score is a ranking
learned from every kind's order, not a classifier of one kind's origin. ``--max-train-pairs-per-kind``
balances the kinds, and ``--max-train-pairs KIND=N`` gives one kind another cap (more of its pairs weigh it more in
the loss). Every evaluation measures the pair accuracy of each kind on its own held-out
validation pairs; the best checkpoint is the one whose **lowest** per-kind accuracy is highest
(``min_kind_pair_accuracy``), so that no kind can fail while the mean looks good. A kind with no
validation pairs is refused before anything trains. The model, its options (``--lora-rank``,
``--train-top-layers``) and its export are UNION's (:mod:`storyeval_training.recipes.train_union`).

``--across-story-kinds`` names the kinds whose higher story is an intact story and whose lower one a broken copy
(:mod:`storyeval_training.data.modern_breaks`' pairs, UNION's damage): an intact story should score above *any*
broken copy, not only its own. For them every evaluation also measures the across-story AUC (each higher story
against the lower stories of the kind's other pairs, of about the same length: :func:`storyeval_training.selection.across_story_auc`),
and the kept checkpoint has the highest **worst** of every kind's pair accuracy and these kinds' AUCs
(``worst_kind_measure``). ``--across-story-weight`` adds the same order to the loss: Bradley-Terry over every
(higher story of one pair, lower story of another) of those kinds in a batch. Batches are grouped by each pair's
longer story, so there an intact story meets broken copies shorter than itself: pairs in which length points the
other way come from :mod:`storyeval_training.data.across_pairs`, as kinds of their own.

``--no-regression`` applies the no-regression rule in selection: the starting model is measured on the same
validation pairs before the first step (``start_validation.json`` in the output folder, which a resumed run reads
back), and an evaluation where any kind's pair accuracy or across-story AUC falls more than 0.02 below the start's
is not eligible (``worst_measure_without_regression`` is then -1). Where no eligible evaluation beats the start's
worst measure, the run says so and exports nothing: the checkpoint it would replace is still the better one.

``--anchor-kinds KIND ... --anchor-weight W`` keeps what the starting model scored: its logits of both stories of
each training pair of those kinds are computed before the first step, and the loss adds W times the mean squared
difference from them, so its order across those stories (the 2019-era stories people rated, say) moves only as far as
the other kinds' pairs pull it. ``--anchor-intact-kinds KIND ...`` keeps only the higher (intact) story's logit of
those kinds' pairs: the broken copy is pushed below it while the order across intact stories, length included, stays
the start's, so a cut copy must be told from a shorter intact story by its missing ending, not by its length.

``--length-decorrelation-weight W`` adds W times the squared correlation, over each batch's pairs, of the pair's
margin with how many more tokens its higher story has: cut pairs reward preferring the longer story and insert or
repeat pairs the shorter, so a scorer that learns one kind by length is inverted on the others until it unlearns it.

``--validation-techniques KIND=T1,T2`` selects on the validation pairs of KIND made by those techniques only, so that
selection sees the population the test measures: modern_breaks' ROC-length validation pairs hold three human ROC
stories for each modern one, its test split only modern ones (``machine``).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import datasets
import torch
from torch import nn
from torch.utils.data import DataLoader
from transformers.utils import ModelOutput

from storyeval.checkpoints.resolution import OFFLINE_BACKBONE
from storyeval_training import paths
from storyeval_training.data.named_sets import counts_per_set, pair_folder, set_names, techniques_per_set, with_techniques
from storyeval_training.loop import LoopArguments, TrainingLoop, add_loop_arguments, check_loop_arguments
from storyeval_training.recipes import train_union
from storyeval_training.selection import (
    NO_REGRESSION_TOLERANCE,
    SELECT_BY_NO_REGRESSION,
    across_metadata,
    pairs_across_story_auc,
    start_measures,
    with_rule,
)

logger = logging.getLogger("storyeval_training.recipes.train_ranker")

SELECT_BY = "min_kind_pair_accuracy"
SELECT_BY_ACROSS = "worst_kind_measure"  # with --across-story-kinds: the worst of pair accuracies and across-story AUCs
KIND_MEASURES = ("pair_accuracy_", "across_story_auc_")  # what the no-regression rule compares: every kind's measures


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
    p.add_argument("--max-train-pairs", action="append", default=[], metavar="KIND=N",
                   help="at most N training pairs of KIND instead (more pairs weigh a kind more in the loss); repeatable")
    p.add_argument("--max-eval-pairs-per-kind", type=int, default=200, help="validation pairs of each kind evaluated (0: all)")
    p.add_argument("--across-story-kinds", nargs="+", default=[], metavar="KIND",
                   help="kinds of (intact story, broken copy) pairs: also measured, and selected, on across-story AUC")
    p.add_argument("--across-story-weight", type=float, default=0.0,
                   help="weight of the loss over intact stories and other stories' broken copies in a batch (--across-story-kinds)")
    p.add_argument("--anchor-kinds", nargs="+", default=[], metavar="KIND",
                   help="kinds whose stories keep the starting model's scores (--anchor-weight): what it ranked across them "
                        "before, such as the 2019-era stories people rated, moves only as far as the other kinds need")
    p.add_argument("--anchor-intact-kinds", nargs="+", default=[], metavar="KIND",
                   help="kinds whose higher story only (the intact one) keeps the starting model's score (--anchor-weight): "
                        "its broken copy is pushed down while the order across intact stories, length included, stays")
    p.add_argument("--anchor-weight", type=float, default=0.0,
                   help="weight of the mean squared difference between the model's and the starting model's logits on the "
                        "anchored stories (both of an --anchor-kinds pair, the intact one of an --anchor-intact-kinds pair)")
    p.add_argument("--length-decorrelation-weight", type=float, default=0.0,
                   help="weight of the squared correlation, over a batch's pairs, between each pair's margin and how many more "
                        "tokens its higher story has: a scorer that ranks by length (a cut copy is shorter, an inserted "
                        "sentence makes one longer) is penalised, one that ranks every kind right is not")
    p.add_argument("--raw-kinds", nargs="+", default=[], metavar="KIND",
                   help="kinds whose pairs are raw text (the plot paper's released pairs keep names and their own spacing): "
                        "normalised as scoring normalises a story; the builders' pairs are already in that form")
    p.add_argument("--validation-techniques", action="append", default=[], metavar="KIND=T1,T2",
                   help="select on KIND's validation pairs made by these techniques only (modern_breaks' pairs: 'machine', "
                        "the modern stories its check tests, not the human stories trained beside them); repeatable")
    p.add_argument("--skip-over-length", action="store_true",
                   help="leave out (and count, in pairs_per_kind's over_length) the pairs with a story longer than --max-length "
                        "tokens, instead of refusing them: a smaller backbone's window, say; a story is never cut")
    p.add_argument("--no-regression", action="store_true",
                   help="select only evaluations where no kind's pair accuracy or across-story AUC falls more than 0.02 below "
                        "the starting model's on the same validation pairs; export nothing if none beats the start")
    p.add_argument("--export-dir", default=None, help="also export the best model here (its card is written when it ships)")
    return p


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    try:
        kinds = set_names(args.pairs)
        args.validation_techniques = techniques_per_set(args.validation_techniques, kinds, "validation-techniques")
        args.max_train_pairs = counts_per_set("max-train-pairs", args.max_train_pairs, kinds)
    except ValueError as error:
        p.error(str(error))
    check_loop_arguments(p, args, positive=("max_length", "train_top_layers", "max_train_pairs_per_kind", "lora_rank", "lora_alpha"))
    train_union.check_partial_training_arguments(p, args)
    if args.max_eval_pairs_per_kind < 0:
        p.error("--max-eval-pairs-per-kind must not be negative (0: all)")
    for option in ("across_story_kinds", "raw_kinds", "anchor_kinds", "anchor_intact_kinds"):
        unknown = sorted(set(getattr(args, option)) - set(kinds))
        if unknown:
            p.error(f"--{option.replace('_', '-')} {', '.join(unknown)}: not a --pairs kind ({', '.join(kinds)})")
    if args.across_story_weight < 0 or (args.across_story_weight and len(args.across_story_kinds) == 0):
        p.error("--across-story-weight must not be negative, and needs --across-story-kinds")
    if args.length_decorrelation_weight < 0:
        p.error("--length-decorrelation-weight must not be negative")
    if args.anchor_weight < 0 or bool(args.anchor_weight) != bool(args.anchor_kinds or args.anchor_intact_kinds):
        p.error("--anchor-weight must not be negative; give it with --anchor-kinds or --anchor-intact-kinds, and they with it")
    if both := sorted(set(args.anchor_kinds) & set(args.anchor_intact_kinds)):
        p.error(f"--anchor-kinds and --anchor-intact-kinds both name {', '.join(both)}: a kind is anchored one way")
    args.kinds = kinds
    args.recon_weight = 0.0  # the ranking loss has no reconstruction term
    return args


def load_kinds(args) -> dict[str, datasets.DatasetDict]:
    """Each kind's pairs (validation narrowed by ``--validation-techniques``); refused before training when a kind has no
    training or no validation pairs."""
    kinds = {name: train_union.load_pair_folder(str(folder), f"--pairs {name}") for name, folder in args.pairs}
    for name, techniques in args.validation_techniques.items():
        if "validation" in kinds[name]:
            kinds[name]["validation"] = with_techniques(kinds[name]["validation"], techniques, name)
    narrowed = {name: f", --validation-techniques {name}={','.join(techniques)}" for name, techniques in args.validation_techniques.items()}
    empty = [f"{name} ({split}{narrowed.get(name, '') if split == 'validation' else ''})" for name, pairs in kinds.items()
             for split in ("train", "validation") if split not in pairs or len(pairs[split]) == 0]
    if empty:
        raise ValueError(f"kinds with no pairs to train on or select on: {', '.join(empty)}")
    return kinds


def sample(rows: datasets.Dataset, limit: int | None, seed: int) -> datasets.Dataset:
    return rows.shuffle(seed=seed).select(range(min(limit, len(rows)))) if limit else rows


def normalised(rows: datasets.Dataset, delexicalize: bool) -> datasets.Dataset:
    """Raw pairs in the form scoring gives a story. Only for raw kinds: the normalisation is not idempotent (a
    closing '' read again becomes an opening ``), so normalised pairs are left as they are."""
    return train_union.normalise_pairs(rows, delexicalize, "normalising raw pairs")


class PairsRefused(ValueError, paths.RunRefused):
    """The pairs cannot be trained on as asked (a story over the window without ``--skip-over-length``, or none left
    with it): ``main`` reports it in one line."""


def to_pair_examples(batch: dict, tokenizer, kind: int, across: bool = False) -> dict:
    """Both stories of each pair, tokenised whole: :func:`within_window` then refuses or leaves out a story longer than
    the window, which is never cut."""
    out = {f"{side}_input_ids": tokenizer(batch[side], truncation=False, verbose=False)["input_ids"] for side in ("human", "negative")}
    out["kind"] = [kind] * len(batch["human"])
    out["across"] = [across] * len(batch["human"])
    return out


def within_window(examples: datasets.Dataset, max_length: int, skip: bool, kind: str, split: str) -> list[int]:
    """The indices of ``examples`` (a kind's pairs of a split) whose stories both fit ``max_length`` tokens; without
    ``skip`` (or when none would be left) a story over it is refused, naming how many and the longest."""
    what = f"{kind} ({split})"
    lengths = [max(len(h), len(n)) for h, n in zip(examples["human_input_ids"], examples["negative_input_ids"])]
    fits = [i for i, n in enumerate(lengths) if n <= max_length]
    if len(fits) < len(lengths) and not skip:
        raise PairsRefused(f"--pairs {what}: {len(lengths) - len(fits)} of {len(lengths)} pairs have a story over --max-length "
                           f"{max_length} (longest {max(lengths)} tokens): raise --max-length within the model's window, or give "
                           "--skip-over-length to leave them out")
    if not fits:
        raise PairsRefused(f"--pairs {what}: every pair has a story over --max-length {max_length}: nothing left to "
                           f"{'train on' if split == 'train' else 'select on'}")
    return fits


class PairCollator:
    """Both sides of a batch of pairs padded to one width: the higher stories first, then the lower ones (and, for
    training pairs with the starting model's logits, those in the same layout: NaN where a pair is not anchored)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        sides = [{"input_ids": f[f"{side}_input_ids"]} for side in ("human", "negative") for f in features]
        batch = self.tokenizer.pad(sides, return_tensors="pt", pad_to_multiple_of=8)
        batch["kind"] = torch.tensor([f["kind"] for f in features])
        batch["across"] = torch.tensor([bool(f.get("across", False)) for f in features])
        if all("human_anchor" in f for f in features):
            batch["anchor"] = torch.tensor([f[f"{side}_anchor"] for side in ("human", "negative") for f in features], dtype=torch.float32)
        return batch


NOT_ANCHORED = float("nan")


def anchor_columns(kind_of: list[int], anchored: list[int], found: dict[str, list[float]], intact_only: set[int]) -> dict[str, list[float]]:
    """``human_anchor`` and ``negative_anchor`` for every training pair: the start's logits ``found`` for the pairs at
    ``anchored`` (in that order), NaN elsewhere and on the lower story of a pair whose kind is in ``intact_only``."""
    columns = {}
    for column, logits in found.items():
        values = [NOT_ANCHORED] * len(kind_of)
        for i, logit in zip(anchored, logits):
            if not (column == "negative_anchor" and kind_of[i] in intact_only):
                values[i] = logit
        columns[column] = values
    return columns


@torch.inference_mode()
def anchor_logits(model: nn.Module, rows: datasets.Dataset, collator, batch_size: int) -> dict[str, list[float]]:
    """The starting model's logits of both stories of every pair in ``rows`` (``human_anchor``, ``negative_anchor``),
    in order: what ``--anchor-kinds`` keep. Computed before training (where the model is, before the loop places it),
    so a resumed run computes the same ones."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    human, negative = [], []
    for batch in DataLoader(rows, batch_size=batch_size, collate_fn=collator):
        logits = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device)).logits.float().cpu()
        half = logits.shape[0] // 2
        human += logits[:half].tolist()
        negative += logits[half:].tolist()
    model.train(was_training)
    return {"human_anchor": human, "negative_anchor": negative}


@dataclass
class RankerOutput(ModelOutput):
    loss: torch.Tensor | None = None
    margins: torch.Tensor | None = None
    higher: torch.Tensor | None = None
    lower: torch.Tensor | None = None


def length_correlation(margins: torch.Tensor, length_differences: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of the pairs' margins with how many more tokens the higher story has than the lower one:
    near 1 when a scorer ranks a pair by which story is longer (what cut pairs reward and insert or repeat pairs
    punish), near 0 when it ranks every kind right whatever the lengths. Zero where it is undefined (fewer than three
    pairs, or no spread). Written out because torch.corrcoef gives NaN, not a usable gradient, on a constant input."""
    if margins.numel() < 3:
        return margins.new_zeros(())
    x = margins - margins.mean()
    y = length_differences.to(margins.dtype)
    y = y - y.mean()
    spread = x.norm() * y.norm()
    return (x * y).sum() / spread if spread > 0 else margins.new_zeros(())


def across_story_loss(higher: torch.Tensor, lower: torch.Tensor, across: torch.Tensor) -> torch.Tensor:
    """Bradley-Terry over every (higher story of one pair, lower story of another pair) among the ``across`` pairs;
    zero with fewer than two of them."""
    h, low = higher[across], lower[across]
    if h.numel() < 2:
        return higher.new_zeros(())
    other = ~torch.eye(h.numel(), dtype=torch.bool, device=h.device)
    return nn.functional.softplus(-(h[:, None] - low[None, :]))[other].mean()


class PairwiseRanker(nn.Module):
    """A scorer and the Bradley-Terry loss over a batch laid out as [higher stories; lower stories] (plus, with
    ``across_weight``, :func:`across_story_loss` over the pairs marked ``across``, and with ``anchor_weight`` the mean
    squared difference from the starting model's logits, ``anchor``, where they are given)."""

    def __init__(self, model: nn.Module, across_weight: float = 0.0, anchor_weight: float = 0.0, length_weight: float = 0.0):
        super().__init__()
        self.model = model
        self.across_weight = across_weight
        self.anchor_weight = anchor_weight
        self.length_weight = length_weight

    def forward(self, input_ids, attention_mask, kind=None, across=None, anchor=None) -> RankerOutput:
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits.float()
        half = logits.shape[0] // 2
        higher, lower = logits[:half], logits[half:]
        margins = higher - lower
        loss = nn.functional.softplus(-margins).mean()
        if self.across_weight and across is not None:
            loss = loss + self.across_weight * across_story_loss(higher, lower, across)
        if self.anchor_weight and anchor is not None and (kept := ~torch.isnan(anchor)).any():
            loss = loss + self.anchor_weight * (logits[kept] - anchor[kept]).pow(2).mean()
        if self.length_weight:
            tokens = attention_mask.sum(dim=1)
            loss = loss + self.length_weight * length_correlation(margins, tokens[:half] - tokens[half:]).pow(2)
        return RankerOutput(loss=loss, margins=margins, higher=higher, lower=lower)


@torch.inference_mode()
def evaluate(model, loader, accelerator, kind_names: list[str], across: dict[str, dict] | None = None) -> dict:
    """Each kind's pair accuracy (a tie counts half), their minimum and mean, and the loss; with ``across`` (kind ->
    its validation pairs' ``words`` and ``stories``, in loader order), those kinds' across-story AUCs and the worst
    of every measure."""
    model.eval()
    outputs = []
    for batch in loader:
        out = model(**batch)
        outputs.append(accelerator.gather_for_metrics((out.higher, out.lower, batch["kind"])))
    model.train()
    higher, lower, kinds = (torch.cat([o[i] for o in outputs]) for i in range(3))
    margins = higher - lower
    wins = (margins > 0).float() + 0.5 * (margins == 0).float()
    per_kind = {name: wins[kinds == index].mean().item() for index, name in enumerate(kind_names) if (kinds == index).any()}
    metrics = {f"pair_accuracy_{name}": value for name, value in per_kind.items()}
    metrics.update({SELECT_BY: min(per_kind.values()), "mean_kind_pair_accuracy": sum(per_kind.values()) / len(per_kind),
                    "loss": nn.functional.softplus(-margins).mean().item()})
    if across:
        measures = list(per_kind.values())
        for name, meta in across.items():
            chosen = kinds == kind_names.index(name)
            auc = pairs_across_story_auc(higher[chosen].tolist(), lower[chosen].tolist(), meta)
            if auc is not None:
                metrics[f"across_story_auc_{name}"] = auc
                measures.append(auc)
        metrics[SELECT_BY_ACROSS] = min(measures)
    return metrics


@paths.one_line_errors  # pairs or a start model that cannot be trained on as asked, found before the first step
def main(argv=None) -> None:
    args = parse_args(argv)
    try:  # a missing folder, or a kind left without pairs: one line, before any model loads
        kinds = load_kinds(args)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"error: {error}")
    train(args, kinds)


def train(args, kinds: dict[str, datasets.DatasetDict] | None = None) -> dict:
    """Train and select; ``kinds`` are :func:`load_kinds`' (loaded here when not given)."""
    loop = TrainingLoop(LoopArguments.from_namespace(args))
    accelerator = loop.accelerator
    model, tokenizer = train_union.build_model(args)
    with accelerator.main_process_first():
        kinds = load_kinds(args) if kinds is None else kinds
        train_parts, eval_parts, counts, across = [], [], {}, {}
        for index, (name, pairs) in enumerate(kinds.items()):
            fn_kwargs = {"tokenizer": tokenizer, "kind": index, "across": name in args.across_story_kinds}
            chosen = {"train": sample(pairs["train"], args.max_train_pairs.get(name, args.max_train_pairs_per_kind), args.seed),
                      "validation": sample(pairs["validation"], args.max_eval_pairs_per_kind or None, args.seed)}
            if name in args.raw_kinds:
                chosen = {split: normalised(rows, model.config.delexicalize) for split, rows in chosen.items()}
            tokenised, over_length = {}, {}
            for split, rows in chosen.items():  # the whole stories tokenised once, then kept within the window or refused
                examples = rows.map(to_pair_examples, batched=True, fn_kwargs=fn_kwargs, remove_columns=rows.column_names,
                                    desc=f"tokenising {name} ({split})")
                fits = within_window(examples, args.max_length, args.skip_over_length, name, split)
                if len(fits) < len(rows):
                    examples, chosen[split] = examples.select(fits), rows.select(fits)
                if args.skip_over_length:
                    over_length[split] = len(rows) - len(fits)
                tokenised[split] = examples
            if name in args.across_story_kinds:  # the validation rows as kept, which the tokenised examples follow
                across[name] = across_metadata(chosen["validation"])
            train_parts.append(tokenised["train"])
            eval_parts.append(tokenised["validation"])
            counts[name] = {split: len(rows) for split, rows in chosen.items()} | ({"over_length": over_length} if over_length else {})
        train_set = datasets.concatenate_datasets(train_parts)
        validation = datasets.concatenate_datasets(eval_parts)
    names = list(kinds)
    logger.info("pairs per kind: %s", counts)
    if args.anchor_kinds or args.anchor_intact_kinds:  # the start's logits of the anchored stories, NaN for the others
        anchor_indices = {names.index(name) for name in [*args.anchor_kinds, *args.anchor_intact_kinds]}
        intact_only = {names.index(name) for name in args.anchor_intact_kinds}
        kind_of = train_set["kind"]
        anchored = [i for i, kind in enumerate(kind_of) if kind in anchor_indices]
        logger.info("scoring %d training pairs of %s with the starting model (their anchors)", len(anchored),
                    ", ".join([*args.anchor_kinds, *args.anchor_intact_kinds]))
        found = anchor_logits(model, train_set.select(anchored), PairCollator(tokenizer), args.per_device_eval_batch_size)
        for column, values in anchor_columns(kind_of, anchored, found, intact_only).items():
            train_set = train_set.add_column(column, values)
    ranker = PairwiseRanker(model, args.across_story_weight, args.anchor_weight, args.length_decorrelation_weight)
    select_by = SELECT_BY_ACROSS if across else SELECT_BY

    def evaluate_model(m, loader) -> dict:
        return evaluate(m, loader, accelerator, names, across)

    start, measure = None, select_by
    if args.no_regression:
        def measure_start() -> dict:  # only where no start is saved: a resumed run prepares no loader for it
            loader = DataLoader(validation, batch_size=args.per_device_eval_batch_size, collate_fn=PairCollator(tokenizer))
            return evaluate_model(ranker.to(accelerator.device), accelerator.prepare(loader))

        start = start_measures(args.output_dir, bool(args.resume_from_checkpoint), measure_start, accelerator.is_main_process)
        logger.info("start %s", json.dumps(start))
        select_by = SELECT_BY_NO_REGRESSION

    def save_best(wrapper, folder: Path) -> None:
        wrapper.model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    run = loop.train(ranker, train_set, PairCollator(tokenizer),
                     lengths=[max(len(h), len(n)) for h, n in zip(train_set["human_input_ids"], train_set["negative_input_ids"])],
                     eval_sets={"validation": validation},
                     evaluate=lambda m, loaders: (with_rule(evaluate_model(m, loaders["validation"]), start, measure, KIND_MEASURES) if start
                                                  else evaluate_model(m, loaders["validation"])),
                     select_by=select_by, save_best=save_best)
    args.pairs = [f"{name}={folder}" for name, folder in args.pairs]  # as typed, for the JSON record
    fields = {"selected_by": select_by, "pairs_per_kind": counts}
    export = True
    if start is not None:
        # the start itself is the incumbent: a run that kept no kind within the rule, or did not beat its worst, replaces nothing
        export = run.best is not None and run.best[select_by] > start[measure]
        fields.update(start_validation=start, beats_start=export)
        if not export:
            logger.warning("no evaluation kept every kind within %.2f of the start and beat its %s (%.4f): nothing exported",
                           NO_REGRESSION_TOLERANCE, measure, start[measure])
    results = loop.results(run, args, **fields)
    loop.write_results(results)
    if accelerator.is_main_process and args.export_dir and export:
        train_union.export(loop.output_dir / "best", Path(args.export_dir), results, write_card=None,
                           base_model=args.base_model_name or args.model_name_or_path)
    accelerator.end_training()
    return results


if __name__ == "__main__":
    main()
