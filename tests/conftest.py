import os
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
SHARED = CHECKOUT.parent / "shared"

# Offline defaults, so a bare `pytest` behaves like CI.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("NLTK_DATA", str(SHARED / "nltk_data"))
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder; tests that need it skip when it is absent."""
    root = Path(os.environ.get("STORYEVAL_DATA", SHARED / "data"))
    if not (root / "roc").is_dir():
        pytest.skip(f"shared data not found at {root} (set STORYEVAL_DATA)")
    return root
