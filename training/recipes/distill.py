"""Distil a base-tier checkpoint into a fast one on :mod:`storyeval_training.loop`: the student learns the teacher's logit.

    python -m storyeval_training.recipes.distill --student hub_cards/union-roc \\
        --transfer-dir runs/transfer --teacher-scores runs/transfer/union-roc-base.jsonl \\
        --selection-pairs-dir runs/plot-pairs/pairs --max-transfer-stories 20000 --output-dir runs/distil-union

The student keeps the architecture of the checkpoint it starts from (a shipped MiniLM ``roc`` config, every
weight trained), so int8, the torch-free cold start and every consumer take it unchanged. Its targets are
the teacher's logits of the transfer stories (:mod:`storyeval_training.data.transfer`), which need no human
label: ``--loss mse`` regresses on the logit, ``--loss kl`` matches the teacher's probability (cross-entropy
with the soft target), and ``--hard-label-weight`` mixes in the stories' own labels (human 1, perturbed or
generated 0; a machine-written WP window has none). Several transfer files (``--transfer-dir A B
--teacher-scores A.jsonl B.jsonl``, one cache each, all of one teacher) are learned from at once, so that a new kind
of story joins a file the teacher has already scored without scoring that file again.

Selection, on held-out data only: the Spearman correlation of the student's logits with the teacher's on the
transfer file's ``heldout`` stories, and the pair accuracy on ``--selection-pairs-dir``'s validation pairs
(model-written negatives, e.g. ``storyeval-train-plot-coherence --pairs-only``); the best evaluation has the
highest mean of the two (``selection_score``). With several kinds of pairs (``--selection-pairs NAME=FOLDER``,
repeatable, e.g. the WP kinds of :mod:`storyeval_training.data.wp_kinds`), the pair accuracy in that mean is the
worst kind's, so that a student that fails one kind is not selected for the others; ``--across-story-sets`` adds those
sets' across-story AUCs to that worst (a student must rank an intact story above other stories' broken copies too,
not only above its own), and ``--selection-techniques`` narrows a set to the pairs a check tests (the modern-text
check's ``machine`` pairs). ``--no-regression`` selects as ``train_ranker --no-regression`` does: the student's
starting checkpoint (the one it would replace) is measured first (``start_validation.json``, read back on resume), an
evaluation where any set's pair accuracy or across-story AUC falls more than 0.02 below it is not eligible, and a run
where no eligible evaluation beats the start's ``selection_score`` exports nothing. ``--evaluate-only`` gives any
checkpoint's figures on both (the student's starting point, say) by the same code, without training, into
``<output-dir>/selection_signals.json``.
"""
from __future__ import annotations

import argparse
import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import torch
from scipy import stats
from torch import nn
from torch.utils.data import DataLoader
from transformers import AutoTokenizer
from transformers.utils import ModelOutput

from storyeval.models import UnionModel
from storyeval.text import normalize_story
from storyeval_training.data.named_sets import checked_pair_folders, pair_folder, techniques_per_set, with_techniques
from storyeval_training.data.transfer import STORIES_FILE, TEACHER_FIELDS, file_sha256, read_cache, read_stories, teacher_fields, training_commit
from storyeval_training.loop import LoopArguments, TrainingLoop, add_loop_arguments, check_loop_arguments
from storyeval_training.recipes import train_union
from storyeval_training.selection import (
    NO_REGRESSION_TOLERANCE,
    SELECT_BY_NO_REGRESSION,
    across_metadata,
    length_spearman,
    pairs_across_story_auc,
    start_measures,
    with_rule,
)

logger = logging.getLogger("storyeval_training.recipes.distill")

