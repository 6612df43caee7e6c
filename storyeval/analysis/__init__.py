"""What is made of scores: systems compared (``compare``), sentences blamed (``explain``), percentiles among
human-written stories (``percentiles``), every metric in one call (``suite``), rewards (``rewards``), and scoring at scale: a Ray Data
dataset on a pool of actors (``ray_data``), each rank of an accelerate job its own stories (``ranks``), both
through one row scorer that gives a row with no letters NaN and a reason (``rows``).
May import storyeval.scoring and everything below it; never the public face (api, metric_base) or cli."""
import importlib

SUBMODULES = ("compare", "explain", "percentiles", "ranks", "ray_data", "rewards", "rows", "suite")


def __getattr__(name: str):
    # `import storyeval` then `storyeval.analysis.compare.compare_systems(...)` works, as the README's prose reads,
    # without importing every submodule (and scipy, NLTK) at `import storyeval`
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
