"""Push a checkpoint, metric, Space or dataset folder to the Hugging Face Hub.

    storyeval push hub_cards/union-roc --repo-id storyeval/union-roc --dry-run
    storyeval push metrics/union --repo-id storyeval/union

The folder's kind decides the Hub repo type: a checkpoint folder (a model card
beside its weights) becomes a model repo, a metric or app folder (``app.py``
and a card with Space front matter) a Space, and a dataset folder (a dataset
card, optionally beside ``save_to_disk`` files) a dataset repo.

``--dry-run`` checks everything that can be checked offline -- the card parses
and has the metadata the Hub shows, the files are present, the checkpoint loads
and is small enough to commit -- and uploads nothing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub.utils import filter_repo_objects

MAX_CHECKPOINT_MB = 50  # bundled checkpoints are committed to git
MODEL_CARD_KEYS = ("license", "datasets", "tags", "model-index")
SPACE_CARD_KEYS = ("title", "sdk", "app_file")
DATASET_CARD_KEYS = ("license", "language", "task_categories", "pretty_name")


class PushError(ValueError):
    """The folder is not ready to push; the message says what is wrong."""


@dataclass
class FolderReport:
    kind: str  # "model", "space" or "dataset"
    files: list[str]
    checks: list[str] = field(default_factory=list)


def _card_metadata(folder: Path, card_class) -> dict:
    readme = folder / "README.md"
    if not readme.is_file():
        raise PushError(f"{folder}: no README.md card")
    try:
        card = card_class.load(readme)
    except Exception as error:  # the Hub's parser is the judge: any failure means the card is broken
        raise PushError(f"{readme}: the card does not parse ({error})") from None
    metadata = card.data.to_dict()
    if not metadata:
        raise PushError(f"{readme}: the card has no YAML front matter")
    return metadata


def _require_keys(metadata: dict, keys, where: Path) -> None:
    missing = [key for key in keys if not metadata.get(key)]
    if missing:
        raise PushError(f"{where / 'README.md'}: front matter lacks {', '.join(missing)}")


def folder_kind(folder: Path) -> str:
    if (folder / "model.safetensors").is_file():
        return "model"
    if (folder / "app.py").is_file():
        return "space"
    if (folder / "dataset_info.json").is_file() or (folder / "dataset_dict.json").is_file() or _is_dataset_card(folder):
        return "dataset"
    raise PushError(
        f"{folder}: not a checkpoint (model.safetensors), a metric/Space (app.py) or a dataset folder (dataset card)"
    )


def _is_dataset_card(folder: Path) -> bool:
    readme = folder / "README.md"
    return readme.is_file() and "task_categories:" in readme.read_text(encoding="utf-8").split("\n---", 1)[0]


# never uploaded, and not counted by --dry-run: byte code, the CLI's half-written outputs, and hidden
# files and folders (editor and notebook leftovers, the download cache under .cache/)
UPLOAD_IGNORE = ["__pycache__/*", "*/__pycache__/*", "*.pyc", "*.partial", ".*", "*/.*"]


def validate_folder(folder: str | Path) -> FolderReport:
    """Everything ``--dry-run`` checks; raises :class:`PushError` on the first problem."""
    from huggingface_hub import DatasetCard, ModelCard, SpaceCard

    folder = Path(folder)
    if not folder.is_dir():
        raise PushError(f"{folder}: no such folder")
    kind = folder_kind(folder)
    files = sorted(filter_repo_objects((str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()),
                                       ignore_patterns=UPLOAD_IGNORE))
    report = FolderReport(kind, files)
    if kind == "model":
        metadata = _card_metadata(folder, ModelCard)
        _require_keys(metadata, MODEL_CARD_KEYS, folder)
        if (folder / "config.json").is_file():
            _require_keys(metadata, ("base_model",), folder)
        if not ModelCard.load(folder / "README.md").data.eval_results:
            raise PushError(f"{folder / 'README.md'}: model-index has no results")
        report.checks.append("model card parses, with license, datasets, tags and model-index results")
        size_mb = (folder / "model.safetensors").stat().st_size / 2**20
        if size_mb > MAX_CHECKPOINT_MB:
            raise PushError(f"{folder / 'model.safetensors'}: {size_mb:.1f} MB, over the {MAX_CHECKPOINT_MB} MB limit")
        metric = checkpoint_metric(folder)
        from storyeval.scoring.sequence import load_scorer

        load_scorer(metric, folder, device="cpu")
        report.checks.append(f"{metric} checkpoint loads ({size_mb:.1f} MB)")
    elif kind == "space":
        metadata = _card_metadata(folder, SpaceCard)
        _require_keys(metadata, SPACE_CARD_KEYS, folder)
        for needed in (metadata["app_file"], "requirements.txt"):
            if not (folder / needed).is_file():
                raise PushError(f"{folder}: {needed} is missing")
        modules = [p for p in folder.glob("*.py") if p.name != "app.py"]
        if modules:  # an evaluate metric: its module must load
            import evaluate

            evaluate.load(str(folder))
            report.checks.append(f"evaluate module {modules[0].name} loads")
        report.checks.append("Space card parses, with title, sdk and app_file; requirements.txt present")
        report.checks.append(check_requirements(folder / "requirements.txt"))
    else:
        metadata = _card_metadata(folder, DatasetCard)
        _require_keys(metadata, DATASET_CARD_KEYS, folder)
        report.checks.append("dataset card parses, with license, language, task_categories and pretty_name")
        if (folder / "dataset_info.json").is_file() or (folder / "dataset_dict.json").is_file():
            import datasets

            loaded = datasets.load_from_disk(str(folder))
            report.checks.append(f"dataset loads ({loaded})".replace("\n", " "))
    return report


def space_wheel() -> str:
    """The file name of the wheel a Space push uploads beside requirements.txt: storyeval is on no index."""
    from storyeval.version import __version__

    return f"storyeval-{__version__}-py3-none-any.whl"


def check_requirements(path: Path) -> str:
    """Refuse a requirement a Space could not install: a line pip cannot parse, or storyeval from an index
    (it is on none). storyeval must come from the wheel the push uploads (``./storyeval-<version>-...whl[demo]``)
    or a URL. Other names are taken to be on PyPI: that needs the network to check."""
    from packaging.requirements import InvalidRequirement, Requirement

    wheel = space_wheel()
    source = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):  # comments, and options such as --extra-index-url
            continue
        where = f"{path}:{number}"
        if line.startswith(("./", "/")) or ".whl" in line:
            file_name = line.split("[", 1)[0].removeprefix("./")
            if file_name != wheel:
                raise PushError(f"{where}: {line!r} is not the wheel the push uploads; name ./{wheel}[demo]")
            source = f"the wheel the push builds and uploads ({wheel})"
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            raise PushError(f"{where}: pip cannot parse {line!r} ({error})") from None
        if requirement.name.lower() == "storyeval":
            if not requirement.url:
                raise PushError(f"{where}: storyeval is on no package index, so a Space cannot install {line!r}; "
                                f"name the wheel the push uploads, ./{wheel}[demo], or a URL (storyeval[demo] @ git+https://...)")
            source = requirement.url
    if source is None:
        raise PushError(f"{path}: storyeval is not required, but the Space's app imports it; add ./{wheel}[demo]")
    return f"requirements.txt installable: storyeval from {source}"


def build_space_wheel(destination: Path) -> Path:
    """Build storyeval's wheel (with its bundled checkpoints, so the Space scores offline) into ``destination``."""
    import subprocess
    import sys

    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / "setup.py").is_file():
        raise PushError("pushing a Space builds storyeval's wheel, which needs a source checkout (setup.py)")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(destination), str(checkout)], check=True)
    return destination / space_wheel()


