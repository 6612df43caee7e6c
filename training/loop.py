"""The accelerate training loop the training scripts share, in the style of transformers' run_glue_no_trainer.

A script parses its own options plus :func:`add_loop_arguments`, builds its model and
tokenised data inside a :class:`TrainingLoop`'s accelerator, and hands them to
:meth:`TrainingLoop.train`, which owns the rest: length-grouped batches, the
optimizer and schedule, the time budget, periodic evaluation with best-checkpoint
selection (:mod:`storyeval_training.selection`), and resumable ``step_N`` states.

On disk, a run's output folder holds ``best/`` (the best weights so far) and one
``step_N/`` folder per ``--checkpointing-steps``: accelerate's state (``optimizer.bin``
among it), ``trainer_state.json`` (best metrics, evaluation history, minutes spent)
and the best weights at that step in ``best/``. A state is written as
``step_N.partial`` and renamed when complete.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import re
import shutil
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import datasets
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import SchedulerType, get_scheduler
from transformers.trainer_pt_utils import LengthGroupedSampler

from storyeval_training.export.provenance import environment
from storyeval_training.selection import best_by, improves

logger = logging.getLogger("storyeval_training.loop")

TRAINER_STATE = "trainer_state.json"
RUN_RESULTS = "all_results.json"  # what a run writes into its output folder when it ends
SCHEDULERS = [scheduler.value for scheduler in SchedulerType]
NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight")
_STATE_NAME = re.compile(r"step_\d+")


@dataclass
class LoopArguments:
    """What the loop needs to know about a run; the defaults are UNION's (scripts override some in :func:`add_loop_arguments`)."""

    output_dir: str
    per_device_train_batch_size: int = 10
    per_device_eval_batch_size: int = 32
    learning_rate: float = 5e-5
    weight_decay: float = 0.0
    num_train_epochs: float = 3
    max_train_steps: int | None = None
    time_budget_minutes: float | None = None
    stop_after_steps: int | None = None
    gradient_accumulation_steps: int = 1
    lr_scheduler_type: str = "linear"
    num_warmup_steps: int = 0
    eval_steps: int = 500
    checkpointing_steps: int = 1000
    keep_last_states: int | None = None
    resume_from_checkpoint: str | None = None
    seed: int = 42

    @classmethod
    def from_namespace(cls, args) -> "LoopArguments":
        """The loop's fields of parsed arguments (a script's own options are left out)."""
        return cls(**{field.name: getattr(args, field.name) for field in dataclasses.fields(cls)})


# options that must be positive when set: a zero batch, interval or count would fail deep into
# training (a division by zero) or, as a falsy limit, mean no limit at all
POSITIVE = (
    "per_device_train_batch_size", "per_device_eval_batch_size", "learning_rate", "num_train_epochs", "max_train_steps",
    "time_budget_minutes", "stop_after_steps", "gradient_accumulation_steps", "eval_steps", "checkpointing_steps",
    "keep_last_states",
)
NON_NEGATIVE = ("weight_decay", "num_warmup_steps")

_HELP = {
    "max_train_steps": "overrides --num-train-epochs",
    "time_budget_minutes": "stop (after a final evaluation, saving a resumable state) when this invocation has trained this long; "
                           "a resumed run gets the budget again",
    "stop_after_steps": "stop (after a final evaluation, saving a resumable state) at this step, with the learning-rate schedule "
                        "still that of --max-train-steps: runs compared at equal steps, or a cost curve, stop where the full run "
                        "would have been; a rerun with a larger value (or none) continues the same run",
    "checkpointing_steps": "save resumable state every N steps",
    "keep_last_states": "after each save, delete all but the newest N step_N states (default: keep every one; an MPNet-base "
                        "state is about 0.9 GB); each state carries the best weights so far, so the newest is enough to resume",
    "resume_from_checkpoint": "a step_N folder written by --checkpointing-steps, or 'latest': the newest one in --output-dir "
                              "(a fresh start if none)",
}


