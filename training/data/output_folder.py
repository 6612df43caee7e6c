"""A builder's ``--output-dir`` appears whole or not at all.

Every builder refuses an ``--output-dir`` that exists, so that it never writes over an earlier build. A build
stopped while it wrote (minutes of work for ``modern_breaks``) used to leave part of a folder there, which a rerun then
refused. Builders now write into a hidden folder beside it (``.NAME.partial-XXXX``) and rename it when everything is
written, as the training loop does with its states: a stopped build leaves only that hidden folder, which a rerun
does not see (remove it at leisure).
"""
from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def refuse_existing(parser: argparse.ArgumentParser, output_dir: str | Path) -> None:
    """A usage error, before any work, where ``output_dir`` exists: a build never writes over an earlier one."""
    if Path(output_dir).exists():
        parser.error(f"--output-dir {output_dir} exists: choose a new folder")


@contextlib.contextmanager
def written_whole(output_dir: str | Path) -> Iterator[Path]:
    """The folder to write ``output_dir``'s files into; renamed to ``output_dir`` when the block ends without an
    error, removed when it raises."""
    output = Path(output_dir)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=output.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if output.exists():  # made by another run since this one checked
        shutil.rmtree(staging, ignore_errors=True)
        raise FileExistsError(f"--output-dir {output} appeared while this build ran: nothing was written")
    staging.rename(output)
