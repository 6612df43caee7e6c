"""Train the plot-coherence classifier (Ghazarian et al., NAACL 2021, stage 5).

    storyeval-train-plot-coherence --negatives paper --output-dir outputs/pc-roc-paper
    storyeval-train-plot-coherence --negatives generated --generated-dir outputs/af-roc --output-dir outputs/pc-roc

A classifier of human-written (1) versus implausible (0) stories. Two sources of
implausible stories:

* ``paper``: the paper's released AF_ManPlts negatives for ROC (BART stories
  from manipulated plots, chosen by adversarial filtering), read from
  ``roc/af_manplts_{valid,test}.tsv``;
* ``generated``: our own, from ``storyeval-adversarial-filter``'s output
  (``story``, ``label``, ``group`` rows).

Groups (a human story and its negatives) whose human story opens a
human-judged evaluation item are dropped (the leakage rule) and counted. The
rest are split by group, 95/5, into train and validation pairs; the best
checkpoint is chosen by validation accuracy, never by the human judgments.

Scoring treats names as the training text did: the released stories keep
them, while the builders' stories (and so our generated negatives) replace
them with ``[MALE]`` / ``[FEMALE]`` / ``[NEUTRAL]``. The checkpoint's
``delexicalize`` is read off the training pairs (:func:`names_delexicalized`).

The model is UNION's architecture without the reconstruction head (an encoder
and a sigmoid head on the first token), trained by ``train_union`` on the shared
loop (:mod:`storyeval_training.loop`, whose options it takes) with the paper's
classifier settings as defaults: learning rate 2e-5, batch 8, 3 epochs. ROC
stories fit 128 tokens; for WP, training reads the first ``--max-length``
tokens and scoring covers the whole story with overlapping windows whose scores
are averaged (the paper used a 1,024-token Longformer instead).
Multi-GPU: ``accelerate launch -m storyeval_training.recipes.train_plot_coherence ...``.
"""
from __future__ import annotations

import argparse
import logging
import shutil
from pathlib import Path

import datasets

from storyeval import text as textlib
from storyeval.checkpoints.resolution import OFFLINE_BACKBONE
from storyeval_training import paths
from storyeval_training.data.builders.roc import read_af_tsv
from storyeval_training.data.plot_pairs import PAPER_AF_FILES, build_pairs, read_generated  # noqa: F401 (read_generated: this recipe's API)
from storyeval_training.export.model_card import write_plot_coherence_card
from storyeval_training.loop import LoopArguments, add_loop_arguments, check_loop_arguments
from storyeval_training.recipes import train_union

logger = logging.getLogger("storyeval_training.recipes.train_plot_coherence")

DEFAULT_MAX_LENGTH = {"roc": 128, "wp": 512}


def names_delexicalized(pairs: datasets.DatasetDict) -> bool:
    """Whether the pairs' stories carry name placeholders, so scoring must replace names too.

    Read off the text rather than a flag, so it holds for any folder of
    negatives. Text without a placeholder has nothing to match: names are kept.
    """
    def has_placeholder(texts) -> bool:
        return any(p in text for text in texts for p in textlib.NAME_PLACEHOLDERS)

    humans = any(has_placeholder(split["human"]) for split in pairs.values())
    negatives = any(has_placeholder(split["negative"]) for split in pairs.values())
    if humans != negatives:
        logger.warning("name placeholders only in the %s stories: the classifier can tell the two apart by names",
                       "human" if humans else "negative")
    return humans or negatives


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Train a plot-coherence classifier.")
    p.add_argument("--dataset", choices=["roc", "wp"], default="roc")
    p.add_argument("--negatives", choices=["paper", "generated"], default="paper",
                   help="paper: the released AF_ManPlts stories (ROC); generated: --generated-dir")
    p.add_argument("--generated-dir", help="storyeval-adversarial-filter output (with --negatives generated); every split of a DatasetDict is read")
    p.add_argument("--model-name-or-path", default=OFFLINE_BACKBONE)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--export-dir", default=None, help="export the best model here (fp16) with a model card")
    # the paper's classifier settings
    add_loop_arguments(p, learning_rate=2e-5, per_device_train_batch_size=8)
    p.add_argument("--max-length", type=int, default=None, help="training tokens (default: 128 for roc, 512 for wp)")
    p.add_argument("--max-train-pairs", type=int, default=None)
    p.add_argument("--train-top-layers", type=int, default=None,
                   help="train only the encoder's top N layers and the head, as storyeval-train-union does (a base-size "
                        "backbone: faster steps, and an export of those layers only)")
    p.add_argument("--lora-rank", type=int, default=None,
                   help="train LoRA adapters of this rank on the encoder's linear layers and the head, as storyeval-train-union "
                        "does (from a plain encoder: an export of the adapters and head only)")
    p.add_argument("--lora-alpha", type=float, default=None, help="the adapters' scale (default: twice --lora-rank)")
    p.add_argument("--base-model-name", default=None)
    p.add_argument("--data-dir", default=None, help="data root (default: $STORYEVAL_DATA or ../shared/data)")
    p.add_argument("--selection-pairs-dir", default=None,
                   help="choose the best checkpoint on this folder's validation pairs (as storyeval-train-union does), e.g. "
                        "held-out generators' stories, instead of 5%% of the training groups")
    p.add_argument("--pairs-only", action="store_true",
                   help="write OUTPUT_DIR/pairs and stop (e.g. for storyeval-train-union --selection-pairs-dir)")
    return p


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    if args.negatives == "generated" and not args.generated_dir:
        p.error("--negatives generated needs --generated-dir")
    if args.negatives == "paper" and args.dataset != "roc":
        p.error("the paper released AF_ManPlts negatives for ROC only; use --negatives generated for wp")
    check_loop_arguments(p, args, positive=("max_length", "max_train_pairs", "train_top_layers", "lora_rank", "lora_alpha"))
    return args


