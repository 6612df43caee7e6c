"""A non-editable install, used from outside the repository: the metrics load by name and the bundled
checkpoints resolve with no source checkout. Slow (it builds a wheel of the checkpoints): run with
STORYEVAL_INSTALL_TEST=1 python -m pytest tests/test_installed_package.py"""
import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
from conftest import subprocess_env

CHECKOUT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not os.environ.get("STORYEVAL_INSTALL_TEST"), reason="slow: set STORYEVAL_INSTALL_TEST=1")

USE = """
import json, evaluate, storyeval
from storyeval.checkpoints import bundled
from storyeval.checkpoints import resolution as checkpoints
names = ["union", "plot_coherence", "continuation_quality", "storyeval/union", "storyeval/plot_coherence", "storyeval/continuation_quality"]
metrics = [evaluate.load(name) for name in names]
combined = evaluate.combine([evaluate.load("union"), evaluate.load("plot_coherence"), evaluate.load("continuation_quality")])
results = combined.compute(predictions=["He gave the phone back."], contexts=["Ken found a phone at the bar."])
print(json.dumps({"package": storyeval.__file__, "bundle": str(bundled.CHECKPOINTS_ROOT),
                  "checkpoint": str(storyeval.download_model("union-roc")), "results": sorted(results)}))
"""


def test_a_wheel_install_scores_by_name_from_outside_the_repository(tmp_path):
    source = tmp_path / "source"  # a clean copy: the build writes build/ and egg-info beside setup.py
    source.mkdir()
    for name in ["setup.py", "README.md", "storyeval", "training", "metrics", "hub_cards"]:
        if (CHECKOUT / name).is_dir():
            shutil.copytree(CHECKOUT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(CHECKOUT / name, source / name)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)  # reuses the installed torch
    python = env_dir / "bin" / "python"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "HF_MODULES_CACHE": str(tmp_path / "modules"),
           "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PIP_NO_INPUT": "1"}
    env = subprocess_env(env)
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(source)],
                             cwd=elsewhere, env=env, capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    shutil.rmtree(source)  # nothing may come from the source tree from here on
    register = subprocess.run([str(env_dir / "bin" / "storyeval"), "register"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert register.returncode == 0, register.stderr[-3000:]
    used = subprocess.run([str(python), "-c", USE], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=900)
    assert used.returncode == 0, used.stderr[-3000:]
    report = json.loads(used.stdout.splitlines()[-1])
    assert report["package"].startswith(str(env_dir)) and report["bundle"].startswith(str(env_dir))
    assert report["checkpoint"].startswith(str(tmp_path / "hub"))
    assert {"union_scores", "plot_coherence_scores", "overall"} <= set(report["results"])
    scored = subprocess.run([str(env_dir / "bin" / "storyeval"), "score", str(CHECKOUT / "examples" / "stories.txt"), "--quiet"],
                            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0 and len(scored.stdout.splitlines()) == len((CHECKOUT / "examples" / "stories.txt").read_text().splitlines())