SELECT_BY = "selection_score"
# what the no-regression rule compares: each selection set's pair accuracy (and, of one set, the accuracy itself) and AUC
SET_MEASURES = ("selection_pair_accuracy", "selection_across_story_auc_")
SIGNALS_FILE = "selection_signals.json"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Distil a teacher checkpoint into a student.")
    p.add_argument("--student", required=True, help="the checkpoint the student starts from (its architecture and config)")
    p.add_argument("--teacher", default=None, help="the teacher's folder, checked against each cache's header (default: trust "
                                                   "the teacher a cache names; its transfer file's hash is checked either way)")
    p.add_argument("--transfer-dir", required=True, nargs="+",
                   help="from `python -m storyeval_training.data.transfer build`; several: their stories together")
    p.add_argument("--teacher-scores", required=True, nargs="+",
                   help="the teacher's cache of each --transfer-dir, in the same order, from `transfer score`")
    p.add_argument("--max-transfer-stories", type=int, default=None,
                   help="train on the first N training stories of each transfer file (all must be scored; default: all scored)")
    p.add_argument("--selection-pairs-dir", default=None, help="held-out model-written pairs (a saved DatasetDict's validation split)")
    p.add_argument("--selection-pairs", action="append", default=[], type=pair_folder, metavar="NAME=FOLDER",
                   help="instead: several kinds of held-out pairs (repeatable); the worst kind's pair accuracy selects")
    p.add_argument("--max-selection-pairs-per-set", type=int, default=None, help="a seeded sample of each set's validation pairs")
    p.add_argument("--across-story-sets", nargs="+", default=[], metavar="NAME",
                   help="--selection-pairs sets of (intact story, broken copy) pairs whose across-story AUC (length-matched, "
                        "storyeval_training.selection) also selects: the worst of every set's pair accuracy and these AUCs")
    p.add_argument("--selection-techniques", action="append", default=[], metavar="NAME=T1,T2",
                   help="select on set NAME's pairs made by these techniques only (the modern-text check's pairs: 'machine', "
                        "the modern stories its test split holds; its validation split is mostly human ROC stories); repeatable")
    p.add_argument("--no-regression", action="store_true",
                   help="select under the no-regression rule: --student is measured first, an evaluation where any set's pair "
                        "accuracy or across-story AUC falls more than 0.02 below it is not eligible, and a run where none "
                        "eligible beats its selection score exports nothing")
    p.add_argument("--loss", choices=["mse", "kl"], default="mse")
    p.add_argument("--hard-label-weight", type=float, default=0.0, help="weight of the stories' own labels beside the teacher's")
    p.add_argument("--length-neutral-targets", action="store_true",
                   help="learn the teacher's logit less its linear trend in log(words) over the training stories, so that the "
                        "student does not learn length from the teacher (the held-out signals still use the teacher's own logits)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--export-dir", default=None, help="also export the best student here (fp16; its card is written when it ships)")
    p.add_argument("--evaluate-only", action="store_true",
                   help=f"train nothing: write --student's selection signals to <output-dir>/{SIGNALS_FILE} (must not exist)")
    add_loop_arguments(p, per_device_train_batch_size=32, learning_rate=5e-5, num_train_epochs=2, eval_steps=250,
                       checkpointing_steps=250)
    return p


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    if not (Path(args.student) / "config.json").is_file():
        p.error(f"--student {args.student}: no checkpoint there (config.json)")
    if len(args.teacher_scores) != len(args.transfer_dir):
        p.error(f"{len(args.transfer_dir)} --transfer-dir and {len(args.teacher_scores)} --teacher-scores: give one cache per transfer folder")
    if len({Path(folder).resolve() for folder in args.transfer_dir}) < len(args.transfer_dir):
        p.error("--transfer-dir names one folder twice: its stories would count twice")
    for cache in args.teacher_scores:
        if not Path(cache).is_file():
            p.error(f"--teacher-scores {cache}: no such file")
    if bool(args.selection_pairs_dir) == bool(args.selection_pairs):
        p.error("give --selection-pairs-dir or --selection-pairs (one or more), not both")
    if args.selection_pairs_dir and not (Path(args.selection_pairs_dir) / "dataset_dict.json").is_file():
        p.error(f"--selection-pairs-dir {args.selection_pairs_dir}: no saved DatasetDict there (dataset_dict.json)")
    try:
        names = checked_pair_folders(args.selection_pairs, "--selection-pairs")
        args.selection_techniques = techniques_per_set(args.selection_techniques, names, "selection-techniques", "--selection-pairs")
    except ValueError as error:
        p.error(str(error))
    unknown = sorted(set(args.across_story_sets) - set(names))
    if unknown:
        p.error(f"--across-story-sets {', '.join(unknown)}: not a --selection-pairs set ({', '.join(names) or 'none given'})")
    if args.hard_label_weight < 0:
        p.error("--hard-label-weight must not be negative")
    if args.no_regression and args.evaluate_only:
        p.error("--no-regression selects among a run's evaluations: --evaluate-only trains nothing")
    if args.evaluate_only and (Path(args.output_dir) / SIGNALS_FILE).exists():
        p.error(f"{Path(args.output_dir) / SIGNALS_FILE} exists: give another --output-dir")
    check_loop_arguments(p, args, positive=("max_transfer_stories", "max_selection_pairs_per_set"))
    return args


