"""What comes with the package: the small checkpoints and the ``evaluate`` modules.

The repository keeps them in ``hub_cards/<checkpoint>/`` and ``metrics/<name>/``;
an installed package carries the same files as package data
(``storyeval/bundled_checkpoints/``, ``storyeval/bundled_metrics/``, mapped there by
setup.py, so git holds one copy of the weights).

Bundled checkpoints reach the scorers the way Hub downloads do: each is entered
into the Hugging Face cache as a snapshot of ``storyeval/<checkpoint>`` whose
commit is a hash of its files, and ``snapshot_download(repo_id, revision=<that
hash>, local_files_only=True)`` returns it. Pinning the revision keeps the
bundled copy the one a registered config means, even where a Hub download of the
same repo sits in the cache. The snapshot's files are symbolic links to the
package's files (copies where links cannot be made), as the cache links its own
snapshots to blobs; ``refs/main`` is written only where no Hub download set it.
"""
from __future__ import annotations

import functools
import hashlib
import shutil
import tempfile
from pathlib import Path

from filelock import FileLock

HUB_ORGANISATION = "storyeval"
PACKAGE = Path(__file__).resolve().parents[1]  # storyeval/, which the package data is mapped into
# a file in every snapshot this module wrote: `storyeval register` may replace such snapshots, never a download
MARKER = ".storyeval-bundled"


def _first_existing(*folders: Path) -> Path:
    return next((folder for folder in folders if folder.is_dir()), folders[-1])


# the installed package's data, else the source checkout's folders
CHECKPOINTS_ROOT = _first_existing(PACKAGE / "bundled_checkpoints", PACKAGE.parent / "hub_cards")
METRICS_ROOT = _first_existing(PACKAGE / "bundled_metrics", PACKAGE.parent / "metrics")


def checkpoint_folder(name: str, root: Path | None = None) -> Path | None:
    """The bundled folder of checkpoint ``name`` (``union-roc``), or None if none is bundled."""
    folder = Path(root or CHECKPOINTS_ROOT) / name
    return folder if (folder / "model.safetensors").is_file() else None


def repo_id(name: str) -> str:
    return f"{HUB_ORGANISATION}/{name}"


def checkpoint_files(folder: Path) -> list[str]:
    """The files of a checkpoint folder as sorted relative paths (``config.json``, ``encoder/model.safetensors``), as a
    Hub repo lists them; hidden files and folders are left out."""
    folder = Path(folder)
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*")
                  if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts))


def _files_hash(folder: Path, names: list[str], digest) -> str:
    """``digest`` (a hashlib object) of each named file of ``folder``, its name before its bytes, in the order given."""
    for name in names:
        digest.update(name.encode() + b"\0")
        with (folder / name).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@functools.lru_cache(maxsize=32)
def _content_hash(folder: str, stamp: tuple) -> str:
    # a flat folder hashes as it did before subfolders were read; 40 hex digits: a revision snapshot_download takes
    return _files_hash(Path(folder), checkpoint_files(Path(folder)), hashlib.sha1())


def folder_stamp(folder: Path) -> tuple:
    """Path, size and modification time of each file in ``folder``: whether its files changed, cheaply."""
    return tuple((name, (Path(folder) / name).stat().st_size, (Path(folder) / name).stat().st_mtime_ns) for name in checkpoint_files(folder))


def content_hash(folder: Path) -> str:
    """A commit-like hash of a checkpoint folder's files (recomputed when a file's size or time changes)."""
    return _content_hash(str(folder), folder_stamp(folder))


# files that record how a checkpoint was made, described or measured, not how it scores: a new card or
# benchmark row leaves its weights digest as it was
RECORD_FILES = frozenset({"README.md", "training_results.json", "reference_scores.json", "evaluation.json"})


@functools.lru_cache(maxsize=32)
def _weights_digest(folder: str, stamp: tuple) -> str:
    names = [name for name in checkpoint_files(Path(folder)) if Path(name).name not in RECORD_FILES]
    return _files_hash(Path(folder), names, hashlib.sha256())


