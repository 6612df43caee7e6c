"""The int8 scorer that runs a cached export without torch (the CLI's cold start): same bits, and only when safe."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from storyeval.checkpoints import bundled
from storyeval.cli import main as cli
from storyeval.scoring.int8 import runtime as int8_runtime
from storyeval.scoring.int8.cached import SCORING_DEFAULTS, CachedInt8Scorer, load_cached_int8_scorer
from storyeval.scoring.sequence import load_union_scorer

for module in ("openvino", "nncf", "onnx"):
    pytest.importorskip(module, reason="the int8 runtime is optional: pip install openvino nncf onnx")
needs_int8_cpu = pytest.mark.skipif(not int8_runtime.cpu_has_int8_dot_product_by_flags(),
                                    reason="this CPU has no int8 dot-product instructions, or they cannot be read without torch")

STORY = "[MALE] was at the bar . he noticed a phone on the floor . he gave it to the bartender ."
LONG = " ".join(["he walked to the old house by the river and knocked on the door ."] * 4)  # several 16-token windows
STORIES = [STORY, "Tom left. He did not come back.", LONG, "she smiled at him ."]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Exports go to this test's folder, never to ~/.cache."""
    monkeypatch.setenv("STORYEVAL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "int8"


@pytest.fixture
def checkpoint(tiny_checkpoint, tmp_path) -> Path:
    """The tiny checkpoint under a path of this test's, so the loaders' shared scorers are this test's too."""
    return Path(shutil.copytree(tiny_checkpoint, tmp_path / "tiny"))


def exported(checkpoint: Path) -> list[float]:
    """Scores int8 with the torch scorer, which exports the checkpoint into the cache."""
    return load_union_scorer(checkpoint, device="cpu").score(STORIES, dtype="int8", batch_size=3)


def test_scoring_defaults_are_union_configs():
    from storyeval.models import UnionConfig

    defaults = UnionConfig()
    assert {key: getattr(defaults, key) for key in SCORING_DEFAULTS} == SCORING_DEFAULTS


@needs_int8_cpu
def test_cached_export_gives_the_torch_scorers_int8_scores_bit_for_bit(checkpoint):
    torch_scores = exported(checkpoint)
    scorer = load_cached_int8_scorer(checkpoint)
    assert isinstance(scorer, CachedInt8Scorer)
    torch_scorer = load_union_scorer(checkpoint, device="cpu")
    assert [scorer.windows(s) for s in STORIES] == [torch_scorer.windows(s) for s in STORIES]
    assert len(scorer.windows(LONG)) > 2
    assert scorer.score(STORIES, batch_size=3) == torch_scores
    assert scorer.window_scores(STORIES) == torch_scorer.window_scores(STORIES, dtype="int8")
    assert scorer.settings() == torch_scorer.settings("int8")


@needs_int8_cpu
def test_the_torch_scorer_is_needed_until_the_export_is_cached_and_again_when_the_files_change(checkpoint, private_cache):
    assert load_cached_int8_scorer(checkpoint) is None  # nothing exported yet
    exported(checkpoint)
    assert load_cached_int8_scorer(checkpoint) is not None
    config = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps({**config, "window_stride": 4}))
    assert load_cached_int8_scorer(checkpoint) is None  # the files changed: their export is not this one


@needs_int8_cpu
def test_an_export_made_before_it_could_be_found_learns_its_checkpoint(checkpoint, private_cache):
    exported(checkpoint)
    (manifest,) = private_cache.glob(f"*/{int8_runtime.MANIFEST}")
    recorded = json.loads(manifest.read_text())
    assert recorded["checkpoint_content_hashes"] == [bundled.content_hash(checkpoint)]
    manifest.write_text(json.dumps({**recorded, "checkpoint_content_hashes": []}))  # as an older version wrote it
    assert load_cached_int8_scorer(checkpoint) is None
    from storyeval.scoring.sequence import clear_loaded_scorers

    clear_loaded_scorers()
    exported(checkpoint)  # the torch scorer finds the export by its weights and records the folder's files
    assert load_cached_int8_scorer(checkpoint) is not None


@needs_int8_cpu
def test_refused_encoders_unknown_cpus_and_bad_arguments(checkpoint, monkeypatch):
    exported(checkpoint)
    with monkeypatch.context() as patched:
        patched.setattr(int8_runtime, "MEASURED_ONLY", {"bert": "measured one by one"})  # and this one was not
        assert load_cached_int8_scorer(checkpoint) is None
    with monkeypatch.context() as patched:
        patched.setattr(int8_runtime, "cpu_has_int8_dot_product_by_flags", lambda: None)
        assert load_cached_int8_scorer(checkpoint) is None  # only torch can tell: the torch scorer decides
    scorer = load_cached_int8_scorer(checkpoint)
    with pytest.raises(ValueError, match="int8 only"):
        scorer.score(STORIES, dtype="float32")
    with pytest.raises(ValueError, match="CPU only"):
        scorer.score(STORIES, device="cuda")
    with pytest.raises(ValueError, match=r"predictions\[1\]"):
        scorer.score([STORY, ""])
    assert load_cached_int8_scorer(checkpoint.parent / "missing") is None


@needs_int8_cpu
def test_cli_scores_int8_from_the_cache_without_torch_transformers_or_scipy(checkpoint, tmp_path):
    expected = exported(checkpoint)
    stories = tmp_path / "s.txt"
    stories.write_text("\n".join(STORIES) + "\n")
    probe = (
        "import json, sys\nfrom storyeval.cli import main as cli\n"
        f"code = cli.main(['score', {str(stories)!r}, '--config', {str(checkpoint)!r}, '--dtype', 'int8', '--quiet'])\n"
        "heavy = sorted({name.split('.')[0] for name in sys.modules} & {'torch', 'transformers', 'scipy', 'sklearn'})\n"
        "import scipy.stats  # hidden from NLTK only while it imported\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=dict(os.environ)).stdout
    *scores, report = out.strip().splitlines()
    assert json.loads(report) == {"code": 0, "heavy": []}
    assert [float(s) for s in scores] == expected


def test_nltk_imports_without_scipy_and_sklearn_only_in_a_fresh_process():
    probe = (
        "import json, sys\nfrom storyeval.cli import main as cli\ncli.import_nltk_without_unused_statistics()\n"
        "state = {'nltk': 'nltk' in sys.modules, 'scipy': 'scipy' in sys.modules, 'sklearn': 'sklearn' in sys.modules}\n"
        "import scipy.stats, sklearn\nprint(json.dumps(state))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {"nltk": True, "scipy": False, "sklearn": False}
    # where scipy is imported already (this test process), nothing is hidden
    import scipy  # noqa: F401

    cli.import_nltk_without_unused_statistics()
    assert sys.modules["scipy"] is not None
