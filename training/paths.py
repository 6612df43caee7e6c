"""Where the training data lives.

The data is never bundled: set ``STORYEVAL_DATA`` to a folder laid out like
``shared/data`` (see its README), or keep that folder at ``../shared/data``
beside a source checkout.
"""
from __future__ import annotations

import os
from pathlib import Path

_CHECKOUT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def data_dir() -> Path:
    """The data root: ``$STORYEVAL_DATA``, else ``../shared/data`` beside the checkout."""
    env = os.environ.get("STORYEVAL_DATA")
    path = Path(env) if env else _CHECKOUT_DATA
    if not path.is_dir():
        raise FileNotFoundError(
            f"storyeval data folder not found at {path}. Set STORYEVAL_DATA to the folder "
            "that holds roc/, wp/, human/ and lexicon/."
        )
    return path
