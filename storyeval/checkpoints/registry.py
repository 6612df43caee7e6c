"""Every metric in one table: its configs, default config, scorer class and loader.

A config is a name users pass (``evaluate.load("union", "roc")``, ``--config roc``)
for a checkpoint, which is bundled with the package and published on the Hub as
``storyeval/<checkpoint>``. Adding a config is one line in its metric's ``configs``.

Scorer classes and loaders are named as ``"module:attribute"`` and imported on
first use, so reading the table (the CLI's ``--help``, checkpoint resolution)
imports no torch.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

# the corpora the checkpoints are trained on and their references are drawn from, by the builders' names
CORPORA = ("roc", "wp")
# the model_type in the config.json of a UNION-architecture checkpoint (storyeval.models.UnionConfig), union's and
# plot coherence's: here, so that telling a checkpoint's metric from its files needs no torch
UNION_MODEL_TYPE = "storyeval-union"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    configs: dict[str, str]  # config name -> checkpoint name (the bundled folder and the Hub repo's name)
    default: str
    scorer_class: str  # "module:Class"; the class scores with .score(...)
    loader: str  # "module:function", called as loader(checkpoint_folder, device) and returning a scorer_class
    takes_contexts: bool = False  # whether .score needs the text before each prediction
    fast: str | None = None  # the fast config a load of the default names, where the default is not it
    batch_size: int = 16  # the default of compute() and `storyeval score`: windows, or pairs, per forward pass

    def scorer_type(self) -> type:
        return import_object(self.scorer_class)

    def load(self, folder: str, device: str | None):
        return import_object(self.loader)(folder, device)


METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        # "-base": the base-size tier (MPNet-base; the backbone is installed apart, see storyeval.checkpoints.backbones)
        # each default: the config that passed the first checks best on the check's validation split (issue 86;
        # benchmarks/experiments/first_checks.md), its fast twin one argument away
        # "-ending": a story checkpoint's score mixed with an ending scorer's score of the story's last sentences;
        # "-neighbours": that (or a fast config's score) mixed with a neighbour scorer's mean score of every two
        # neighbouring sentences; "wp-base-complete": "wp-base-ending-neighbours" mixed again with an ending scorer
        # taught only real endings, against cuts as long as them; "-ordered": "wp-base-complete" (or "wp-neighbours")
        # mixed with an order scorer's mean score of every run of five sentences; "wp-complete" / "roc-complete": "wp-ordered" /
        # "roc-neighbours" mixed with "wp-base-complete"'s ending scorer
        MetricSpec("union", {"roc": "union-roc", "wp": "union-wp", "roc-base": "union-roc-base", "wp-base": "union-wp-base",
                             "wp-base-ending": "union-wp-base-ending", "wp-base-ending-neighbours": "union-wp-base-ending-neighbours",
                             "roc-neighbours": "union-roc-neighbours", "wp-neighbours": "union-wp-neighbours",
                             "wp-base-complete": "union-wp-base-complete", "wp-base-ordered": "union-wp-base-ordered",
                             "wp-ordered": "union-wp-ordered", "wp-complete": "union-wp-complete",
                             "roc-complete": "union-roc-complete"},
                   "wp-base-complete",
                   "storyeval.scoring.sequence:SequenceScorer", "storyeval.scoring.sequence:load_story_classifier", fast="wp"),
        MetricSpec("plot_coherence", {"roc": "plot-coherence-roc", "wp": "plot-coherence-wp", "roc-base": "plot-coherence-roc-base",
                                      "wp-base": "plot-coherence-wp-base"}, "roc-base",
                   "storyeval.scoring.sequence:SequenceScorer", "storyeval.scoring.sequence:load_story_classifier", fast="roc"),
        MetricSpec("continuation_quality", {"deltascore": "continuation-quality", "deltascore-base": "continuation-quality-base"}, "deltascore",
                   "storyeval.scoring.continuation:ContinuationScorer", "storyeval.scoring.continuation:load_continuation_scorer",
                   takes_contexts=True, fast="deltascore", batch_size=256),
    )
}

# registered checkpoints that are neither bundled nor on the Hub: why, in a clause that fits an error's one line
# (how to train one is in docs/TRAINING.md). Bundling one (hub_cards/<name>/model.safetensors) makes its config
# loadable and listed, whatever this says.
UNPUBLISHED = {
    "plot-coherence-wp": (
        "none trained here agreed with people on WP better than `roc` (benchmarks/experiments/wp_v2.md); "
        "train one as docs/TRAINING.md says ('WritingPrompts on a CPU')"
    ),
}


def default_note(metric: str, default: str, fast: str | None) -> str | None:
    """The one line a load of ``metric``'s default config says: which config that is and how to get the fast one
    (as evaluate's BLEURT names its other checkpoints); None where the default is the fast config."""
    if fast is None or fast == default:
        return None
    return (f"{metric}: the default config is '{default}' (MPNet-base); '{fast}' (MiniLM) is at least five times faster: "
            f"evaluate.load('{metric}', '{fast}') or storyeval score --config {fast}")


def metric_spec(metric: str) -> MetricSpec:
    """The entry of ``metric``, or a ValueError listing the metrics there are."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {sorted(METRICS)}")
    return METRICS[metric]


def import_object(path: str):
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)
