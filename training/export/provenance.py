"""Where a run happened: the machine and the code, recorded beside every measured figure.

Training loops store it in their results files and benchmarks in theirs, so a training
time or a correlation can be traced to a CPU and a commit.

What is published (a checkpoint's records, its card's commands, the suite's weights) names no path of the
machine that made it: :func:`portable` rewrites a record's absolute paths as a reader can use them (a path
in the checkout relative to it, a known backbone's copy by its Hub id, any other path by its last two parts
under ``<local>/``), and :func:`data_identity` identifies a run's input data by what it is instead: the
builder that wrote it, its splits and their hashes.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

import storyeval

# the checkout this package was imported from (git finds nothing on a non-editable install)
CHECKOUT = Path(__file__).resolve().parents[2]
TRAINING = Path(__file__).resolve().parents[1]
RUNTIME = Path(storyeval.__file__).resolve().parent
# the runtime's text normalisation (tokenising, names, NLTK access), which training data goes through too
# (source_hash keys by file name and contents, so moving these files between folders keeps the hash)
TEXT_PIPELINE = (RUNTIME / "text.py", RUNTIME / "checkpoints" / "resources.py", RUNTIME / "checkpoints" / "lowercase_names.txt")


def source_hash(files: Iterable[Path]) -> str:
    """A short hash of the given source files' contents.

    `datasets` keys its caches by data and arguments, not by the code that turns one into the
    other, so builders and samplers carry this hash of their code: after a fix to the
    preprocessing or the perturbations, a rebuild cannot silently reuse old outputs.
    """
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(Path(f) for f in files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def environment(exclude: tuple[str, ...] = ()) -> dict:
    """CPU, cores, GPUs, Python and torch versions, the commit, and files changed since it.

    ``exclude``: checkout paths whose changes are outputs of the run, not its inputs.
    """
    import torch  # imported here so that reading this module stays cheap

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    pathspec = ["--", ".", *(f":(exclude){path}" for path in exclude)]
    # `python -m` from another worktree imports storyeval from there but storyeval_training from the editable
    # install: then both checkouts ran, and the record names the runtime's commit too
    runtime_checkout = RUNTIME.parent
    mixed = {}
    if runtime_checkout != CHECKOUT:
        mixed = {"runtime_checkout": str(runtime_checkout), "runtime_commit": _git("rev-parse", "--short", "HEAD", cwd=runtime_checkout)}
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else [],
        "commit": _git("rev-parse", "--short", "HEAD"),
        # files that differ from that commit, or are not in it, while the run ran
        "uncommitted_changes": sorted(
            set(_git("diff", "--name-only", "HEAD", *pathspec).split())
            | set(_git("ls-files", "--others", "--exclude-standard", *pathspec).split())
        ),
        **mixed,
    }


def _git(*args: str, cwd: Path | None = None) -> str:
    """git's output in ``cwd`` (default: the checkout), or "" where there is no git or no repository."""
    try:
        completed = subprocess.run(["git", *args], cwd=cwd or CHECKOUT, capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return completed.stdout.strip() if completed.returncode == 0 else ""


# ---- published records name no path of this machine ---------------------------------------------------------------
LOCAL = "<local>"  # what stands for this machine's own folders in a published record
# an absolute path of two parts or more inside a string (a value, a command line, a name=path argument); not a URL's,
# a relative path's, a lone "/" in prose, a token such as "</s>", or the tail of a path already made portable
# ("<local>/runs/x": a record rewritten twice, by command_line and then write_results, must not become "<local><local>/...")
_ABSOLUTE_PATH = re.compile(r"(?<![\w./~<`-])(?<!" + re.escape(LOCAL) + r")~?/[\w.+@-]+(?:/[\w.+@-]*)+")
# the record file a training-data builder writes into its output folder (or, for the kinds builders, beside them),
# by the module that writes it: named here as text, as those modules import this one
BUILDER_RECORDS = {
    "negatives_stats.json": "storyeval_training.data.build_negatives",
    "plots_stats.json": "storyeval_training.data.plots.build_plots",
    "adversarial_filter_history.json": "storyeval_training.data.plots.adversarial_filter",
    "mix_pairs.json": "storyeval_training.data.mix_pairs",
    "transfer.json": "storyeval_training.data.transfer",
    "wp_kinds.json": "storyeval_training.data.wp_kinds",
    "wp_machine_pairs.json": "storyeval_training.data.wp_machine_pairs",
}


def portable_path(path: str) -> str:
    """``path`` as a published record names it: relative to the checkout inside it, a known backbone (one of its
    local copies) by its Hub id, anything else by its last two parts under :data:`LOCAL`; a relative path as it is."""
    from storyeval.checkpoints.backbones import published_backbone_name

    if not path.startswith(("/", "~/")):
        return path
    resolved = Path(path).expanduser()
    try:
        return resolved.resolve().relative_to(CHECKOUT.resolve()).as_posix()
    except ValueError:
        pass
    backbone = published_backbone_name(str(resolved))
    if backbone != resolved.name:  # a copy of a backbone the Hub has
        return backbone
    return "/".join([LOCAL, *resolved.parts[-2:]])


def portable(record):
    """``record`` (JSON-like: dicts, lists, strings) with every absolute path in its strings made :func:`portable_path`,
    in command lines, ``name=path`` arguments and dict keys (results keyed by checkpoint folder) too."""
    if isinstance(record, dict):
        return {portable(key): portable(value) for key, value in record.items()}
    if isinstance(record, (list, tuple)):
        return [portable(value) for value in record]
    if isinstance(record, str):
        return _ABSOLUTE_PATH.sub(lambda match: portable_path(match.group(0)), record)
    return record


def data_identity(path: str | Path) -> dict | None:
    """What a run's input at ``path`` is, as a record can name it without the path: the builder whose record file
    is in the folder (or beside it), and, for a folder ``datasets`` saved, each split's fingerprint (the hash
    ``datasets`` keys its caches by), else the SHA-256 of its files. None where nothing is there."""
    path = Path(path)
    if path.is_file():
        return {"sha256": _files_sha256([path], path.parent)}
    if not path.is_dir():
        return None
    builder = next((module for name, module in BUILDER_RECORDS.items()
                    if (path / name).is_file() or (path.parent / name).is_file()), None)
    states = sorted(path.glob("*/state.json")) or sorted(path.glob("state.json"))
    if states:
        splits = {state.parent.name if state.parent != path else "train": json.loads(state.read_text())["_fingerprint"]
                  for state in states}
        return {"builder": builder, "splits": splits}
    return {"builder": builder, "sha256": _files_sha256(sorted(p for p in path.rglob("*") if p.is_file()), path)}


def _files_sha256(files: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


# a run's arguments that name where it writes, not what it reads
OUTPUT_ARGUMENTS = ("output_dir", "export_dir", "cache_dir", "resume_from_checkpoint", "scores_cache", "output")


def input_identities(args: dict) -> dict:
    """:func:`data_identity` of each argument of a run that names an input outside the checkout (``name=path`` pairs
    by their name), keyed as the arguments are; what the published record keeps of them once their paths are made
    portable."""
    identities = {}
    for key, value in args.items():
        if key in OUTPUT_ARGUMENTS:
            continue
        for label, path in _named_paths(key, value):
            if Path(path).expanduser().is_absolute() and portable_path(path).startswith(LOCAL):
                if (identity := data_identity(Path(path).expanduser())) is not None:
                    identities[label] = identity
    return identities


def _named_paths(key: str, value) -> list[tuple[str, str]]:
    """(label, path) of each path an argument's value names: a string, a list of them, or ``name=path`` items."""
    values = value if isinstance(value, (list, tuple)) else [value]
    named = []
    for item in values:
        if isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(part, str) for part in item):
            item = f"{item[0]}={item[1]}"  # argparse's (name, path) pairs
        if isinstance(item, str) and item.startswith(("/", "~/")):
            named.append((key, item))
        elif isinstance(item, str) and "=" in item and item.split("=", 1)[1].startswith(("/", "~/")):
            name, path = item.split("=", 1)
            named.append((f"{key}:{name}", path))
    return named


def published_record(record: dict) -> dict:
    """A training record as a checkpoint publishes it: its inputs identified by :func:`input_identities` under
    ``inputs`` (where its ``args`` name any), then every path made :func:`portable`."""
    identities = input_identities(record.get("args") or {})
    return portable({**record, **({"inputs": identities} if identities else {})})
