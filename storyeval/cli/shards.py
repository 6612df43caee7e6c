"""``storyeval score-shards``: score a folder of shards on a Ray cluster into a folder of part files, resumably.

    storyeval score-shards shards/ -o scored/                    # a local Ray cluster on this machine
    storyeval score-shards shards/ -o scored/ --address auto     # the cluster `ray start` started
    storyeval score-shards pairs/ -o scored/ --metric continuation_quality --context-column prompt

Every .parquet, .jsonl or .csv file in the input folder is a shard (one format per folder). Its rows
come out, with the score columns of storyeval.score_dataset added, as one Parquet part file named
after it in the output folder (shard_00.jsonl -> shard_00.parquet), written whole or not at all.
A rerun skips the parts already written, so a job that stopped resumes where it stopped: no shard is
scored twice and no row is lost. A part that does not parse, or that was written with other settings
(checkpoint, dtype, versions, columns) or from a shard that has changed since, is refused by name,
never rescored or mixed. A row with no letters gets NaN and its reason in <score-field>_problem.

The actors score in parallel; the rows come back through this process, which writes the parts: at
the rate a Parquet writer keeps up with (far above a scorer's), so a cluster's nodes need no shared
output folder. On a cluster of several nodes, the input folder must be readable at the same path on
every node (a shared file system) and storyeval installed on each.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import itertools
import json
import logging
import math
import os
import socket
import sys
import time
from pathlib import Path

from storyeval.cli.errors import reporting_bad_input
from storyeval.files import InputError, csv_header, json_records
from storyeval.inputs import DTYPE_NAMES, positive_int

READERS = {".parquet": "read_parquet", ".jsonl": "read_json", ".csv": "read_csv"}
PART_KEY = b"storyeval.part"  # the Parquet schema metadata key of a part's record (run, shard, rows)
PARTIAL = ".partial"  # a part being written; renamed into place when whole
PATH_COLUMN = "path"  # the column Ray's readers add with include_paths=True: which shard a row came from
# how long a cluster address gets to answer: ray.init retries an address where nothing listens for minutes
# (more than 300 s measured with Ray 2.60) before it gives up, so the address is tried here first
CONNECT_TIMEOUT_S = 5


class PartError(InputError):
    """A part file that this run cannot keep or replace on its own; the message names it."""


def add_parser(commands, formatter_class=argparse.HelpFormatter) -> argparse.ArgumentParser:
    """Add ``storyeval score-shards`` to the CLI's subcommands; its handler is :func:`run`."""
    from storyeval.analysis.ray_data import metric_names

    parser = commands.add_parser("score-shards", help="score a folder of shards on a Ray cluster into part files; a rerun resumes",
                                 description=__doc__.split("\n\n", 2)[2].replace("``", ""), formatter_class=formatter_class)
    parser.add_argument("input", help="folder of shards: .parquet, .jsonl or .csv files, one format")
    parser.add_argument("-o", "--output", required=True, help="folder of part files (made if missing; a rerun resumes into it)")
    parser.add_argument("--format", choices=[fmt.lstrip(".") for fmt in READERS], default=None,
                        help="the shards' format (default: the one extension the folder's files share)")
    parser.add_argument("--metric", default="union", choices=metric_names(), help="which metric scores the shards")
    parser.add_argument("--config", default=None, help="checkpoint or suite config (default: the metric's default)")
    parser.add_argument("--column", default="story", help="the story (or continuation) column")
    parser.add_argument("--context-column", default=None,
                        help="the context column: continuation_quality (default: context); story_quality with contexts")
    parser.add_argument("--score-field", default="score", help="name of the score column (continuation_quality: <name>_overall ...)")
    parser.add_argument("--address", default=None,
                        help="Ray cluster: auto (the one `ray start` started here), host:port or ray://host:port "
                             "(default: start a local cluster on this machine)")
    parser.add_argument("--actors", type=positive_int, default=None,
                        help="scoring actors (default: as many as the cluster's CPUs, or GPUs, allow)")
    parser.add_argument("--cpus-per-actor", type=float, default=1.0, help="CPUs Ray gives each actor; its torch threads too")
    parser.add_argument("--gpus-per-actor", type=float, default=0.0, help="GPUs Ray gives each actor (it then scores on CUDA)")
    parser.add_argument("--batch-size", type=positive_int, default=None, help="windows or pairs per forward pass (default: the metric's)")
    parser.add_argument("--rows-per-batch", type=positive_int, default=256, help="rows handed to an actor at a time")
    parser.add_argument("--dtype", default=None, choices=DTYPE_NAMES, help="weights' precision (default: float32); int8: union and plot_coherence on CPUs")
    parser.add_argument("--combination", default=None, help="story_quality: mean or learned (default: the config's)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def list_shards(folder: Path, fmt: str | None) -> tuple[list[Path], str]:
    """The shards (sorted by name) and their format, or an :class:`InputError`."""
    if not folder.is_dir():
        raise InputError(f"input folder not found: {folder}" if not folder.exists() else f"{folder} is not a folder of shards")
    # hidden files and those Spark and Hadoop write beside their parts (_SUCCESS) are no shards
    files = sorted(path for path in folder.iterdir() if path.is_file() and not path.name.startswith((".", "_")))
    found = sorted({path.suffix.lower() for path in files} & set(READERS))
    if fmt is None:
        if len(found) != 1:
            raise InputError(f"{folder} holds {' and '.join(found)} shards: pass --format" if found else
                             f"{folder} holds no shards (.parquet, .jsonl or .csv files)")
        fmt = found[0]
    shards = [path for path in files if path.suffix.lower() == fmt]
    if not shards:
        raise InputError(f"{folder} holds no {fmt} shards")
    return shards, fmt


def part_path(output: Path, shard: Path) -> Path:
    return output / f"{shard.stem}.parquet"


def shard_columns(shard: Path, fmt: str) -> tuple[list[str], list]:
    """A shard's column names (and arrow types where the file has them), read from its head only."""
    if fmt == ".parquet":
        import pyarrow.parquet as pq

        try:
            schema = pq.read_schema(shard)
        except Exception as error:  # pyarrow raises ArrowInvalid, OSError and others for a file that is not Parquet
            raise InputError(f"{shard}: not a Parquet file ({error})") from None
        return list(schema.names), list(schema.types)
    if fmt == ".csv":
        header = csv_header(shard)
        return header, [None] * len(header)
    for number, record in json_records(shard):  # the first record that is not blank
        if not isinstance(record, dict):
            raise InputError(f"{shard}:{number}: a JSON object per line is expected, got {type(record).__name__}")
        return list(record), [None] * len(record)
    return [], []


def shard_rows(shard: Path, fmt: str) -> int:
    """How many rows Ray's reader makes of a shard: a part with another count is never written."""
    if fmt == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(shard).metadata.num_rows
    with shard.open(encoding="utf-8", newline="") as handle:
        if fmt == ".csv":  # the header, and empty lines (which pyarrow's reader skips), are no rows
            return max(0, sum(1 for row in csv.reader(handle) if row) - 1)
        return sum(1 for line in handle if line.strip())


def shard_identity(shard: Path) -> dict:
    """What a part records of the shard it came from: a shard edited since is told apart by its hash."""
    digest = hashlib.sha256()
    with shard.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return {"name": shard.name, "bytes": shard.stat().st_size, "sha256": digest.hexdigest()}


def read_part_record(part: Path, shard: Path) -> dict:
    """The record a part carries, or a :class:`PartError` when the file does not parse as a part."""
    import pyarrow.parquet as pq

    remedy = f"delete it to score {shard.name} again"
    try:
        metadata = pq.ParquetFile(part).metadata
    except Exception as error:  # ArrowInvalid, OSError, ...: whatever the reader says, the file is not a part
        raise PartError(f"{part}: not a readable Parquet part ({error}); {remedy}") from None
    raw = (metadata.metadata or {}).get(PART_KEY)
    if raw is None:
        raise PartError(f"{part}: not written by storyeval score-shards (no {PART_KEY.decode()} metadata); move it out of {part.parent}")
    try:
        record = json.loads(raw)
        record["run"], record["shard"], record["rows"]  # noqa: B018 (the keys every part has)
    except (ValueError, KeyError, TypeError):
        raise PartError(f"{part}: its {PART_KEY.decode()} metadata does not parse; {remedy}") from None
    if record["rows"] != metadata.num_rows:
        raise PartError(f"{part}: records {record['rows']} rows but holds {metadata.num_rows}; {remedy}")
    return record


def check_part(part: Path, shard: Path, run: dict, identity: dict, rows: int) -> None:
    """A part already written is kept only if this run would write it the same: same settings, same shard."""
    record = read_part_record(part, shard)
    if record["run"] != run:
        key = next(key for key in sorted(set(run) | set(record["run"])) if record["run"].get(key) != run.get(key))
        raise PartError(f"{part} was written with other settings ({key}: {record['run'].get(key)!r}; this run: {run.get(key)!r}); "
                        f"score into another folder, or delete it to score {shard.name} again with these")
    if record["shard"] != identity or record["rows"] != rows:
        raise PartError(f"{part} was written from another version of {shard.name} (it records {record['shard']['bytes']} bytes, "
                        f"{record['rows']} rows, sha256 {record['shard']['sha256'][:12]}); delete it to score the shard again")


def run_settings(metric: str, config: str, dtype: str | None, with_contexts: bool, combination: str | None) -> str:
    """The settings string this run's scores will carry, known before any actor starts (the suite's is read from
    its loaded references; a story or continuation checkpoint's needs only its name)."""
    if metric == "story_quality":
        from storyeval.analysis.suite import StoryQuality

        return StoryQuality(config).settings(with_contexts, combination)
    from storyeval.checkpoints import resolution as checkpoints
    from storyeval.scoring.signature import settings_string

    return settings_string(checkpoints.checkpoint_name(checkpoints.resolve_checkpoint(metric, config)), dtype)


def check_address(address: str | None) -> None:
    """An address where nothing answers fails here in seconds, with one line (see CONNECT_TIMEOUT_S)."""
    if address in (None, "auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--address {address}: expected auto, host:port or ray://host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise InputError(f"--address {address}: no Ray cluster answers there ({error.strerror or error}); start one with "
                         "`ray start --head`, or leave --address out to start a local one") from None


def connect(address: str | None) -> None:
    """Join the cluster at ``address`` (None: start one on this machine; checked by :func:`check_address` first);
    a process that started Ray already keeps it."""
    import ray

    if ray.is_initialized():  # a process that started Ray already (a notebook, a test) scores on its cluster
        return
    options = {"include_dashboard": False} if address in (None, "local") else {}
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, **options)
    except ConnectionError as error:
        raise InputError(f"--address {address}: {error}") from None


