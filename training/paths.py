"""Where the training data lives.

The data is never bundled: set ``STORYEVAL_DATA`` to a folder laid out like
``shared/data`` (see its README), or keep that folder at ``../shared/data``
beside a source checkout.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

_CHECKOUT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


class DataFolderMissing(FileNotFoundError):
    """The data root is not where it was looked for."""


def data_dir() -> Path:
    """The data root: ``$STORYEVAL_DATA``, else ``../shared/data`` beside the checkout."""
    env = os.environ.get("STORYEVAL_DATA")
    path = Path(env) if env else _CHECKOUT_DATA
    if not path.is_dir():
        raise DataFolderMissing(
            f"storyeval data folder not found at {path}. Set STORYEVAL_DATA to the folder "
            "that holds roc/, wp/, human/ and lexicon/."
        )
    return path


class RunRefused(Exception):
    """What a run was given cannot be trained on as asked, found before its first step (a start model, its pairs):
    :func:`one_line_errors` ends it in one line. A recipe's refusal subclasses it beside ValueError."""


def one_line_errors(main):
    """A console script's ``main`` that ends a missing data folder or a :class:`RunRefused` in one line (exit status
    1), not a traceback: the first things a new user on another layout, or with another start model, meets."""
    @functools.wraps(main)
    def wrapper(argv=None):
        try:
            return main(argv)
        except (DataFolderMissing, RunRefused) as error:
            sys.exit(f"error: {error}")
    return wrapper
