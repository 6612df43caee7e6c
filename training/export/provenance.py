"""Where a run happened: the machine and the code, recorded beside every measured figure.

Training loops store it in their results files and benchmarks in theirs, so a training
time or a correlation can be traced to a CPU and a commit.
"""
from __future__ import annotations

import hashlib
import os
import platform
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
