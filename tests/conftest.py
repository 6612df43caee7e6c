import os
import tempfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
SHARED = CHECKOUT.parent / "shared"

# Offline defaults, so a bare `pytest` behaves like CI.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("NLTK_DATA", str(SHARED / "nltk_data"))
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
# bundled checkpoints are entered into the Hugging Face cache when used: a fresh one per run, not the user's
os.environ.setdefault("HF_HUB_CACHE", tempfile.mkdtemp(prefix="storyeval-test-hf-cache-"))


def save_tiny_checkpoint(folder: Path, **config) -> Path:
    """A random one-layer scoring checkpoint (no reconstruction head) with a 16-token
    window, so windowing is easy to trigger; ``config`` overrides UnionConfig fields."""
    import torch
    from transformers import AutoTokenizer, BertConfig

    from storyeval.checkpoints import resolution as checkpoints
    from storyeval.models import UnionConfig, UnionModel

    torch.manual_seed(0)
    encoder = BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    settings = {"has_reconstruction_head": False, "max_length": 16, "window_stride": 8, **config}
    UnionModel(UnionConfig(encoder=encoder.to_dict(), **settings)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(checkpoints.backbone_path()).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A tiny UNION checkpoint, one per test module."""
    return save_tiny_checkpoint(tmp_path_factory.mktemp("union-tiny"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder; tests that need it skip when it is absent."""
    from storyeval_training.paths import data_dir

    try:
        root = data_dir()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    if not (root / "roc").is_dir():
        pytest.skip(f"shared data at {root} has no roc/ (set STORYEVAL_DATA)")
    return root


@pytest.fixture(scope="session")
def pinned_stories() -> list[str]:
    """Three stories whose scores the bundled checkpoints pin: a human-written
    story, its shuffled copy and a repetitive one."""
    opening = "Ken went to the bar with his friends."
    return [
        f"{opening} He noticed a phone on the floor. He picked it up and looked around. Nobody claimed it. He gave it to the bartender.",
        f"{opening} He gave it to the bartender. Nobody claimed it. He noticed a phone on the floor. He picked it up and looked around.",
        f"{opening}" + " He noticed a phone on the floor." * 4,
    ]


def subprocess_env(env: dict) -> dict:
    """``env`` for a subprocess run from another folder: NLTK_DATA made absolute (the README's test
    command gives it relative to the checkout)."""
    if env.get("NLTK_DATA"):
        env = {**env, "NLTK_DATA": os.pathsep.join(str(Path(folder).resolve()) for folder in env["NLTK_DATA"].split(os.pathsep))}
    return env
