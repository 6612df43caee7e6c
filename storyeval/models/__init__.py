"""The metrics' models: UNION (``union``, a transformers model) and continuation quality (``continuation``:
features, count statistics, a small network, an optional learned encoder), and the papers they follow.
May import storyeval.checkpoints and the text layer (text, inputs, files); never scoring or above.

``UnionConfig``, ``UnionModel`` and ``UnionOutput`` are imported from ``union`` on first use, so the
continuation model, which needs no transformers, loads without it; importing ``union`` registers them
with the transformers Auto classes.
"""
import importlib

__all__ = ["UnionConfig", "UnionModel", "UnionOutput"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("storyeval.models.union"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
