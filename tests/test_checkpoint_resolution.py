"""Which checkpoint a config name resolves to, and the errors when it cannot: Hub ids,
mistyped paths, Hub failures, the unpublished plot-coherence wp checkpoint, a checkpoint
of the wrong metric, and evaluate's cache files kept out of checkpoint folders."""
from pathlib import Path

import datasets
import evaluate
import httpx2
import huggingface_hub
import pytest
from conftest import save_tiny_checkpoint
from huggingface_hub.errors import (
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
)

from storyeval.checkpoints import resolution as checkpoints
from storyeval.scoring import sequence as scoring

METRICS = Path(__file__).resolve().parent.parent / "metrics"
REAL_SNAPSHOT_DOWNLOAD = huggingface_hub.snapshot_download


def same_files(resolved: Path, folder: Path) -> bool:
    """Whether a resolved checkpoint (a Hugging Face cache snapshot of a bundled one) holds ``folder``'s weights."""
    return (resolved / "model.safetensors").resolve() == (folder / "model.safetensors").resolve()
STORY = "bob sat down . he ate lunch . he went home ."


@pytest.fixture(scope="module")
def union_checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("union-tiny"))


@pytest.fixture(scope="module")
def plot_checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("plot-tiny"), metric="plot_coherence", delexicalize=False)


@pytest.fixture
def hub_calls(monkeypatch, tmp_path):
    """snapshot_download replaced: records the repo ids and returns an empty folder."""
    calls = []

    def fake(repo_id, **kwargs):
        calls.append(repo_id)
        return str(tmp_path)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    return calls


def failing_hub(monkeypatch, error):
    def fake(repo_id, **kwargs):
        raise error

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)


def http_error(cls, status):
    return cls(f"{status} Client Error", response=httpx2.Response(status, request=httpx2.Request("GET", "https://huggingface.co/api/models/org/x")))


@pytest.mark.parametrize("repo_id", ["org/model-v1.5", "org.name/model_2", "Org/Model.v2-final"])
def test_hub_ids_with_dots_go_to_the_hub(hub_calls, tmp_path, repo_id):
    assert checkpoints.resolve_checkpoint("union", repo_id) == tmp_path
    assert hub_calls == [repo_id]


@pytest.mark.parametrize("name", ["./my_ckpt", "~/nonexist", "/abs/missing", "outputs/run/best", "../my_ckpt"])
def test_a_missing_path_says_no_checkpoint_folder(hub_calls, monkeypatch, tmp_path, name):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    resolved = Path(name).expanduser().resolve()
    with pytest.raises(FileNotFoundError, match=f"no checkpoint folder at {resolved}$"):
        checkpoints.resolve_checkpoint("union", name)
    assert hub_calls == []


def test_a_relative_path_from_another_directory_names_the_missing_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=f"^no checkpoint folder at {tmp_path / 'hub_cards' / 'union-roc'}"):
        checkpoints.resolve_checkpoint("union", "hub_cards/union-roc")


def test_an_existing_relative_folder_is_used(monkeypatch, tmp_path, union_checkpoint):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "best").symlink_to(union_checkpoint)
    monkeypatch.chdir(tmp_path)
    assert checkpoints.resolve_checkpoint("union", "runs/best") == Path("runs/best")


def test_offline_says_what_to_download(monkeypatch):
    failing_hub(monkeypatch, LocalEntryNotFoundError("outgoing traffic has been disabled"))
    with pytest.raises(OSError, match=r"not available offline.*hf download org/model-v1\.5") as raised:
        checkpoints.resolve_checkpoint("union", "org/model-v1.5")
    # only a registered config has a bundled place to copy to
    assert "hub_cards" not in str(raised.value)


def test_a_missing_repo_says_so_and_lists_the_bundled_configs(monkeypatch):
    failing_hub(monkeypatch, http_error(RepositoryNotFoundError, 404))
    listed = r"bundled union configs: roc, roc-base, roc-complete, roc-neighbours, wp"
    with pytest.raises(OSError, match=r"does not exist on the Hub or is private.*" + listed) as raised:
        checkpoints.resolve_checkpoint("union", "org/nothing")
    assert "offline" not in str(raised.value) and isinstance(raised.value.__cause__, RepositoryNotFoundError)


@pytest.mark.parametrize("error", [http_error(HfHubHTTPError, 500), PermissionError("cache is read-only")])
def test_other_hub_errors_keep_their_cause(monkeypatch, error):
    failing_hub(monkeypatch, error)
    with pytest.raises(OSError, match=f"could not fetch checkpoint 'org/model' from the Hub: .*{error}") as raised:
        checkpoints.resolve_checkpoint("union", "org/model")
    assert "offline" not in str(raised.value) and raised.value.__cause__ is error