def checkpoint_metric(folder: Path) -> str:
    """Which metric a checkpoint folder belongs to, from its own config files."""
    from storyeval.checkpoints.resolution import recorded_metric

    metric = recorded_metric(folder)
    if metric is not None:
        return metric
    config = folder / "config.json"
    if config.is_file():
        raise PushError(f"{config}: unknown model_type {json.loads(config.read_text()).get('model_type')!r}")
    raise PushError(f"{folder}: neither config.json nor scorer_config.json")


def push_folder(folder: str | Path, repo_id: str, dry_run: bool = False, private: bool = False, token: str | None = None) -> FolderReport:
    """Validate ``repo_id`` and ``folder`` and, unless ``dry_run``, upload the folder to ``repo_id``."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)  # a dry run must not pass a push that the Hub would refuse
    except HFValidationError as error:
        raise PushError(f"invalid repo id {repo_id!r}: {error}") from None
    report = validate_folder(folder)
    if dry_run:
        return report
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    extra = {"space_sdk": "gradio"} if report.kind == "space" else {}
    api.create_repo(repo_id, repo_type=report.kind, private=private, exist_ok=True, **extra)
    if report.kind == "space" and space_wheel() in (Path(folder) / "requirements.txt").read_text(encoding="utf-8"):
        import tempfile

        with tempfile.TemporaryDirectory() as staging:
            wheel = build_space_wheel(Path(staging))
            api.upload_file(path_or_fileobj=str(wheel), path_in_repo=wheel.name, repo_id=repo_id, repo_type="space")
    api.upload_folder(
        repo_id=repo_id,
        repo_type=report.kind,
        folder_path=str(folder),
        ignore_patterns=UPLOAD_IGNORE,
        commit_message=f"Upload {Path(folder).name} with storyeval",
    )
    return report