def add_loop_arguments(parser: argparse.ArgumentParser, **defaults) -> None:
    """The loop's options (all but --output-dir, which a script places among its own), with
    :class:`LoopArguments`' defaults unless ``defaults`` overrides some."""
    fields = {field.name: field for field in dataclasses.fields(LoopArguments) if field.name != "output_dir"}
    unknown = set(defaults) - set(fields)
    if unknown:
        raise TypeError(f"not loop arguments: {sorted(unknown)}")
    hints = typing.get_type_hints(LoopArguments)
    for name, field in fields.items():
        # int | None parses as int (None is the default's business)
        kind = next(t for t in (*typing.get_args(hints[name]), hints[name]) if t is not type(None))
        option = {"type": kind, "default": defaults.get(name, field.default), "help": _HELP.get(name)}
        if name == "lr_scheduler_type":
            option["choices"] = SCHEDULERS
        parser.add_argument(f"--{name.replace('_', '-')}", **option)


def require_positive(parser: argparse.ArgumentParser, args, names) -> None:
    """A usage error for each option in ``names`` that is set and not positive."""
    bad = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in names if getattr(args, name) is not None and getattr(args, name) <= 0]
    if bad:
        parser.error(f"must be positive: {', '.join(bad)}")


def check_loop_arguments(parser: argparse.ArgumentParser, args, positive=()) -> None:
    """Usage errors, before anything is written, for the loop's options (and a script's own ``positive`` ones);
    resolves ``--resume-from-checkpoint latest`` to a state folder (or None: start afresh)."""
    require_positive(parser, args, POSITIVE + tuple(positive))
    negative = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in NON_NEGATIVE if getattr(args, name) < 0]
    if negative:
        parser.error(f"must not be negative: {', '.join(negative)}")
    if args.resume_from_checkpoint == "latest":
        args.resume_from_checkpoint = latest_state(Path(args.output_dir))
    if args.resume_from_checkpoint and not is_state(Path(args.resume_from_checkpoint)):
        parser.error(f"--resume-from-checkpoint {args.resume_from_checkpoint}: expected a step_N folder written by --checkpointing-steps "
                     f"(with optimizer.bin and {TRAINER_STATE}); best/ and exported checkpoints hold weights only")


def is_state(folder: Path) -> bool:
    """Whether ``folder`` is a complete resumable state (a half-written one still has its temporary name)."""
    return bool(_STATE_NAME.fullmatch(folder.name)) and (folder / "optimizer.bin").is_file() and (folder / TRAINER_STATE).is_file()


def latest_state(output_dir: Path) -> str | None:
    """The newest complete step_N folder in ``output_dir`` (None: start afresh)."""
    states = complete_states(output_dir)
    return str(states[-1]) if states else None


def complete_states(output_dir: Path) -> list[Path]:
    """The complete step_N folders in ``output_dir``, oldest first by step number."""
    return sorted((folder for folder in output_dir.glob("step_*") if is_state(folder)), key=lambda folder: int(folder.name.split("_")[1]))


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


def save_training_state(
    accelerator, output_dir: Path, step: int, best: dict | None, history: list, minutes: float, keep_last: int | None = None
) -> None:
    """Resumable state in ``step_N``, with the best weights so far, which a resume into another folder needs;
    then all but the newest ``keep_last`` states are deleted (None: every state is kept)."""
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
        if keep_last:
            prune_states(output_dir, keep_last)
    accelerator.wait_for_everyone()