@dataclass
class DistillationOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None


class DistillationObjective(nn.Module):
    """The student and its loss against the teacher's logits (and, weighted, the stories' own labels)."""

    def __init__(self, student: UnionModel, loss: str, hard_label_weight: float):
        super().__init__()
        self.student, self.loss_kind, self.hard_label_weight = student, loss, hard_label_weight

    def forward(self, input_ids, attention_mask, teacher_logits=None, labels=None) -> DistillationOutput:
        logits = self.student(input_ids=input_ids, attention_mask=attention_mask).logits
        if teacher_logits is None:
            return DistillationOutput(logits=logits)
        if self.loss_kind == "mse":
            loss = nn.functional.mse_loss(logits.float(), teacher_logits.float())
        else:
            loss = nn.functional.binary_cross_entropy_with_logits(logits.float(), torch.sigmoid(teacher_logits.float()))
        if self.hard_label_weight and labels is not None and (labels >= 0).any():
            known = labels >= 0
            hard = nn.functional.binary_cross_entropy_with_logits(logits[known].float(), labels[known].float())
            loss = loss + self.hard_label_weight * hard
        return DistillationOutput(loss=loss, logits=logits)


def scored_rows(transfer_dir: Path, cache: Path, teacher: dict | None, max_stories: int | None) -> tuple[list, list, dict, dict, int]:
    """One transfer file's (training rows, held-out rows) with the teacher's logits, the cache's header as checked
    (against ``teacher``, the teacher's fields, when given; else the teacher the cache names), the stories left out as
    longer than the teacher's window, and the file's stories not used. The stories' hash is always checked."""
    rows = read_stories(transfer_dir)
    if teacher is None:
        header = json.loads(cache.read_text(encoding="utf-8").split("\n", 1)[0])
        teacher = {field: header.get(field) for field in TEACHER_FIELDS}
    identity = {**teacher, "transfer_sha256": file_sha256(transfer_dir / STORIES_FILE)}
    scores = read_cache(cache, identity)
    heldout = [row for row in rows if row["split"] == "heldout"]
    train = [row for row in rows if row["split"] == "train"]
    missing = [row["id"] for row in heldout if row["id"] not in scores]
    if missing:
        raise ValueError(f"{cache}: {len(missing)} held-out stories are not scored yet; score them first")
    scored = 0
    while scored < len(train) and train[scored]["id"] in scores:  # the scored prefix (the scorer goes in file order)
        scored += 1
    wanted = max_stories or scored
    if wanted > scored:
        raise ValueError(f"--max-transfer-stories {wanted}: only the first {scored} training stories of {transfer_dir} are scored")
    train = train[:wanted]
    # stories the teacher scores over several windows have no one logit to learn (transfer.single_window_logits)
    longer = {"train": sum(scores[row["id"]] is None for row in train), "heldout": sum(scores[row["id"]] is None for row in heldout)}
    train = [{**row, "teacher_logit": scores[row["id"]]} for row in train if scores[row["id"]] is not None]
    heldout = [{**row, "teacher_logit": scores[row["id"]]} for row in heldout if scores[row["id"]] is not None]
    return train, heldout, identity, longer, len(rows) - len(heldout) - longer["heldout"] - wanted


