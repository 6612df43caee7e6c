"""Choose how a checkpoint combines its window scores, on validation pairs, and write the choice into it.

    python -m storyeval_training.export.window_aggregation --checkpoint runs/pc-wp-export \\
        --pairs-dir runs/pc-wp/pairs --window 256 --output runs/pc-wp-export/window_aggregation.json

A story longer than the scoring window is scored window by window (see
:mod:`storyeval.scoring.sequence`). Whether the story's score should be the windows' mean
or their minimum is a modelling choice, so it is made like any other: by pair
accuracy (the human story scored above its negative, a tie counting half, as in
training) on the validation pairs the
run held out. Those stories may fit one window of the checkpoint's own size, so
they are scored here with a smaller ``--window`` (stride half of it), where most
span several; the checkpoint keeps its own window. Each window is scored once and
every aggregation reads those scores. Ties keep "mean", the default.
``--compare-with`` adds the pair accuracy of other checkpoints (a run's start,
say) and of this one after the choice, each at its own settings, on the same pairs.
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import datasets
import torch

from storyeval.scoring import sequence as scoring
from storyeval.scoring.sequence import WINDOW_AGGREGATIONS, SequenceScorer, load_story_classifier
from storyeval_training.export.model_card import rerender_card
from storyeval_training.recipes.train_union import pair_accuracy as interleaved_pair_accuracy

logger = logging.getLogger("storyeval_training.export.window_aggregation")


def ranked_above(humans: list[float], negatives: list[float]) -> float:
    """The share of pairs whose human story scores above its negative, by the training loop's definition."""
    scores = torch.tensor([score for pair in zip(humans, negatives) for score in pair])
    return interleaved_pair_accuracy(scores, torch.tensor([1, 0] * len(humans)))


def pair_accuracy(scorer: SequenceScorer, pairs: datasets.Dataset, batch_size: int = 32) -> float:
    """:func:`ranked_above` for ``scorer``'s scores of the pairs."""
    return ranked_above(scorer.score(list(pairs["human"]), batch_size=batch_size), scorer.score(list(pairs["negative"]), batch_size=batch_size))


def windowed(scorer: SequenceScorer, window: int) -> SequenceScorer:
    """The same model and text preparation with another window (stride: half of it)."""
    return SequenceScorer(scorer.model, scorer.tokenizer, window, window // 2, scorer.device, scorer.preprocess, scorer.delexicalize,
                          name=scorer.name)


def choose(checkpoint: str, pairs: datasets.Dataset, window: int, batch_size: int = 32) -> dict:
    """Pair accuracy for each aggregation at ``window`` tokens, the share of stories spanning several windows, and the choice."""
    scorer = load_story_classifier(checkpoint, device="cpu")
    if not 2 < window <= scorer.max_length:
        raise ValueError(f"--window must be in 3..{scorer.max_length} (the checkpoint's own window), got {window}")
    probe = windowed(scorer, window)
    humans = probe.window_scores(list(pairs["human"]), batch_size=batch_size)
    negatives = probe.window_scores(list(pairs["negative"]), batch_size=batch_size)
    several = sum(len(windows) > 1 for windows in humans + negatives) / (len(humans) + len(negatives))
    accuracy = {name: ranked_above([aggregate(windows) for windows in humans], [aggregate(windows) for windows in negatives])
                for name, aggregate in WINDOW_AGGREGATIONS.items()}
    chosen = max(accuracy, key=lambda name: (accuracy[name], name == "mean"))
    return {"window": window, "stride": window // 2, "pairs": len(pairs), "share_of_stories_over_one_window": round(several, 4),
            "pair_accuracy": accuracy, "chosen": chosen}


def write_choice(checkpoint: str, aggregation: str) -> None:
    """Set ``window_aggregation`` in the checkpoint's config.json (the only field changed), and re-render
    a plot-coherence checkpoint's model card, which states it, where the folder has its training record."""
    config_file = Path(checkpoint) / "config.json"
    config = json.loads(config_file.read_text())
    config["window_aggregation"] = aggregation
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if config.get("metric") == "plot_coherence":  # UNION's card does not state the aggregation
        rerender_card(Path(checkpoint), "plot_coherence")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="an exported UNION-architecture checkpoint folder (its config.json is updated)")
    p.add_argument("--pairs-dir", required=True, help="the run's pairs (OUTPUT_DIR/pairs of a training run): its validation split is read")
    p.add_argument("--window", type=int, default=256, help="tokens per window while choosing (stride: half)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--compare-with", nargs="*", default=[], help="checkpoint folders to score on the same pairs at their own settings")
    p.add_argument("--output", required=True, help="JSON file for the accuracies and the choice (must not exist)")
    args = p.parse_args(argv)
    if Path(args.output).exists():
        p.error(f"--output {args.output} exists; choose another name")
    if not (Path(args.checkpoint) / "config.json").is_file():
        p.error(f"--checkpoint {args.checkpoint}: no config.json there")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    pairs = datasets.load_from_disk(args.pairs_dir)["validation"]
    result = choose(args.checkpoint, pairs, args.window, args.batch_size)
    write_choice(args.checkpoint, result["chosen"])
    scoring.clear_loaded_scorers()  # the checkpoint's loaded scorer predates the choice
    result["pair_accuracy_at_own_settings"] = {
        folder: pair_accuracy(load_story_classifier(folder, device="cpu"), pairs, args.batch_size) for folder in [args.checkpoint, *args.compare_with]
    }
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    logger.info("pair accuracy at a %d-token window: %s; chose %s", args.window, result["pair_accuracy"], result["chosen"])


if __name__ == "__main__":
    main()
