"""storyeval: learned, reference-free metrics for generated stories."""

from storyeval.api import download_model, load_from_checkpoint
from storyeval.rewards import reward
from storyeval.version import __version__

__all__ = ["__version__", "download_model", "load_from_checkpoint", "reward"]
