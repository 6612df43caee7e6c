"""`storyeval push`: what --dry-run validates, and what a real push sends to the Hub."""
import shutil
from pathlib import Path

import datasets
import pytest

from storyeval.checkpoints import resolution as checkpoints
from storyeval.cli import hub
from storyeval.cli import main as cli
from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.data.technique_counts import technique_counts
from storyeval_training.export.model_card import write_negatives_card

CHECKOUT = Path(__file__).resolve().parent.parent


@pytest.fixture
def union_folder(tmp_path):
    bundled = checkpoints.HUB_CARDS / "union-roc"
    if not (bundled / "model.safetensors").is_file():
        pytest.skip("bundled union-roc checkpoint not in this checkout")
    folder = tmp_path / "union-roc"
    shutil.copytree(bundled, folder)
    return folder


@pytest.fixture
def negatives_folder(tmp_path):
    rows = {
        "id": ["a", "b"],
        "context": ["he sat .", "she ran ."],
        "human": ["he sat . he ate .", "she ran . she won ."],
        "negative": ["he sat . he did not eat .", "she ran . she won . she won ."],
        "original": ["he sat . he ate .", "she ran . she won ."],
        "techniques": [["negation"], ["repetition"]],
    }
    pairs = datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows, features=PAIR_FEATURES)})
    folder = tmp_path / "negatives"
    pairs.save_to_disk(str(folder))
    write_negatives_card(folder, "roc", 42, {"train": technique_counts(pairs["train"]), "seconds": 1.0})
    return folder


def test_dry_run_accepts_the_bundled_checkpoint_and_loads_it(union_folder):
    report = hub.validate_folder(union_folder)
    assert report.kind == "model"
    assert "model.safetensors" in report.files and "README.md" in report.files
    assert any(check.startswith("union checkpoint loads") for check in report.checks)


@pytest.mark.parametrize("metric", ["union", "continuation_quality"])
def test_dry_run_accepts_each_metric_folder_as_a_space(metric):
    report = hub.validate_folder(CHECKOUT / "metrics" / metric)
    assert report.kind == "space"
    assert {"app.py", "README.md", "requirements.txt", f"{metric}.py"} <= set(report.files)


def test_dry_run_accepts_the_combined_space_and_the_dataset_cards():
    assert hub.validate_folder(CHECKOUT / "spaces" / "storyeval").kind == "space"
    for name in ("rocstories", "writingprompts"):
        assert hub.validate_folder(CHECKOUT / "hub_cards" / "datasets" / name).kind == "dataset"


def test_negatives_folder_carries_a_valid_dataset_card(negatives_folder):
    report = hub.validate_folder(negatives_folder)
    assert report.kind == "dataset"
    card = (negatives_folder / "README.md").read_text()
    assert "| train | 2 | negation 1, repetition 1 | 1: 2 |" in card
    assert any("dataset loads" in check for check in report.checks)


def test_dry_run_rejects_a_card_without_results(union_folder):
    readme = union_folder / "README.md"
    text = readme.read_text()
    readme.write_text(text.replace(text[text.index("model-index:") : text.index("\n---", 4)], "tags: [x]"))
    with pytest.raises(hub.PushError, match="model-index"):
        hub.validate_folder(union_folder)


def test_dry_run_rejects_broken_yaml_and_missing_cards(union_folder):
    readme = union_folder / "README.md"
    readme.write_text("---\nlicense: [apache\n---\n# card\n")
    with pytest.raises(hub.PushError, match="does not parse"):
        hub.validate_folder(union_folder)
    readme.unlink()
    with pytest.raises(hub.PushError, match="no README.md"):
        hub.validate_folder(union_folder)


def test_dry_run_rejects_an_oversized_checkpoint(union_folder, monkeypatch):
    monkeypatch.setattr(hub, "MAX_CHECKPOINT_MB", 1)
    with pytest.raises(hub.PushError, match="over the 1 MB limit"):
        hub.validate_folder(union_folder)


def test_dry_run_rejects_unknown_folders(tmp_path):
    with pytest.raises(hub.PushError, match="no such folder"):
        hub.validate_folder(tmp_path / "missing")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(hub.PushError, match="not a checkpoint"):
        hub.validate_folder(tmp_path)