def default_actors(cpus_per_actor: float, gpus_per_actor: float) -> int:
    """As many actors as the cluster's CPUs (and GPUs, when each takes some) hold, at least one."""
    import ray

    resources = ray.cluster_resources()
    fits = [resources.get("CPU", 1) / cpus_per_actor] + ([resources.get("GPU", 0) / gpus_per_actor] if gpus_per_actor else [])
    return max(1, math.floor(min(fits)))


def write_part(part: Path, tables: list, run: dict, identity: dict, rows: int) -> None:
    """The rows of one shard as its part file, whole or not at all (written beside it, then renamed into place)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.concat_tables(tables, promote_options="default")
    settings_column = f"{run['score_field']}_settings"
    if table.num_rows != rows:
        raise PartError(f"{identity['name']}: the job gave {table.num_rows} rows for a shard of {rows}; {part} not written")
    if table.num_rows and (found := set(table.column(settings_column).unique().to_pylist())) != {run["settings"]}:
        raise PartError(f"{identity['name']}: scored with settings {sorted(found)}, not this run's {run['settings']!r} "
                        f"(does every node run the same storyeval and libraries?); {part} not written")
    record = {"run": run, "shard": identity, "rows": table.num_rows}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), PART_KEY: json.dumps(record).encode()})
    partial = part.with_name(part.name + PARTIAL)
    try:
        pq.write_table(table, partial)
        os.replace(partial, part)
    finally:
        partial.unlink(missing_ok=True)


def empty_part_table(added: list[str]):
    """The part of a shard with no rows: the columns a job adds (the scores, then the problem and settings), empty."""
    import pyarrow as pa

    *scores, problem, settings = added
    return pa.table({**{name: pa.array([], pa.float64()) for name in scores},
                     problem: pa.array([], pa.string()), settings: pa.array([], pa.string())})


def run(args) -> int:
    """``storyeval score-shards``: returns the exit status."""
    return reporting_bad_input(lambda: score_shards(args))


def score_shards(args) -> int:
    from storyeval.analysis.ray_data import RAY_INSTALL, check_columns, check_job, output_columns

    if args.metric == "continuation_quality" and args.context_column is None:
        args.context_column = "context"
    if not args.score_field.strip():
        raise InputError("--score-field must be a non-blank name")
    if not args.cpus_per_actor > 0 or args.gpus_per_actor < 0:
        raise InputError("--cpus-per-actor must be positive and --gpus-per-actor not negative")
    config = check_job(args.metric, args.config, args.dtype, args.context_column, args.combination)
    check_address(args.address)  # seconds, where hashing a large corpus's shards below takes longer
    source, output = Path(args.input), Path(args.output)
    shards, fmt = list_shards(source, f".{args.format}" if args.format else None)
    if output.exists() and not output.is_dir():
        raise InputError(f"output {output} is not a folder")
    if output.resolve() == source.resolve():
        raise InputError(f"output {output} is the input folder; give another")
    with_contexts = args.context_column is not None
    added = output_columns(args.metric, config, args.score_field, with_contexts)
    parts = {shard: part_path(output, shard) for shard in shards}
    if len(set(parts.values())) < len(parts):
        raise InputError(f"{source}: two shards share a name before their extension, so they would share a part file")
    for shard in shards:  # every shard's columns, from its head, before anything is scored
        names, types = shard_columns(shard, fmt)
        if not names and fmt != ".parquet":
            continue  # an empty file: nothing to score, and an empty part is written for it
        if PATH_COLUMN in names:
            raise InputError(f"{shard} has a column {PATH_COLUMN!r}, the name Ray's readers give the column that says which "
                             "file a row came from: rename it")
        check_columns(names, types, args.column, args.context_column, added, where=str(shard))
    try:
        import ray.data  # noqa: F401 (only to say what to install before any work)
    except ImportError:
        raise ImportError(f"score-shards runs on Ray Data: {RAY_INSTALL}") from None
    run_record = {"metric": args.metric, "config": config, "settings": run_settings(args.metric, config, args.dtype, with_contexts, args.combination),
                  "column": args.column, "context_column": args.context_column, "score_field": args.score_field}
    known = {part.name for part in parts.values()}
    if output.is_dir():
        for stray in sorted(output.glob("*.parquet")):
            if stray.name not in known:
                raise PartError(f"{stray}: no shard of {source} is named {stray.stem}; this folder holds another job's parts: "
                                "score into another folder")
    pending, identities, rows = [], {}, {}
    for shard in shards:
        identities[shard], rows[shard] = shard_identity(shard), shard_rows(shard, fmt)
        part = parts[shard]
        part.with_name(part.name + PARTIAL).unlink(missing_ok=True)  # left by a run that stopped while writing it
        if part.exists():
            check_part(part, shard, run_record, identities[shard], rows[shard])
        else:
            pending.append(shard)
    if not pending:
        print(f"score-shards: all {len(shards)} parts are in {output} already; nothing to score", file=sys.stderr)
        return 0
    if any(rows[shard] for shard in pending):
        connect(args.address)  # the last check: nothing is written before it passes
    output.mkdir(parents=True, exist_ok=True)
    done = len(shards) - len(pending)
    empty = [shard for shard in pending if rows[shard] == 0]
    for shard in empty:  # nothing to score: no actor is needed for it
        write_part(parts[shard], [empty_part_table(added)], run_record, identities[shard], 0)
        pending.remove(shard)
    if not pending:
        print(f"score-shards: {len(empty)} empty part(s) written, {done} already there; nothing to score", file=sys.stderr)
        return 0
    started = time.perf_counter()
    try:
        written, scored_rows, unscorable = stream_parts(args, config, fmt, pending, parts, run_record, identities, rows)
    except KeyboardInterrupt:
        print(f"\nscore-shards: stopped; the parts written so far are kept in {output}: rerun the same command to resume",
              file=sys.stderr)
        return 130
    seconds = time.perf_counter() - started
    print(f"score-shards: {written + len(empty)} part(s) written, {done} already there; {scored_rows} rows in {seconds:.1f} s "
          f"({scored_rows / max(seconds, 1e-9):.1f} rows/s with startup), {unscorable} unscorable (NaN, reason in "
          f"{args.score_field}_problem); {run_record['settings']}", file=sys.stderr)
    return 0


def stream_parts(args, config: str, fmt: str, pending: list[Path], parts: dict, run_record: dict, identities: dict,
                 rows: dict) -> tuple[int, int, int]:
    """Score the pending shards as one Ray dataset and write each shard's part as soon as its last row is back;
    returns (parts written, rows, rows that could not be scored)."""
    import ray.data
    from tqdm.auto import tqdm

    from storyeval.analysis.ray_data import score_dataset

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    # score_dataset warns when the actors hold every CPU, as a read task that asks for one then waits for ever;
    # the reads here ask for none (below)
    logging.getLogger("storyeval.analysis.ray_data").setLevel(logging.ERROR)
    context = ray.data.DataContext.get_current()
    saved = context.execution_options.preserve_order, context.enable_progress_bars
    # in input order, so each shard's rows come back together and its part is written once they are all in
    context.execution_options.preserve_order, context.enable_progress_bars = True, False
    by_path = {os.path.abspath(shard): shard for shard in pending}
    actors = args.actors or default_actors(args.cpus_per_actor, args.gpus_per_actor)
    written = scored_rows = unscorable = 0
    current, tables, finished = None, [], set()
    batches = None
    try:
        reader = getattr(ray.data, READERS[fmt])
        # read tasks take no CPU: with actors holding every CPU of the cluster (2 on a 2-core machine), a read
        # task that asked for one would wait for ever, and reading is light beside scoring
        dataset = reader([str(shard) for shard in pending], include_paths=True, num_cpus=0, partitioning=None)
        scored = score_dataset(dataset, args.metric, config, args.column, context_column=args.context_column,
                               score_field=args.score_field, actors=actors, num_cpus=args.cpus_per_actor,
                               num_gpus=args.gpus_per_actor, batch_size=args.batch_size, ray_batch_size=args.rows_per_batch,
                               dtype=args.dtype, combination=args.combination)
        problem_column = f"{args.score_field}_problem"

        def finish(shard):
            nonlocal written
            write_part(parts[shard], tables, run_record, identities[shard], rows[shard])
            finished.add(shard)
            written += 1

        with tqdm(total=sum(rows[shard] for shard in pending), unit="row", disable=args.quiet,
                  desc=f"{args.metric}/{config} on {actors} actor(s)") as bar:
            batches = scored.iter_batches(batch_size=None, batch_format="pyarrow")
            for batch in batches:
                paths = batch.column(PATH_COLUMN).to_pylist()
                start = 0
                for path, group in itertools.groupby(paths):
                    size = len(list(group))
                    shard = by_path.get(os.path.abspath(path))
                    if shard is None:
                        raise RuntimeError(f"Ray read a row from {path}, which is no pending shard")
                    if shard != current:
                        if current is not None:
                            finish(current)
                        if shard in finished:
                            raise RuntimeError(f"rows of {shard} came back after its part was written")
                        current, tables = shard, []
                    piece = batch.slice(start, size).drop_columns([PATH_COLUMN])
                    tables.append(piece)
                    scored_rows += size
                    unscorable += size - piece.column(problem_column).null_count
                    start += size
                bar.update(len(paths))
            if current is not None:
                finish(current)
    finally:
        if batches is not None and hasattr(batches, "close"):
            batches.close()  # a stopped job stops its actors too
        context.execution_options.preserve_order, context.enable_progress_bars = saved
    if missing := [shard.name for shard in pending if shard not in finished]:
        raise RuntimeError(f"the job gave no rows for {missing}; their parts were not written")
    return written, scored_rows, unscorable
