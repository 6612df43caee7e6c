"""Where checkpoints come from: the repo's bundled folders, then the Hugging Face Hub.

A ``config_name`` is one of the registered names (``roc``, ``wp``), a local
checkpoint folder, or a Hub repo id. Resolution order:

1. a registered name: the copy bundled with the package (``hub_cards/<checkpoint>/`` in
   a checkout), entered into the Hugging Face cache and returned by ``snapshot_download``
   like any download (see :mod:`storyeval.checkpoints.bundled`); else the Hub (so a folder called
   ``roc`` in the working directory, as in the shared data, does not shadow it; ``./roc``
   names the folder);
2. any other name: a local folder (a path that exists);
3. else ``huggingface_hub.snapshot_download`` -- which honours ``HF_HUB_OFFLINE``,
   ``local_files_only`` and the local cache.

A name that does not exist is a path, never a Hub id, when it starts with
``.``, ``/`` or ``~`` or is otherwise not a ``namespace/name`` id that
``huggingface_hub`` accepts (e.g. two or more ``/``): it fails with "no
checkpoint folder at <path>". A ``namespace/name`` that is not a folder goes
to the Hub; if that fails too, the error names the missing folder first.

With no network and no local copy, the error says what to download and where;
a repo the Hub does not have (or keeps private) and any other Hub failure get
their own messages.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from storyeval.checkpoints import bundled
from storyeval.checkpoints.registry import METRICS, UNION_MODEL_TYPE, UNPUBLISHED, metric_spec

# where the bundled checkpoints are: the package's data, else the checkout's hub_cards/ (see storyeval.checkpoints.bundled)
HUB_CARDS = bundled.CHECKPOINTS_ROOT
HUB_ORGANISATION = bundled.HUB_ORGANISATION

# views of storyeval.checkpoints.registry, where configs are added: metric -> config name -> checkpoint name, metric -> default
REGISTRY: dict[str, dict[str, str]] = {name: spec.configs for name, spec in METRICS.items()}
DEFAULT_CONFIG = {name: spec.default for name, spec in METRICS.items()}

logger = logging.getLogger(__name__)

OFFLINE_BACKBONE = "all-MiniLM-L6-v2"


def backbone_path(name_or_path: str = OFFLINE_BACKBONE) -> str:
    """A backbone's local folder where it has an offline copy (see :mod:`storyeval.checkpoints.backbones`);
    any other value (``bert-base-uncased``, a folder) unchanged, for ``from_pretrained`` to resolve."""
    from storyeval.checkpoints.backbones import resolve_backbone

    return resolve_backbone(name_or_path)


def resolve_checkpoint(metric: str, config_name: str, local_files_only: bool | None = None, cache_dir: str | None = None) -> Path:
    """A local folder holding the checkpoint named by ``config_name``; an unknown metric or config is a ValueError
    naming the choices."""
    names = metric_spec(metric).configs
    missing = place = None  # the folder a namespace/name config could also mean; a registered one's place
    if config_name == "default":
        config_name = DEFAULT_CONFIG[metric]
    if not config_name.strip():  # Path("") is the current folder
        raise ValueError(f"empty {metric} config name: choose one of {sorted(names) + ['default']}, a local checkpoint folder, or a Hub repo id")
    # registered names first, so a folder called "roc" in the working directory does not shadow them ("./roc" means it)
    if config_name not in names and Path(config_name).expanduser().is_dir():
        return Path(config_name).expanduser()
    if config_name in names:
        place = HUB_CARDS / names[config_name]
        if bundled.checkpoint_folder(names[config_name], HUB_CARDS):
            return _from_bundle(metric, names[config_name], cache_dir)
        if place.name in UNPUBLISHED:
            raise FileNotFoundError(
                f"no {place.name} checkpoint is bundled or published: {UNPUBLISHED[place.name]}, "
                "then pass its folder as the config name"
            )
        repo_id = f"{HUB_ORGANISATION}/{names[config_name]}"
    elif config_name.startswith((".", "/", "~")) or ("/" in config_name and not _is_repo_id(config_name)):
        raise FileNotFoundError(f"no checkpoint folder at {_local_path(config_name)}")
    elif "/" in config_name:
        # a Hub id, or a relative folder that is not there: a failure names both
        repo_id, missing = config_name, _local_path(config_name)
    else:
        raise ValueError(
            f"unknown {metric} config {config_name!r}: choose one of {sorted(names) + ['default']}, "
            "a local checkpoint folder, or a Hub repo id (owner/name)"
        )
    return _download(metric, repo_id, local_files_only, cache_dir, missing, place)


def resolve_named(name: str, local_files_only: bool | None = None, cache_dir: str | None = None) -> Path:
    """A local folder for ``name``: ``metric/config`` (``union/roc``), a registered checkpoint's name
    (``union-roc``, or its Hub id ``storyeval/union-roc``), a local folder, or any other Hub repo id."""
    head, _, tail = name.partition("/")
    if head in REGISTRY and tail:
        return resolve_checkpoint(head, tail, local_files_only, cache_dir)
    checkpoint = tail if head == HUB_ORGANISATION and tail else name
    for metric, configs in REGISTRY.items():
        for config, registered in configs.items():
            if registered == checkpoint:
                return resolve_checkpoint(metric, config, local_files_only, cache_dir)
    if Path(name).expanduser().is_dir():
        return Path(name).expanduser()
    if not _is_repo_id(name) or "/" not in name:
        known = sorted(c for configs in REGISTRY.values() for c in configs.values())
        raise ValueError(f"unknown checkpoint {name!r}: give one of {known}, metric/config (union/roc), a folder or a Hub repo id")
    return _download(None, name, local_files_only, cache_dir)


def recorded_metric(folder: str | Path) -> str | None:
    """The metric a checkpoint folder's own files name, or None if they name none we know."""
    folder = Path(folder)
    if (folder / "scorer_config.json").is_file():
        return "continuation_quality"
    if (folder / "config.json").is_file():
        config = json.loads((folder / "config.json").read_text())
        if config.get("model_type") == UNION_MODEL_TYPE:
            # plot-coherence exports always write `metric`; checkpoints from before the field are UNION's
            return config.get("metric", "union")
    return None


