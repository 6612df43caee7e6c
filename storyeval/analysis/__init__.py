"""What is made of scores: systems compared (``compare``), sentences blamed (``explain``), percentiles among
human-written stories (``percentiles``), every metric in one call (``suite``) and rewards (``rewards``).
May import storyeval.scoring and everything below it; never the public face (api, metric_base) or cli."""
import importlib

SUBMODULES = ("compare", "explain", "percentiles", "rewards", "suite")


def __getattr__(name: str):
    # `import storyeval` then `storyeval.analysis.compare.compare_systems(...)` works, as the README's prose reads,
    # without importing every submodule (and scipy, NLTK) at `import storyeval`
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
