"""The two-step loading API, as COMET has it: a name becomes a local folder, a folder becomes a scorer.

    >>> from storyeval import download_model, load_from_checkpoint
    >>> scorer = load_from_checkpoint(download_model("storyeval/union-roc"))  # doctest: +SKIP
    >>> scorer.score(["Ken went to the bar. He found a phone."])  # doctest: +SKIP
    [0.93...]
    >>> scorer.settings()  # doctest: +SKIP
    'union-roc_fp32_storyeval-0.1.0.dev0_transformers-5.24_torch-2.13'
"""
from __future__ import annotations

from pathlib import Path

from storyeval.checkpoints import resolution as checkpoints


def download_model(name: str, saving_directory: str | Path | None = None, local_files_only: bool | None = None) -> Path:
    """The local folder of checkpoint ``name``: a Hub repo id (``storyeval/union-roc``), a storyeval
    checkpoint's name (``union-roc``) or ``metric/config`` (``union/roc``).

    Goes through ``huggingface_hub.snapshot_download`` (``saving_directory`` is its ``cache_dir``);
    ``local_files_only=None`` follows ``HF_HUB_OFFLINE``. The checkpoints that come with the package
    are found there without a network.
    """
    return checkpoints.resolve_named(name, local_files_only=local_files_only, cache_dir=saving_directory)


def load_from_checkpoint(path: str | Path, device=None):
    """A scorer for the checkpoint folder ``path``, of the class its own files name (see
    :mod:`storyeval.checkpoints.registry`); ``scorer.score(...)`` scores and ``scorer.settings()`` says with what."""
    from storyeval.scoring.sequence import load_scorer

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"no checkpoint folder at {path}; download_model(name) gives one")
    metric = checkpoints.recorded_metric(path)
    if metric is None:
        checkpoints.check_metric("union", path)  # raises, saying what a checkpoint folder holds
    return load_scorer(metric, path, device=device)