def test_push_creates_the_repo_and_uploads_the_folder(negatives_folder, monkeypatch):
    calls = []

    class RecordingApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            calls.append(("create_repo", repo_id, kwargs))

        def upload_folder(self, **kwargs):
            calls.append(("upload_folder", kwargs["repo_id"], kwargs))

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    hub.push_folder(negatives_folder, "someone/union-negatives-roc")
    assert [c[0] for c in calls] == ["create_repo", "upload_folder"]
    assert calls[0][2]["repo_type"] == "dataset" and calls[0][2]["exist_ok"]
    assert calls[1][2]["folder_path"] == str(negatives_folder)


def test_leftovers_are_neither_counted_nor_uploaded(negatives_folder, monkeypatch):
    before = hub.validate_folder(negatives_folder).files
    for leftover in ["scores.jsonl.partial", ".DS_Store", ".ipynb_checkpoints/README-checkpoint.md",
                     ".cache/huggingface/download/x.lock", "train/__pycache__/x.pyc"]:
        (negatives_folder / leftover).parent.mkdir(parents=True, exist_ok=True)
        (negatives_folder / leftover).write_text("x")
    assert hub.validate_folder(negatives_folder).files == before
    uploaded = []

    class RecordingApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            pass

        def upload_folder(self, **kwargs):
            from huggingface_hub.utils import filter_repo_objects

            files = [str(p.relative_to(negatives_folder)) for p in negatives_folder.rglob("*") if p.is_file()]
            uploaded.extend(filter_repo_objects(files, ignore_patterns=kwargs["ignore_patterns"]))

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    hub.push_folder(negatives_folder, "someone/union-negatives-roc")
    assert sorted(uploaded) == before


def test_cli_dry_run_reports_and_fails_clearly(negatives_folder, tmp_path, capsys):
    assert cli.main(["push", str(negatives_folder), "--repo-id", "someone/x", "--dry-run"]) == 0
    assert "would upload" in capsys.readouterr().err
    assert cli.main(["push", str(tmp_path / "missing"), "--repo-id", "someone/x", "--dry-run"]) == 1
    assert "no such folder" in capsys.readouterr().err
    # a repo id the Hub would refuse fails the dry run too, before any upload could start
    assert cli.main(["push", str(negatives_folder), "--repo-id", "bad id!!", "--dry-run"]) == 1
    assert "invalid repo id 'bad id!!'" in capsys.readouterr().err


def test_cli_push_of_a_model_folder_without_nltk_data_is_a_clean_error(union_folder, monkeypatch, capsys, tmp_path):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])  # the dry run loads the checkpoint, which needs NLTK data
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    assert cli.main(["push", str(union_folder), "--repo-id", "someone/x", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert "storyeval: error: NLTK resource" in err and "not found" in err and "Traceback" not in err


@pytest.mark.parametrize("card", sorted(checkpoints.HUB_CARDS.glob("*/README.md")), ids=lambda p: p.parent.name)
def test_model_cards_do_not_offer_a_transformers_pipeline_that_cannot_load_them(card):
    from huggingface_hub import ModelCard

    data = ModelCard.load(card).data
    assert data.library_name == "storyeval" and data.pipeline_tag is None


@pytest.mark.parametrize(
    "line, message",
    [
        ("storyeval[demo]", "storyeval is on no package index"),
        ("./storyeval-0.0.1-py3-none-any.whl[demo]", "is not the wheel the push uploads"),
        ("storyeval[demo @ nowhere", "pip cannot parse"),
        ("gradio>=5.0", "storyeval is not required"),
    ],
)
def test_dry_run_catches_a_requirement_a_space_cannot_install(tmp_path, line, message):
    space = tmp_path / "space"
    shutil.copytree(Path(__file__).resolve().parent.parent / "spaces" / "storyeval", space)
    (space / "requirements.txt").write_text(f"--extra-index-url https://download.pytorch.org/whl/cpu\nevaluate>=0.4.6\n{line}\n")
    with pytest.raises(hub.PushError, match=message):
        hub.validate_folder(space)


@pytest.mark.parametrize("folder", ["metrics/union", "metrics/plot_coherence", "metrics/continuation_quality", "spaces/storyeval"])
def test_every_space_installs_storyeval_from_the_wheel_the_push_uploads(folder):
    requirements = Path(__file__).resolve().parent.parent / folder / "requirements.txt"
    assert hub.check_requirements(requirements) == f"requirements.txt installable: storyeval from the wheel the push builds and uploads ({hub.space_wheel()})"