def test_plot_coherence_wp_says_none_is_bundled_and_how_to_train_one(hub_calls, monkeypatch, tmp_path, plot_checkpoint):
    monkeypatch.setattr(checkpoints, "HUB_CARDS", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no plot-coherence-wp checkpoint is bundled or published") as raised:
        checkpoints.resolve_checkpoint("plot_coherence", "wp")
    assert "docs/TRAINING.md" in str(raised.value) and "pass its folder as the config name" in str(raised.value)
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 300  # one line, not a paragraph
    assert "hf download" not in str(raised.value) and hub_calls == []
    # a trained one, put where the message says, is used (through the cache, as a bundled one)
    (tmp_path / "plot-coherence-wp").symlink_to(plot_checkpoint)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", REAL_SNAPSHOT_DOWNLOAD)
    assert same_files(checkpoints.resolve_checkpoint("plot_coherence", "wp"), plot_checkpoint)


@pytest.mark.parametrize("config, checkpoint, reason", [
    ("wp", "plot-coherence-wp", "none trained here agreed with people on WP better than `roc`"),
])
def test_unpublished_plot_coherence_configs_are_valid_names_that_say_why(config, checkpoint, reason):
    with pytest.raises(FileNotFoundError, match=f"no {checkpoint} checkpoint is bundled or published: {reason}"):
        evaluate.load(str(METRICS / "plot_coherence"), config)


def test_a_checkpoint_of_another_metric_is_refused(union_checkpoint, plot_checkpoint):
    with pytest.raises(ValueError, match=r"is a union checkpoint, not a plot_coherence one"):
        evaluate.load(str(METRICS / "plot_coherence"), str(union_checkpoint))
    with pytest.raises(ValueError, match=r"is a plot_coherence checkpoint, not a union one"):
        evaluate.load(str(METRICS / "union"), str(plot_checkpoint))
    with pytest.raises(ValueError, match=r"is a union checkpoint, not a plot_coherence one"):
        scoring.load_scorer("plot_coherence", union_checkpoint, device="cpu")
    # while each metric's own checkpoint loads, and scores as that metric's scorer does
    for metric, checkpoint in (("plot_coherence", plot_checkpoint), ("union", union_checkpoint)):
        scores = evaluate.load(str(METRICS / metric), str(checkpoint)).compute(predictions=[STORY])["scores"]
        direct = scoring.load_scorer(metric, checkpoint, device="cpu").score([STORY])
        assert len(scores) == 1 and 0.0 <= scores[0] <= 1.0 and scores == pytest.approx(direct, abs=1e-4)


def test_the_bundled_union_checkpoint_is_refused_as_plot_coherence():
    folder = checkpoints.HUB_CARDS / "union-roc"
    if not (folder / "config.json").is_file():
        pytest.skip("bundled union-roc checkpoint not in this checkout")
    # union-roc predates the config's `metric` field: no field means UNION
    with pytest.raises(ValueError, match="is a union checkpoint"):
        evaluate.load(str(METRICS / "plot_coherence"), str(folder))


@pytest.mark.parametrize("relative", [False, True])
def test_evaluate_writes_nothing_into_a_checkpoint_folder(union_checkpoint, monkeypatch, tmp_path, relative):
    before = sorted(p.name for p in union_checkpoint.iterdir())
    cache = tmp_path / "cache"
    if relative:  # '..' must not climb out of evaluate's cache either
        monkeypatch.chdir(union_checkpoint)
        config = "../" + union_checkpoint.name
    else:
        config = str(union_checkpoint)
    metric = evaluate.load(str(METRICS / "union"), config, cache_dir=str(cache))
    metric.add_batch(predictions=[STORY])
    assert len(metric.compute()["scores"]) == 1
    assert sorted(p.name for p in union_checkpoint.iterdir()) == before
    assert Path(metric.data_dir).resolve().is_relative_to(cache.resolve())


def test_registered_configs_keep_evaluates_cache_layout(tmp_path):
    metric = evaluate.load(str(METRICS / "union"), "roc", cache_dir=str(tmp_path))
    assert Path(metric.data_dir) == tmp_path / "union" / "roc"


def test_a_bare_encoder_folder_is_refused_not_scored_with_a_random_head():
    with pytest.raises(ValueError, match="is not a storyeval checkpoint"):
        evaluate.load(str(METRICS / "union"), checkpoints.backbone_path())


def test_registered_names_win_over_a_folder_of_that_name(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "roc").mkdir()  # as in the shared data folder, which has roc/ and wp/
    assert same_files(checkpoints.resolve_checkpoint("union", "roc"), checkpoints.HUB_CARDS / "union-roc")
    assert checkpoints.resolve_checkpoint("union", "./roc") == Path("roc")  # the folder, when asked for by path


@pytest.mark.parametrize("name", ["", "  "])
def test_a_blank_config_name_lists_the_choices(name):
    choices = (r"\['roc', 'roc-base', 'roc-complete', 'roc-neighbours', 'wp', 'wp-base', 'wp-base-complete', 'wp-base-ending', "
               r"'wp-base-ending-neighbours', 'wp-base-ordered', 'wp-complete', 'wp-neighbours', 'wp-ordered', 'default'\]")
    with pytest.raises(ValueError, match=r"empty union config name: choose one of " + choices):
        checkpoints.resolve_checkpoint("union", name)


def test_evaluates_local_files_only_reaches_the_hub_call(monkeypatch, union_checkpoint):
    calls = []

    def fake(repo_id, **kwargs):
        calls.append(kwargs["local_files_only"])
        return str(union_checkpoint)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    evaluate.load(str(METRICS / "union"), "org/model-a", download_config=datasets.DownloadConfig(local_files_only=True))
    evaluate.load(str(METRICS / "union"), "org/model-b")
    assert calls == [True, False]