def transfer_examples(args, delexicalize: bool, tokenizer, max_length: int) -> tuple[datasets.Dataset, datasets.Dataset, dict]:
    """Tokenised (train, held-out) transfer stories of every --transfer-dir with the teacher's logits, and counts: the
    files' training stories not used, the stories left out as longer than the teacher's one window, the training stories
    drawn per source, and the teacher's identity that the caches were checked against (with several files, each file's
    hash in ``transfer_sha256``, in order). Caches of different teachers are refused: a student has one teacher."""
    teacher = None
    if args.teacher:  # hashed once (its weights are the large file), not once per transfer file
        from storyeval.scoring.sequence import load_story_classifier

        teacher = teacher_fields(Path(args.teacher), load_story_classifier(args.teacher))
    train, heldout, identities, not_used = [], [], [], 0
    longer = {"train": 0, "heldout": 0}
    for folder, cache in zip(args.transfer_dir, args.teacher_scores):
        file_train, file_heldout, identity, file_longer, file_not_used = scored_rows(Path(folder), Path(cache), teacher,
                                                                                     args.max_transfer_stories)
        if identities and (other := next((f for f in TEACHER_FIELDS if identity[f] != identities[0][f]), None)):
            raise ValueError(f"{cache}: written with {other} {identity.get(other)!r}, {args.teacher_scores[0]} with "
                             f"{identities[0].get(other)!r}; a student learns from one teacher")
        identities.append(identity)
        train += file_train
        heldout += file_heldout
        not_used += file_not_used
        longer = {split: longer[split] + file_longer[split] for split in longer}
    identity = identities[0] if len(identities) == 1 else {**identities[0], "transfer_sha256": [i["transfer_sha256"] for i in identities]}

    student_longer = {}

    def encode(rows_, split):
        texts = [normalize_story(row["story"], delexicalize) for row in rows_]
        ids = tokenizer(texts, truncation=False, verbose=False)["input_ids"]
        # the student's tokenizer may need more tokens than the teacher's: such a story fits one teacher window but
        # not one student window, so it has no logit the student can learn either; left out and counted, not cut
        keep = [k for k, story_ids in enumerate(ids) if len(story_ids) <= max_length]
        student_longer[split] = len(ids) - len(keep)
        return datasets.Dataset.from_dict({
            "input_ids": [ids[k] for k in keep], "attention_mask": [[1] * len(ids[k]) for k in keep],
            "teacher_logits": [rows_[k]["teacher_logit"] for k in keep],
            "labels": [-1 if rows_[k].get("label") is None else rows_[k]["label"] for k in keep],
            "words": [len(rows_[k]["story"].split()) for k in keep],  # the length that the WP kinds' length rule uses
        })

    encoded = encode(train, "train"), encode(heldout, "heldout")
    return *encoded, {"not_used": not_used,
                      "longer_than_the_teachers_window": longer, "longer_than_the_students_window": student_longer,
                      "sources": dict(Counter(row["source"] for row in train)), "teacher": identity}


def length_neutral(train_set: datasets.Dataset) -> tuple[datasets.Dataset, float]:
    """The training stories with the teacher's logits less their least-squares line in log(words), centred so that the
    mean logit stays; and the line's slope. Their correlation with log length is then zero, and the order of stories of
    one length is the teacher's."""
    log_words = np.log(np.asarray(train_set["words"], dtype=np.float64))
    logits = np.asarray(train_set["teacher_logits"], dtype=np.float64)
    slope = float(stats.linregress(log_words, logits).slope) if len(set(log_words)) > 1 else 0.0
    neutral = logits - slope * (log_words - log_words.mean())
    return train_set.remove_columns("teacher_logits").add_column("teacher_logits", neutral.tolist()), slope


def selection_sets(args) -> list[tuple[str, Path]]:
    """(name, folder) of each selection set: ``selection`` for --selection-pairs-dir, else each --selection-pairs."""
    return [("selection", Path(args.selection_pairs_dir))] if args.selection_pairs_dir else args.selection_pairs


def selection_key(name: str) -> str:
    """The eval set's name of a selection set (``selection`` for the one of --selection-pairs-dir)."""
    return "selection" if name == "selection" else f"selection_{name}"


def selection_examples(name: str, folder: Path, args, config, tokenizer) -> tuple[datasets.Dataset, dict]:
    """A selection set's validation pairs (those of --selection-techniques, then a seeded sample with
    --max-selection-pairs-per-set), tokenised as scoring does, and what their across-story AUC needs
    (:func:`storyeval_training.selection.across_metadata`)."""
    pairs = train_union.load_selection_pairs(str(folder), config.delexicalize)
    if name in args.selection_techniques:
        pairs = with_techniques(pairs, args.selection_techniques[name], name)
        if len(pairs) == 0:
            raise ValueError(f"--selection-techniques {name}={','.join(args.selection_techniques[name])}: "
                             f"no validation pair of {folder} was made by them")
    if args.max_selection_pairs_per_set and len(pairs) > args.max_selection_pairs_per_set:
        pairs = pairs.shuffle(seed=args.seed).select(range(args.max_selection_pairs_per_set))
    examples = pairs.map(train_union.to_examples, batched=True, remove_columns=pairs.column_names,
                         fn_kwargs={"tokenizer": tokenizer, "max_length": config.max_length}, desc="tokenising selection pairs")
    return examples.remove_columns(["recon_labels", "pair"]), across_metadata(pairs)


