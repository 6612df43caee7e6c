"""The settings string every score carries, so a paper can say exactly what it ran.

In the spirit of bert_score's hash:
``union-roc_fp32_storyeval-0.1.0.dev0_transformers-5.24_torch-2.13_weights-3f2a9c1e`` names the checkpoint, the
precision the model ran in, the versions of the code that turned text into scores, and a digest of the files the
checkpoint scores with (:func:`storyeval.checkpoints.resolution.scoring_digest`): a checkpoint keeps its name when a
better one replaces it, and the digest tells the two apart. Scores with the same string are comparable.
"""
from __future__ import annotations

import re
from importlib import metadata

from storyeval.version import __version__


def major_minor(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13``: patch releases do not change scores, a minor one may."""
    match = re.match(r"\d+\.\d+", version)
    return match.group(0) if match else version


# short names for the settings string (bert_score's hash idea), by dtype name
DTYPE_TAGS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int8": "int8"}


def installed_version(distribution: str) -> str:
    """A package's installed version, read from its metadata: the int8 scorer that runs without torch
    names the same versions as the torch scorers without importing torch or transformers."""
    return metadata.version(distribution)


def settings_string(checkpoint: str, dtype=None, weights: str | None = None) -> str:
    """The settings string of ``checkpoint``'s scores in ``dtype`` (a name or a torch dtype; None: float32), with
    the digest of its ``weights`` where they are known (``+``-joined for several checkpoints)."""
    # a torch dtype prints as "torch.<name>"
    name = "float32" if dtype is None else dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if name not in DTYPE_TAGS:
        raise ValueError(f"unsupported dtype {dtype!r}; choose from {sorted(DTYPE_TAGS)}")
    return (
        f"{checkpoint}_{DTYPE_TAGS[name]}_storyeval-{__version__}"
        f"_transformers-{major_minor(installed_version('transformers'))}_torch-{major_minor(installed_version('torch'))}"
        + (f"_weights-{weights}" if weights else "")
    )