def prune_states(output_dir: Path, keep_last: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` complete step_N states; returns the deleted folders.

    Hand-written rather than accelerate's ``ProjectConfiguration(total_limit=...)``, which prunes only
    the ``checkpoints/checkpoint_i`` folders of its automatic naming, not these step_N ones.
    """
    deleted = complete_states(output_dir)[:-keep_last]
    for folder in deleted:
        shutil.rmtree(folder)
    return deleted


def load_trainer_state(
    state_dir: Path, output_dir: Path, select_by: str = "accuracy", lowest: bool = False, main_process: bool = True
) -> tuple[dict | None, list, float]:
    """Best metrics, eval history and minutes spent up to the state, so a resumed
    run keeps selecting against what it had already seen; the main process puts
    the best weights saved with the state back in ``output_dir/best``."""
    state = json.loads((state_dir / TRAINER_STATE).read_text())
    # the best is derived from the history, so a run resumed with another selection rule selects by its own
    best, history, minutes = best_by(state["history"], select_by, lowest), state["history"], state["minutes"]
    saved_step = (state["best"] or {}).get("step")  # the step whose weights were saved with the state
    if best is not None and (state_dir / "best").is_dir() and saved_step == best["step"]:
        if main_process:
            shutil.copytree(state_dir / "best", output_dir / "best", dirs_exist_ok=True)
    elif best is not None and not (output_dir / "best").is_dir():
        # another selection rule's best, resumed into a new folder: its weights were not saved
        logger.warning("the weights of the best step %d are not in %s: best-checkpoint tracking starts afresh", best["step"], state_dir)
        best = None
    return best, history, minutes


@dataclass
class LoopResult:
    best: dict | None
    history: list[dict]
    completed_steps: int
    stopped_by_time_budget: bool
    minutes: float
    stopped_by_step_limit: bool = False


class TrainingLoop:
    """One training run: its accelerator, seed and clock from the start, so data preparation counts
    against the time budget and runs under :meth:`Accelerator.main_process_first`."""

    def __init__(self, args: LoopArguments):
        self.args = args
        self.accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
        if self.accelerator.is_local_main_process:
            datasets.utils.logging.set_verbosity_warning()
        else:
            datasets.utils.logging.set_verbosity_error()
        set_seed(args.seed)
        self.started = time.perf_counter()
        self.environment = environment()  # taken at the start: the code the run ran, not what the checkout holds when it ends
        self.output_dir = Path(args.output_dir)

    def _minutes(self, earlier: float) -> float:
        return earlier + (time.perf_counter() - self.started) / 60

    def train(
        self,
        model: torch.nn.Module,
        train_set,
        collator,
        *,
        lengths: list[int],
        eval_sets: dict,
        evaluate: Callable[[torch.nn.Module, dict], dict],
        select_by: str,
        save_best: Callable[[torch.nn.Module, Path], None],
        lowest: bool = False,
        progress: Callable = lambda outputs: {"loss": f"{outputs.loss.item():.3f}"},
    ) -> LoopResult:
        """Train ``model`` on ``train_set`` and keep its best evaluation.

        ``lengths`` (per example) group batches of similar lengths. ``evaluate(model, loaders)``
        measures the model on the prepared loaders of ``eval_sets`` (in their order);
        the evaluation with the best ``select_by`` (lowest if ``lowest``) has its model
        saved by ``save_best(unwrapped_model, folder)`` on the main process.
        ``progress(outputs)`` gives the progress bar's postfix.
        """
        args, accelerator = self.args, self.accelerator
        if not eval_sets:
            raise ValueError("no evaluation set: the loop selects its best checkpoint by evaluating")
        # only now, so that a bad argument or data folder leaves nothing behind
        if accelerator.is_main_process:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        # length grouping: batches of similar lengths waste little on padding
        generator = torch.Generator().manual_seed(args.seed)
        sampler = LengthGroupedSampler(args.per_device_train_batch_size * accelerator.num_processes, lengths=lengths, generator=generator)
        train_loader = DataLoader(train_set, sampler=sampler, batch_size=args.per_device_train_batch_size, collate_fn=collator)
        eval_loaders = {name: DataLoader(data, batch_size=args.per_device_eval_batch_size, collate_fn=collator) for name, data in eval_sets.items()}

        # only the parameters left to train (the rest may be frozen), weights without decay in their own group
        trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        groups = [
            {"params": [p for n, p in trained if not any(nd in n for nd in NO_DECAY)], "weight_decay": args.weight_decay},
            {"params": [p for n, p in trained if any(nd in n for nd in NO_DECAY)], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(groups, lr=args.learning_rate)
        scheduler = get_scheduler(args.lr_scheduler_type, optimizer=optimizer, **schedule_lengths(args, len(train_loader), accelerator.num_processes))
        names = list(eval_loaders)
        model, optimizer, train_loader, first_eval, scheduler = accelerator.prepare(model, optimizer, train_loader, eval_loaders[names[0]], scheduler)
        eval_loaders = {names[0]: first_eval, **{name: accelerator.prepare(eval_loaders[name]) for name in names[1:]}}
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
            best, history, earlier_minutes = load_trainer_state(Path(args.resume_from_checkpoint), self.output_dir, select_by, lowest,
                                                               main_process=accelerator.is_main_process)
            logger.info("resumed from %s at step %d", args.resume_from_checkpoint, completed_steps)

        logger.info("training on %d examples, %d steps, batch %d x %d processes",
                    len(train_set), max_train_steps, args.per_device_train_batch_size, accelerator.num_processes)
        bar = tqdm(range(max_train_steps), initial=completed_steps, disable=not accelerator.is_local_main_process, desc="training")
        out_of_time = at_step_limit = False
        model.train()
        for epoch in range(start_epoch, num_epochs):
            if completed_steps >= max_train_steps:  # resumed from the last step: nothing left to train
                break
            if args.stop_after_steps and completed_steps >= args.stop_after_steps:  # resumed at (or past) the step limit
                at_step_limit = True
                break
            generator.manual_seed(args.seed + epoch)  # each epoch's order from its number alone, so a resumed run sees the same
            skipped = resume_step if resume_step is not None and epoch == start_epoch else 0
            for batch in epoch_batches(accelerator, train_loader, skipped):
                with accelerator.accumulate(model):
                    outputs = model(**batch)
                    accelerator.backward(outputs.loss)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
                if not accelerator.sync_gradients:
                    continue
                completed_steps += 1
                bar.update(1)
                bar.set_postfix(progress(outputs))
                if args.time_budget_minutes and time.perf_counter() - self.started > 60 * args.time_budget_minutes:
                    out_of_time = True
                at_step_limit = bool(args.stop_after_steps) and completed_steps >= args.stop_after_steps
                last = completed_steps >= max_train_steps or out_of_time or at_step_limit
                if completed_steps % args.eval_steps == 0 or last:
                    metrics = evaluate(model, eval_loaders)
                    metrics.update(step=completed_steps, epoch=epoch, minutes=round(self._minutes(earlier_minutes), 1))
                    history.append(metrics)
                    logger.info("eval %s", json.dumps(metrics))
                    if improves(metrics, best, select_by, lowest):
                        best = metrics
                        accelerator.wait_for_everyone()
                        if accelerator.is_main_process:
                            save_best(accelerator.unwrap_model(model), self.output_dir / "best")
                # stopped early: a state where it stopped, so a rerun resumes there and repeats no step
                if completed_steps % args.checkpointing_steps == 0 or out_of_time or at_step_limit:
                    save_training_state(accelerator, self.output_dir, completed_steps, best, history, self._minutes(earlier_minutes),
                                        args.keep_last_states)
                if last:
                    break
            if completed_steps >= max_train_steps or out_of_time or at_step_limit:
                break
        return LoopResult(best, history, completed_steps, out_of_time, round(self._minutes(earlier_minutes), 1), at_step_limit)

    def results(self, run: LoopResult, args, **fields) -> dict:
        """What a run writes to all_results.json: the loop's record around a script's own ``fields``."""
        return {
            "best_validation": run.best,
            **fields,
            "history": run.history,
            "completed_steps": run.completed_steps,
            "stopped_by_time_budget": run.stopped_by_time_budget,
            "stopped_by_step_limit": run.stopped_by_step_limit,
            "training_minutes": run.minutes,
            "args": vars(args),
            "environment": self.environment,
        }

    def write_results(self, results: dict) -> None:
        """``results`` in all_results.json, written by the main process."""
        if self.accelerator.is_main_process:
            (self.output_dir / RUN_RESULTS).write_text(json.dumps(results, indent=2) + "\n")
