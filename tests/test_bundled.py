"""Bundled checkpoints reach the scorers through the Hugging Face cache, as Hub downloads do."""
import huggingface_hub
import pytest
from conftest import save_tiny_checkpoint

from storyeval.checkpoints import bundled
from storyeval.checkpoints import resolution as checkpoints


@pytest.fixture
def bundle(tmp_path):
    root = tmp_path / "bundle"
    save_tiny_checkpoint(root / "union-roc")
    return root


def test_a_bundled_checkpoint_is_a_cache_snapshot_snapshot_download_finds_offline(bundle, tmp_path):
    cache = tmp_path / "cache"
    revision = bundled.enter_into_cache("union-roc", cache, bundle)
    # what a user's own code would call, offline, with no revision: refs/main points at it
    found = huggingface_hub.snapshot_download("storyeval/union-roc", cache_dir=cache, local_files_only=True)
    assert found.endswith(revision) and sorted(p.name for p in (bundle / "union-roc").iterdir()) == sorted(
        p.name for p in (cache / "models--storyeval--union-roc" / "snapshots" / revision).iterdir() if p.name != bundled.MARKER)
    # idempotent: entering it again changes nothing
    assert bundled.enter_into_cache("union-roc", cache, bundle) == revision
    assert len(list((cache / "models--storyeval--union-roc" / "snapshots").iterdir())) == 1


def test_a_changed_bundle_gets_a_new_snapshot_and_the_old_one_can_go(bundle, tmp_path):
    cache = tmp_path / "cache"
    old = bundled.enter_into_cache("union-roc", cache, bundle)
    config = bundle / "union-roc" / "config.json"
    config.write_text(config.read_text().replace('"window_stride": 8', '"window_stride": 7'))
    new = bundled.enter_into_cache("union-roc", cache, bundle)
    assert new != old and (cache / "models--storyeval--union-roc" / "refs" / "main").read_text() == new
    assert bundled.remove_stale_snapshots("union-roc", new, cache)[0].name == old


def test_a_hub_download_keeps_main_and_the_bundled_copy_keeps_its_revision(bundle, tmp_path):
    cache = tmp_path / "cache"
    storage = cache / "models--storyeval--union-roc"
    downloaded = storage / "snapshots" / ("a" * 40)
    downloaded.mkdir(parents=True)
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text("a" * 40)
    revision = bundled.enter_into_cache("union-roc", cache, bundle)
    assert (storage / "refs" / "main").read_text() == "a" * 40  # the download stays what main means
    bundled.remove_stale_snapshots("union-roc", revision, cache)
    assert downloaded.is_dir()  # never removed: storyeval did not write it


def test_resolving_a_registered_config_goes_through_the_cache(bundle, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "HUB_CARDS", bundle)
    calls = []
    real = huggingface_hub.snapshot_download

    def recording(repo_id, **kwargs):
        calls.append((repo_id, kwargs["local_files_only"], kwargs["revision"]))
        return real(repo_id, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", recording)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # online or not, the bundled copy never needs the network
    resolved = checkpoints.resolve_checkpoint("union", "roc", cache_dir=str(tmp_path / "cache"))
    assert calls == [("storyeval/union-roc", True, resolved.name)]
    assert checkpoints.checkpoint_name(resolved) == "union-roc"


def test_a_cache_that_cannot_be_written_falls_back_to_the_bundled_folder(bundle, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(checkpoints, "HUB_CARDS", bundle)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    assert checkpoints.resolve_checkpoint("union", "roc", cache_dir=str(blocked)) == bundle / "union-roc"
    assert "could not enter union-roc into the Hugging Face cache" in caplog.text


def test_no_bundled_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no bundled checkpoint 'union-roc'"):
        bundled.enter_into_cache("union-roc", tmp_path / "cache", tmp_path)


def _enter(args):
    cache, bundle = args
    return bundled.enter_into_cache("union-roc", cache, bundle)


def test_ranks_entering_the_same_bundle_at_once_all_get_the_complete_snapshot(bundle, tmp_path):
    """Every rank of a distributed eval loop loads the metric at the same moment on a fresh cache."""
    import multiprocessing

    cache = tmp_path / "cache"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        revisions = pool.map(_enter, [(cache, bundle)] * 8)
    assert len(set(revisions)) == 1
    snapshots = [p for p in (cache / "models--storyeval--union-roc" / "snapshots").iterdir() if not p.name.startswith(".")]
    assert [p.name for p in snapshots] == revisions[:1]
    assert sorted(p.name for p in snapshots[0].iterdir() if p.name != bundled.MARKER) == sorted(p.name for p in (bundle / "union-roc").iterdir())


def test_a_bundle_with_a_subfolder_enters_the_cache_whole_and_its_files_are_hashed(bundle, tmp_path):
    cache = tmp_path / "cache"
    flat = bundled.enter_into_cache("union-roc", cache, bundle)
    (bundle / "union-roc" / "encoder").mkdir()
    (bundle / "union-roc" / "encoder" / "config.json").write_text("{}")
    (bundle / "union-roc" / ".hidden").mkdir()
    (bundle / "union-roc" / ".hidden" / "notes.txt").write_text("not part of the checkpoint")
    nested = bundled.enter_into_cache("union-roc", cache, bundle)
    snapshot = cache / "models--storyeval--union-roc" / "snapshots" / nested
    assert nested != flat and (snapshot / "encoder" / "config.json").read_text() == "{}" and not (snapshot / ".hidden").exists()
    assert "encoder/config.json" in bundled.checkpoint_files(bundle / "union-roc")
    (bundle / "union-roc" / "encoder" / "config.json").write_text('{"changed": true}')
    assert bundled.enter_into_cache("union-roc", cache, bundle) != nested
