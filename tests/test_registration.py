"""`storyeval register`: evaluate.load by name, offline, from a folder outside the repository."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import subprocess_env

from storyeval.checkpoints import registration

CHECKOUT = Path(__file__).resolve().parent.parent

LOAD_BY_NAME = """
import json, evaluate
names = ["union", "plot_coherence", "continuation_quality", "storyeval/union", "storyeval/plot_coherence", "storyeval/continuation_quality"]
loaded = {name: type(evaluate.load(name)).__name__ for name in names}
union = evaluate.load("union", "wp")
print(json.dumps({"loaded": loaded, "wp": union.compute(predictions=["Ken went home. He slept."])["settings"]}))
"""


def run_python(code, cwd, env):
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture
def isolated_env(tmp_path):
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_CACHE": str(tmp_path / "hub"),
           "HF_EVALUATE_CACHE": str(tmp_path / "evaluate"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env = subprocess_env(env)
    # the worktree's package first, as the tests import it
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(registration.__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    return env


def test_nothing_loads_by_name_before_registering(tmp_path, isolated_env):
    done = subprocess.run([sys.executable, "-c", "import evaluate; evaluate.load('union')"], cwd=tmp_path,
                          env=isolated_env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Couldn't find a module script" in done.stderr


def test_register_then_load_every_name_offline_from_anywhere(tmp_path, isolated_env):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    register = [sys.executable, "-c", "from storyeval.cli.main import main; raise SystemExit(main(['register']))"]
    first = subprocess.run(register, cwd=outside, env=isolated_env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "evaluate.load('storyeval/union')" in first.stderr and "storyeval/union-roc" in first.stderr
    loaded = run_python(LOAD_BY_NAME, outside, isolated_env)
    result = json.loads(loaded.stdout.splitlines()[-1])
    # a normal load is quiet: no "couldn't be found ... on the Hugging Face Hub", no warning that 'default' is 'roc'
    assert "couldn't be found" not in loaded.stderr and "WARNING" not in loaded.stderr.upper(), loaded.stderr[-2000:]
    assert result["loaded"] == {"union": "Union", "plot_coherence": "PlotCoherence", "continuation_quality": "ContinuationQuality",
                                "storyeval/union": "Union", "storyeval/plot_coherence": "PlotCoherence",
                                "storyeval/continuation_quality": "ContinuationQuality"}
    assert result["wp"].startswith("union-wp_fp32_")
    # again: harmless, nothing replaced
    again = subprocess.run(register, cwd=outside, env=isolated_env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "replaced" not in again.stderr


def test_a_stale_module_copy_is_replaced(tmp_path):
    metrics = tmp_path / "metrics"
    (metrics / "union").mkdir(parents=True)
    script = metrics / "union" / "union.py"
    script.write_text("VERSION = 1\n")
    modules = tmp_path / "modules"
    modules.mkdir()
    downloads = tmp_path / "downloads"
    first = registration.register_modules(str(modules), metrics, downloads)
    assert first.modules == ["union", "storyeval/union"] and first.replaced == []
    script.write_text("VERSION = 2\n")  # an upgrade changed the module
    second = registration.register_modules(str(modules), metrics, downloads)
    assert len(second.replaced) == 2
    copies = list((modules / "metrics" / "evaluate-metric--union").glob("*/union.py"))
    assert [p.read_text() for p in copies] == ["VERSION = 2\n"]
    for name in ("evaluate-metric/union", "storyeval/union"):
        assert registration.hub_download_path(name, "union.py", downloads).read_text() == "VERSION = 2\n"