def run_pairs(args) -> tuple[datasets.DatasetDict, int]:
    """The run's (human, negative) pairs and how many groups the leakage rule dropped."""
    root = Path(args.data_dir) if args.data_dir else paths.data_dir()
    if args.negatives == "paper":
        groups = [g for name in PAPER_AF_FILES for g in read_af_tsv(root / "roc" / name)]
    else:
        groups = read_generated(args.generated_dir)
    return build_pairs(groups, root / "human", args.seed, args.negatives)


@paths.one_line_errors
def main(argv=None) -> None:
    # a console script exits with main()'s return value: returning the results dict made a good run exit with status 1
    train(argv)


def train(argv=None) -> dict:
    """Build the pairs and train; returns what the run writes to all_results.json."""
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    pairs, dropped = run_pairs(args)
    logger.info("leakage rule: dropped %d groups; %d train / %d validation pairs", dropped, len(pairs["train"]), len(pairs["validation"]))
    delexicalize = names_delexicalized(pairs)
    logger.info("names in the training text are %s", "placeholders: scoring replaces names too" if delexicalize else "kept")
    output_dir = Path(args.output_dir)
    pairs_dir = output_dir / "pairs"
    if args.pairs_only:
        pairs.save_to_disk(str(pairs_dir))
        return {"pairs_dir": str(pairs_dir), "pairs": dict(pairs.num_rows), "leakage_dropped_groups": dropped}

    union_args = train_union.arguments(  # checked before anything is written
        LoopArguments.from_namespace(args), pairs_dir=str(pairs_dir), model_name_or_path=args.model_name_or_path,
        max_length=args.max_length or DEFAULT_MAX_LENGTH[args.dataset], max_eval_pairs=0, recon_weight=0.0,
        max_train_pairs=args.max_train_pairs, base_model_name=args.base_model_name or args.model_name_or_path, export_dir=args.export_dir,
        train_top_layers=args.train_top_layers, lora_rank=args.lora_rank, lora_alpha=args.lora_alpha,
        selection_pairs_dir=args.selection_pairs_dir,
    )
    # recorded in all_results.json and the model card
    union_args.dataset, union_args.negatives, union_args.leakage_dropped_groups = args.dataset, args.negatives, dropped
    union_args.delexicalize = delexicalize
    overrides = {"metric": "plot_coherence", "delexicalize": delexicalize, "has_reconstruction_head": False}
    fresh = not output_dir.exists()
    pairs.save_to_disk(str(pairs_dir))
    try:
        return train_union.train(union_args, config_overrides=overrides, write_card=write_plot_coherence_card)
    except Exception:  # not an interrupt: the pairs of a run stopped by hand stay
        # training checks its model and options before writing: if that failed, the pairs were all we wrote
        if fresh and [p.name for p in output_dir.iterdir()] == ["pairs"]:
            shutil.rmtree(output_dir)
        raise


if __name__ == "__main__":
    main()
