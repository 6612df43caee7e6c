"""``storyeval register``: make ``evaluate.load("union")`` and the bundled checkpoints work offline, from anywhere.

``evaluate.load(name)`` looks a name up on the Hub and, when the Hub has no
such module or cannot be reached, in its own modules cache: ``union`` under
``evaluate-metric--union``, ``storyeval/union`` under ``storyeval--union``, each
a folder of ``<64-hex hash>/<name>.py`` (the newest one wins). Registering
writes the package's metric modules there with evaluate's own function for it,
so the layout is evaluate's, and enters the bundled checkpoints into the
Hugging Face cache (see :mod:`storyeval.checkpoints.bundled`).

Each module is also entered into evaluate's cache of Hub downloads, under the
address ``evaluate.load`` asks the Hub for first, as the checkpoints are entered
into the Hugging Face cache. When the Hub cannot serve that address (offline, or
no such Space), evaluate takes the cached file quietly. Without it evaluate
falls back to its modules cache with a warning that the module "couldn't be
found locally or remotely on the Hugging Face Hub", on every load, which reads
like a failure. Where the Hub does serve the address (a pushed Space), that copy
is used, as before.

Re-running it is harmless. Copies of another version of a module or checkpoint
(after an upgrade, or a checkout at another commit) are replaced, and only those
that storyeval wrote.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from storyeval.checkpoints import bundled

# the namespaces evaluate looks in: canonical metrics ("union") and the Spaces the push command creates ("storyeval/union")
NAMESPACES = ("evaluate-metric", bundled.HUB_ORGANISATION)


@dataclass
class Registration:
    modules: list[str] = field(default_factory=list)  # names evaluate.load now takes
    checkpoints: list[str] = field(default_factory=list)  # Hub ids snapshot_download now finds offline
    replaced: list[Path] = field(default_factory=list)  # stale copies removed


def hub_download_path(name: str, script: str, downloads_path: str | Path | None = None) -> Path:
    """Where evaluate's cache of Hub downloads keeps ``script`` of the Hub module ``name`` (``evaluate-metric/union``),
    at the revision ``evaluate.load`` asks for first: the file it reads when the Hub cannot serve it."""
    from evaluate import SCRIPTS_VERSION, config
    from evaluate.utils.file_utils import hash_url_to_filename, hf_hub_url

    revision = os.getenv("HF_SCRIPTS_VERSION", SCRIPTS_VERSION)
    if re.match(r"\d*\.\d*\.\d*", revision):  # as evaluate's HubEvaluationModuleFactory tags a version
        revision = "v" + revision
    url = hf_hub_url(path=name, name=script, revision=revision)
    return Path(downloads_path or config.DOWNLOADED_EVALUATE_PATH) / hash_url_to_filename(url)


def register_modules(dynamic_modules_path: str | None = None, metrics_root: Path | None = None,
                     downloads_path: str | Path | None = None) -> Registration:
    """Copy each metric module into evaluate's modules cache, and its cache of Hub downloads, under both its names."""
    from evaluate.loading import DownloadMode, _create_importable_file, init_dynamic_modules

    report = Registration()
    modules_path = dynamic_modules_path or init_dynamic_modules()
    for metric, script in bundled.metric_modules(metrics_root).items():
        for namespace in NAMESPACES:
            name = f"{namespace}/{metric}"
            # evaluate's writer for a module fetched from the Hub: the same folders, hash and metadata
            _, module_hash = _create_importable_file(
                local_path=str(script), local_imports=[], additional_files=[], dynamic_modules_path=modules_path,
                module_namespace="metrics", name=name, download_mode=DownloadMode.REUSE_DATASET_IF_EXISTS,
            )
            folder = Path(modules_path) / "metrics" / name.replace("/", "--")
            for other in folder.iterdir():
                if other.is_dir() and len(other.name) == 64 and other.name != module_hash:
                    shutil.rmtree(other)
                    report.replaced.append(other)
            os.utime(folder / module_hash / script.name)  # the newest copy is the one evaluate loads
            download = hub_download_path(name, script.name, downloads_path)
            download.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(script, download)  # replaces an older version's copy: the address is the same
            report.modules.append(metric if namespace == "evaluate-metric" else name)
    return report


def register_checkpoints(cache_dir: str | None = None, checkpoints_root: Path | None = None) -> Registration:
    """Enter every bundled checkpoint into the Hugging Face cache."""
    report = Registration()
    for name in bundled.bundled_checkpoints(checkpoints_root):
        revision = bundled.enter_into_cache(name, cache_dir, checkpoints_root)
        report.replaced += bundled.remove_stale_snapshots(name, revision, cache_dir)
        report.checkpoints.append(bundled.repo_id(name))
    return report


def register(dynamic_modules_path: str | None = None, cache_dir: str | None = None) -> Registration:
    modules = register_modules(dynamic_modules_path)
    checkpoints = register_checkpoints(cache_dir)
    return Registration(modules.modules, checkpoints.checkpoints, modules.replaced + checkpoints.replaced)
