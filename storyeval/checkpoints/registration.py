"""``storyeval register``: make ``evaluate.load("union")`` and the bundled checkpoints work offline, from anywhere.

``evaluate.load(name)`` looks a name up on the Hub and, when the Hub has no
such module or cannot be reached, in its own modules cache: ``union`` under
``evaluate-metric--union``, ``storyeval/union`` under ``storyeval--union``, each
a folder of ``<64-hex hash>/<name>.py`` (the newest one wins). Registering
writes the package's metric modules there with evaluate's own function for it,
so the layout is evaluate's, and enters the bundled checkpoints into the
Hugging Face cache (see :mod:`storyeval.checkpoints.bundled`).

Re-running it is harmless. Copies of another version of a module or checkpoint
(after an upgrade, or a checkout at another commit) are replaced, and only those
that storyeval wrote.
"""
from __future__ import annotations

import os
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


def register_modules(dynamic_modules_path: str | None = None, metrics_root: Path | None = None) -> Registration:
    """Copy each metric module into evaluate's modules cache under both its names."""
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