def weights_digest(folder: Path) -> str:
    """A hash of the files of a checkpoint folder that decide its scores (weights, configuration, tokenizer), not of
    those that record it (:data:`RECORD_FILES`); recomputed when a file's size or time changes."""
    return _weights_digest(str(folder), folder_stamp(folder))


def storage_folder(name: str, cache_dir: str | Path | None = None) -> Path:
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    return Path(cache_dir or constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id(name), repo_type="model")


def _build_snapshot(files: list[str], source: Path, snapshot: Path, revision: str) -> None:
    # built beside and renamed, so a reader never sees half a snapshot
    staging = Path(tempfile.mkdtemp(prefix=f".{revision}-", dir=snapshot.parent))
    try:
        for name in files:
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            try:
                (staging / name).symlink_to((source / name).resolve())
            except OSError:  # no symbolic links here (as huggingface_hub does on such systems): copy
                shutil.copy2(source / name, staging / name)
        (staging / MARKER).write_text(f"{source.resolve()}\n")
        shutil.rmtree(snapshot, ignore_errors=True)  # an incomplete one (a copy of an earlier bundle under this revision)
        staging.rename(snapshot)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def enter_into_cache(name: str, cache_dir: str | Path | None = None, root: Path | None = None) -> str:
    """Make the bundled checkpoint ``name`` a snapshot in the Hugging Face cache; returns its revision.

    Idempotent: a complete snapshot is left as it is. Raises OSError where the cache cannot be written.
    """
    source = checkpoint_folder(name, root)
    if source is None:
        raise FileNotFoundError(f"no bundled checkpoint {name!r} in {root or CHECKPOINTS_ROOT}")
    revision = content_hash(source)
    storage = storage_folder(name, cache_dir)
    snapshot = storage / "snapshots" / revision
    files = checkpoint_files(source)

    def complete() -> bool:
        return all((snapshot / name).is_file() for name in files)

    if not complete():
        (storage / "snapshots").mkdir(parents=True, exist_ok=True)
        # one process at a time (ranks of a distributed eval load together): a second one finds the snapshot
        # complete under the lock instead of removing it while the first reads from it
        with FileLock(str(storage / f".{revision}.lock")):
            if not complete():
                _build_snapshot(files, source, snapshot, revision)
    refs = storage / "refs" / "main"
    current = refs.read_text().strip() if refs.is_file() else None
    if current != revision and (current is None or (storage / "snapshots" / current / MARKER).is_file()
                                or not (storage / "snapshots" / current).is_dir()):
        # main is ours to set unless a Hub download set it
        refs.parent.mkdir(parents=True, exist_ok=True)
        refs.write_text(revision)
    return revision


def remove_stale_snapshots(name: str, keep: str, cache_dir: str | Path | None = None) -> list[Path]:
    """Remove the snapshots of ``name`` this module wrote for other bundled versions; returns them."""
    removed = []
    snapshots = storage_folder(name, cache_dir) / "snapshots"
    for snapshot in snapshots.iterdir() if snapshots.is_dir() else ():
        if snapshot.name != keep and (snapshot / MARKER).is_file():
            shutil.rmtree(snapshot)
            removed.append(snapshot)
    return removed


def bundled_checkpoints(root: Path | None = None) -> list[str]:
    """The names of the checkpoints bundled here."""
    root = Path(root or CHECKPOINTS_ROOT)
    return sorted(p.name for p in root.iterdir() if checkpoint_folder(p.name, root)) if root.is_dir() else []


def metric_modules(root: Path | None = None) -> dict[str, Path]:
    """metric name -> its ``evaluate`` module script (``metrics/union/union.py``)."""
    root = Path(root or METRICS_ROOT)
    return {p.name: p / f"{p.name}.py" for p in sorted(root.iterdir()) if (p / f"{p.name}.py").is_file()} if root.is_dir() else {}

