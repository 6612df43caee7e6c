"""The tree stays clean under the project's lint rules (ruff.toml)."""
import shutil
import subprocess
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent


def test_the_tree_is_clean_under_ruff():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the dev extra)")
    done = subprocess.run([ruff, "check", "--no-cache", "."], cwd=CHECKOUT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