class Collator:
    """Dynamic padding, with the teacher's logits and the stories' labels (-1: none) as tensors beside the ids."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        extra = {name: [f.pop(name) for f in features] for name in ("teacher_logits", "labels") if name in features[0]}
        batch = self.tokenizer.pad(features, return_tensors="pt", pad_to_multiple_of=8)
        if "teacher_logits" in extra:
            batch["teacher_logits"] = torch.tensor(extra["teacher_logits"], dtype=torch.float32)
        if "labels" in extra:
            batch["labels"] = torch.tensor(extra["labels"])
        return batch


@torch.inference_mode()
def student_logits(model, loader, accelerator) -> tuple[torch.Tensor, torch.Tensor]:
    """(student logits, the batch's teacher logits or labels) over a prepared loader, gathered in order."""
    model.eval()
    logits, targets = [], []
    for batch in loader:
        target = batch.pop("teacher_logits", None)
        labels = batch.pop("labels")
        out = model(**batch)
        gathered = accelerator.gather_for_metrics((out.logits.float(), target if target is not None else labels.float()))
        logits.append(gathered[0])
        targets.append(gathered[1])
    model.train()
    return torch.cat(logits), torch.cat(targets)


def start_identity(student: Path) -> dict:
    """The checkpoint a student starts from, by its weights and training commit, which outlive the folder's path."""
    return {"weights_sha256": file_sha256(student / "model.safetensors"), "trained_at": training_commit(student)}


def main(argv=None) -> None:
    train(parse_args(argv))


def train(args) -> dict:
    loop = TrainingLoop(LoopArguments.from_namespace(args))
    accelerator = loop.accelerator
    tokenizer = AutoTokenizer.from_pretrained(args.student)
    student = UnionModel.from_pretrained(args.student, dtype=torch.float32)
    if student.config.trained_top_layers or student.config.lora_rank:
        raise ValueError(f"--student {args.student} ships only some of its weights; a student trains every weight of a full checkpoint")
    student.requires_grad_(True)
    start = start_identity(Path(args.student))  # before training, so that a start without model.safetensors fails first
    config = student.config
    with accelerator.main_process_first():
        train_set, heldout, counts = transfer_examples(args, config.delexicalize, tokenizer, config.max_length)
        selections, across = {}, {}
        for name, folder in selection_sets(args):
            selections[name], metadata = selection_examples(name, folder, args, config, tokenizer)
            if name in args.across_story_sets:
                across[name] = metadata
    heldout_words = heldout["words"]
    teacher_length = length_spearman(heldout["teacher_logits"], heldout_words)  # the teacher's: one figure for the whole run
    length_slope = None
    if args.length_neutral_targets:
        train_set, length_slope = length_neutral(train_set)
        logger.info("learning the teacher's logits less %.4f x log(words), their trend over the training stories", length_slope)
    train_set, heldout = train_set.remove_columns("words"), heldout.remove_columns("words")
    args.selection_pairs = [f"{name}={folder}" for name, folder in args.selection_pairs]  # as typed, for the JSON record
    objective = DistillationObjective(student, args.loss, args.hard_label_weight)

    def evaluate(model, loaders) -> dict:
        ours, teacher = student_logits(model, loaders["heldout"], accelerator)
        spearman = float(stats.spearmanr(ours.numpy(), teacher.numpy()).statistic)
        accuracies, aucs = {}, {}
        for name in selections:
            pair_logits, labels = student_logits(model, loaders[selection_key(name)], accelerator)
            accuracies[name] = train_union.pair_accuracy(pair_logits, labels.long())
            if name in across:  # to_examples lays each pair out as (higher, lower) at 2i, 2i+1
                aucs[name] = pairs_across_story_auc(pair_logits[0::2].tolist(), pair_logits[1::2].tolist(), across[name])
        worst = min([*accuracies.values(), *(auc for auc in aucs.values() if auc is not None)])
        per_set = {f"selection_pair_accuracy_{name}": value for name, value in accuracies.items()} if len(accuracies) > 1 else {}
        per_set.update({f"selection_across_story_auc_{name}": value for name, value in aucs.items()})
        # does the student follow length more than its teacher? (a diagnostic; it selects nothing)
        return {"heldout_spearman": spearman, "heldout_mse": float(((ours - teacher) ** 2).mean()),
                "student_heldout_length_spearman": length_spearman(ours.numpy(), heldout_words),
                "teacher_heldout_length_spearman": teacher_length, "selection_pair_accuracy": worst, **per_set, SELECT_BY: (spearman + worst) / 2}

    eval_sets = {"heldout": heldout, **{selection_key(name): data for name, data in selections.items()}}
    selection_pairs = sum(len(data) // 2 for data in selections.values())

    identity = counts["teacher"]  # the cache's header, as transfer_examples checked it

    def eval_loaders() -> dict:
        return {name: accelerator.prepare(DataLoader(data, batch_size=args.per_device_eval_batch_size, collate_fn=Collator(tokenizer)))
                for name, data in eval_sets.items()}

    if args.evaluate_only:
        loaders = eval_loaders()
        signals = {"student": args.student, "teacher": identity, "heldout_stories": len(heldout),
                   "selection_pairs": selection_pairs, **evaluate(accelerator.prepare(objective), loaders)}
        if accelerator.is_main_process:
            Path(args.output_dir).mkdir(parents=True, exist_ok=True)
            (Path(args.output_dir) / SIGNALS_FILE).write_text(json.dumps(signals, indent=2) + "\n")
        return signals

    start_signals, select_by = None, SELECT_BY
    if args.no_regression:  # the student's start is the checkpoint it would replace
        start_signals = start_measures(args.output_dir, bool(args.resume_from_checkpoint),
                                       lambda: evaluate(objective.to(accelerator.device), eval_loaders()), accelerator.is_main_process)
        logger.info("start %s", json.dumps(start_signals))
        select_by = SELECT_BY_NO_REGRESSION

    def evaluate_under_rule(model, loaders) -> dict:
        metrics = evaluate(model, loaders)
        return with_rule(metrics, start_signals, SELECT_BY, SET_MEASURES) if start_signals else metrics

    def save_best(model, folder: Path) -> None:
        model.student.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    logger.info("distilling on %d transfer stories (%d more training stories in the file; left out as longer than the "
                "teacher's window: %s, than the student's: %s)", len(train_set), counts["not_used"],
                counts["longer_than_the_teachers_window"], counts["longer_than_the_students_window"])
    run = loop.train(objective, train_set, Collator(tokenizer), lengths=[len(ids) for ids in train_set["input_ids"]],
                     eval_sets=eval_sets, evaluate=evaluate_under_rule, select_by=select_by,
                     save_best=save_best)
    export = True
    fields = {}
    if start_signals is not None:
        # as train_ranker's: a run that kept no set within the rule, or did not beat the start's score, replaces nothing
        export = run.best is not None and run.best[select_by] > start_signals[SELECT_BY]
        fields = {"start_validation": start_signals, "beats_start": export}
        if not export:
            logger.warning("no evaluation kept every set within %.2f of the start and beat its %s (%.4f): nothing exported",
                           NO_REGRESSION_TOLERANCE, SELECT_BY, start_signals[SELECT_BY])
    results = loop.results(run, args, selected_by=select_by, teacher=identity, start=start, **fields,
                           transfer_stories=len(train_set),
                           transfer_sources=counts["sources"],  # which stories the card says the student learned on
                           heldout_stories=len(heldout), selection_pairs=selection_pairs, length_slope=length_slope,
                           left_out_longer_than_the_teachers_window=counts["longer_than_the_teachers_window"],
                           left_out_longer_than_the_students_window=counts["longer_than_the_students_window"])
    loop.write_results(results)
    if accelerator.is_main_process and args.export_dir and export:
        train_union.export(loop.output_dir / "best", Path(args.export_dir), results, write_card=None)
    accelerator.end_training()
    return results


if __name__ == "__main__":
    main()