def checkpoint_name(folder: str | Path) -> str:
    """A checkpoint's short name: its Hub repo's name for a Hugging Face cache snapshot
    (``.../models--storyeval--union-roc/snapshots/<commit>``), else its folder's name."""
    folder = Path(folder).resolve() if Path(folder).exists() else Path(folder)
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.split("--")[-1]
    return folder.name


def scoring_digest(folder: str | Path) -> str:
    """Eight hex digits that change whenever what ``folder``'s checkpoint scores with changes: its
    :func:`storyeval.checkpoints.bundled.weights_digest`, with its part's for a mix (``ending_of``), so that a
    checkpoint whose name stayed while its weights were replaced says so in the settings string."""
    folder = Path(folder)
    digest = bundled.weights_digest(folder)
    config_file = folder / "config.json"
    part = json.loads(config_file.read_text()).get("ending_of") if config_file.is_file() else None
    if part:
        digest = hashlib.sha256(f"{digest}+{scoring_digest(resolve_named(part))}".encode()).hexdigest()
    return digest[:8]


def check_metric(metric: str, folder: str | Path) -> None:
    """Refuse another metric's checkpoint (plot-coherence and UNION share an architecture, so it would load and score),
    and a folder that is no storyeval checkpoint, such as a bare encoder, whose head would be random."""
    recorded = recorded_metric(folder)
    if recorded is None:
        raise ValueError(
            f"{folder} is not a storyeval checkpoint: it needs a config.json with model_type "
            f"'storyeval-union' (union, plot_coherence) or a scorer_config.json (continuation_quality); "
            "a bare encoder has no trained scoring head"
        )
    if recorded != metric:
        raise ValueError(
            f"{folder} is a {recorded} checkpoint, not a {metric} one (its config.json `metric`; none means union): "
            f"use it with the {recorded} metric, or pass a {metric} checkpoint"
        )


def _is_repo_id(name: str) -> bool:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _local_path(name: str) -> Path:
    return Path(name).expanduser().resolve()


def bundled_configs(metric: str) -> list[str]:
    """The registered configs of ``metric`` whose checkpoint is bundled in this checkout."""
    return sorted(name for name, folder in REGISTRY[metric].items() if bundled.checkpoint_folder(folder, HUB_CARDS))


def available_configs(metric: str) -> list[str]:
    """The registered configs of ``metric`` that can be loaded, in registry order: bundled, or published on
    the Hub (every registered checkpoint that is not :data:`UNPUBLISHED`). What ``--help`` lists."""
    return [name for name, folder in REGISTRY[metric].items()
            if bundled.checkpoint_folder(folder, HUB_CARDS) or folder not in UNPUBLISHED]


def _from_bundle(metric: str, name: str, cache_dir: str | None) -> Path:
    """A bundled checkpoint, through the Hugging Face cache like any download (see :mod:`storyeval.checkpoints.bundled`)."""
    try:
        revision = bundled.enter_into_cache(name, cache_dir, HUB_CARDS)
    except OSError as error:
        # a read-only cache must not make the copy that came with the package unusable
        logger.warning("could not enter %s into the Hugging Face cache (%s); using the bundled folder directly", name, error)
        return bundled.checkpoint_folder(name, HUB_CARDS)
    return _download(metric, bundled.repo_id(name), True, cache_dir, revision=revision)


def _bundled_note(metric: str | None) -> str:
    if metric is None:
        return ""
    return f"; bundled {metric} configs: {', '.join(bundled_configs(metric)) or 'none'}"


def _download(metric: str | None, repo_id: str, local_files_only: bool | None, cache_dir: str | None,
              missing: Path | None = None, place: Path | None = None, revision: str | None = None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    if local_files_only is None:
        from storyeval.checkpoints.backbones import hub_offline

        local_files_only = hub_offline()
    context = f"no checkpoint folder at {missing}, and " if missing else ""
    try:
        return Path(snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=local_files_only))
    except LocalEntryNotFoundError as error:
        # offline, no network or the Hub down, and not in the local cache
        copy = f", or copy it to {place}" if place else ""
        raise FileNotFoundError(
            f"{context}checkpoint {repo_id!r} is not available offline. On a machine with internet, run "
            f"`hf download {repo_id} --local-dir <folder>` and pass that folder as the config name{copy}."
        ) from error
    except RepositoryNotFoundError as error:
        if not isinstance(error, GatedRepoError):  # a gated repo exists: the Hub's own message says how to get access
            raise FileNotFoundError(
                f"{context}{repo_id!r} does not exist on the Hub or is private (if it is yours, log in with "
                f"`hf auth login`){_bundled_note(metric)}"
            ) from error
        failure = error
    except OSError as error:
        failure = error
    raise OSError(f"{context}could not fetch checkpoint {repo_id!r} from the Hub: {failure}") from failure
