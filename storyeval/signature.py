"""The settings string every score carries, so a paper can say exactly what it ran.

In the spirit of bert_score's hash: ``union-roc_fp32_storyeval-0.1.0.dev0_transformers-5.24_torch-2.13``
names the checkpoint, the precision the model ran in, and the versions of the
code that turned text into scores. Scores with the same string are comparable.
"""
from __future__ import annotations

import re

from storyeval.version import __version__


def major_minor(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13``: patch releases do not change scores, a minor one may."""
    match = re.match(r"\d+\.\d+", version)
    return match.group(0) if match else version


def settings_string(checkpoint: str, dtype=None) -> str:
    import torch
    import transformers

    from storyeval.devices import DTYPE_TAGS, resolve_dtype

    return (
        f"{checkpoint}_{DTYPE_TAGS[resolve_dtype(dtype)]}_storyeval-{__version__}"
        f"_transformers-{major_minor(transformers.__version__)}_torch-{major_minor(torch.__version__)}"
    )
