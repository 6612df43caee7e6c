"""Loading a model without transformers' "Loading weights" bar on stderr: a scorer's output is its scores."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' progress bars off inside the block, as they were after it."""
    from transformers.utils import logging as transformers_logging

    bar_was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bar_was_enabled:
            transformers_logging.enable_progress_bar()
