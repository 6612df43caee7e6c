"""storyeval: learned, reference-free metrics for generated stories."""

__version__ = "0.1.0.dev0"
