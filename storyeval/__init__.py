"""storyeval: learned, reference-free metrics for generated stories.

Layers, each importing only those before it: checkpoints/, the text layer (text, inputs, files),
models/, scoring/, analysis/, this public face (api, metric_base) and cli/ (README.md, "Layout").
"""
import importlib

from storyeval.analysis.ranks import score_by_rank
from storyeval.analysis.ray_data import score_dataset
from storyeval.analysis.rewards import reward
from storyeval.api import download_model, load_from_checkpoint
from storyeval.version import __version__

__all__ = ["__version__", "download_model", "load_from_checkpoint", "reward", "score_by_rank", "score_dataset"]

# the paths the README showed before analysis/ held these modules: storyeval.compare.compare_systems, ...
_MOVED = {"compare": "storyeval.analysis.compare", "explain": "storyeval.analysis.explain", "suite": "storyeval.analysis.suite"}


def __getattr__(name: str):
    if name in _MOVED:
        return importlib.import_module(_MOVED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
