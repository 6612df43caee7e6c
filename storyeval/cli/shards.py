"""``storyeval score-shards``: score a folder of shards on a Ray cluster into a folder of part files, resumably.

    storyeval score-shards shards/ -o scored/                    # a local Ray cluster on this machine
    storyeval score-shards shards/ -o scored/ --address auto     # the cluster `ray start` started
    storyeval score-shards pairs/ -o scored/ --metric continuation_quality --context-column prompt

Every .parquet, .jsonl or .csv file in the input folder is a shard (one format per folder). Each shard still to
score is read whole before Ray starts: one that does not parse, lacks a column, or holds something else than text
(or null) in a text column is refused in one line naming the file and line, and nothing is written. Its rows come
out, in its order and with the score columns of storyeval.score_dataset added, as one Parquet part file named
after it in the output folder (shard_00.jsonl -> shard_00.parquet), written whole or not at all as soon as the
shard's last row is scored. A job stopped (Ctrl-C: exit status 130) keeps every part written, and a rerun skips
them: no shard is scored twice and no row is lost. A part that does not parse, or that was written with other
settings (checkpoint, dtype, versions, columns) or from a shard that has changed since, is refused by name, never
rescored or mixed. A row that cannot be scored (no letters, a null, a story past the window limit) gets NaN and its
reason in <score-field>_problem, and the closing line names it as shard:row. A batch whose scoring fails otherwise (an
error in the scorer) costs its shard alone: that part is not written, the other shards are, the command names the
shard and exits 1, and a rerun scores what is missing.

The actors score in parallel; the rows come back through this process, which writes the parts: at the rate a
Parquet writer keeps up with (far above a scorer's), so a cluster's nodes need no shared output folder. On a
cluster of several nodes, the input folder must be readable at the same path on every node (a shared file
system) and storyeval installed on each.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import math
import os
import re
import signal
import socket
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from storyeval.analysis.ray_data import StoryScorer
from storyeval.cli.errors import reporting_bad_input
from storyeval.cli.shard_files import PATH_COLUMN, READERS, Shard, list_shards, read_shard, reader_options, shard_identity
from storyeval.files import InputError
from storyeval.inputs import DTYPE_NAMES, positive_int

PART_KEY = b"storyeval.part"  # the Parquet schema metadata key of a part's record (run, shard, rows)
PARTIAL = ".partial"  # a part being written; renamed into place when whole
# how long a cluster address gets to answer: ray.init retries an address where nothing listens for minutes
# (more than 300 s measured with Ray 2.60) before it gives up, so the address is tried here first
CONNECT_TIMEOUT_S = 5
RESUME = "rerun the same command to resume"
# the column an actor adds to the rows of a batch it could not score: why (null where it scored them); read here and
# dropped, never written into a part
FAILURE_COLUMN = "storyeval_failure"
SHOWN_ROWS = 5  # unscorable rows the closing line names, before it counts the rest
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
# Ray's core logs this line, at error level, for every actor pool Ray Data starts: see docs/distributed.md
RESTARTS_NOTE = ("storyeval: note: the error line Ray's core logs about the actors' 'max_restarts' as they start is harmless "
                 "(Ray Data passes every actor pool an object of its own; docs/distributed.md)")


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
                             "(default: RAY_ADDRESS where it is set, as under `ray job submit`, else start a local cluster on this machine)")
    parser.add_argument("--actors", type=positive_int, default=None,
                        help="scoring actors (default: as many as the cluster's CPUs, or GPUs, allow)")
    parser.add_argument("--cpus-per-actor", type=float, default=1.0, help="CPUs Ray gives each actor; its torch threads too")
    parser.add_argument("--gpus-per-actor", type=float, default=0.0, help="GPUs Ray gives each actor (it then scores on CUDA)")
    parser.add_argument("--batch-size", type=positive_int, default=None, help="windows or pairs per forward pass (default: the metric's)")
    parser.add_argument("--rows-per-batch", type=positive_int, default=256,
                        help="most rows of one shard handed to an actor at a time (a smaller shard goes whole); the rows come back, "
                             "and the progress bar moves, by as many. With --gpus-per-actor, Ray hands this many, smaller shards together")
    parser.add_argument("--dtype", default=None, choices=DTYPE_NAMES, help="weights' precision (default: float32); int8: union and plot_coherence on CPUs")
    parser.add_argument("--combination", default=None, help="story_quality: mean or learned (default: the config's)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def part_path(output: Path, shard: Path) -> Path:
    return output / f"{shard.stem}.parquet"


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


def check_part(part: Path, shard: Path, run: dict, identity: dict) -> None:
    """A part already written is kept only if this run would write it the same: same settings, same shard."""
    record = read_part_record(part, shard)
    if record["run"] != run:
        key = next(key for key in sorted(set(run) | set(record["run"])) if record["run"].get(key) != run.get(key))
        raise PartError(f"{part} was written with other settings ({key}: {record['run'].get(key)!r}; this run: {run.get(key)!r}); "
                        f"score into another folder, or delete it to score {shard.name} again with these")
    if record["shard"] != identity:
        raise PartError(f"{part} was written from another version of {shard.name} (it records {record['shard']['bytes']} bytes, "
                        f"{record['rows']} rows, sha256 {record['shard']['sha256'][:12]}); delete it to score the shard again")


def run_settings(metric: str, config: str, dtype: str | None, with_contexts: bool, combination: str | None,
                 folder: Path | None = None) -> str:
    """The settings string this run's scores will carry, known before any actor starts (the suite's is read from
    its loaded references; a story or continuation checkpoint's needs only its name: ``folder``'s, where the
    checkpoint is resolved already)."""
    if metric == "story_quality":
        from storyeval.analysis.suite import StoryQuality

        return StoryQuality(config).settings(with_contexts, combination)
    from storyeval.checkpoints import resolution as checkpoints
    from storyeval.scoring.signature import settings_string

    folder = folder or checkpoints.resolve_checkpoint(metric, config)
    return settings_string(checkpoints.checkpoint_name(folder), dtype, checkpoints.scoring_digest(folder))


def job_record(job) -> dict:
    """What every part of ``job`` records of it, and a rerun must match: its scoring (with the settings string its
    scores will carry) and its columns."""
    scoring, columns = job.scoring, job.columns
    settings = run_settings(scoring.metric, scoring.config, scoring.dtype, job.with_contexts, scoring.combination,
                            None if scoring.is_suite else scoring.checkpoint)
    return {"metric": scoring.metric, "config": scoring.config, "settings": settings, "column": columns.column,
            "context_column": columns.context_column, "score_field": columns.score_field}


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


def connect(address: str | None) -> bool:
    """Join the cluster at ``address`` (checked by :func:`check_address` first); returns whether this call started
    Ray, which the command then stops. A process that started Ray already (a notebook, a test) keeps it."""
    import ray

    if ray.is_initialized():
        return False
    if address is None and not os.environ.get("RAY_ADDRESS"):
        # ray.init(address=None) would join the cluster `ray start` last started on this machine, where there is one
        address = "local"
    options = {"include_dashboard": False} if address == "local" else {}
    # Ray 2.60 gives a cluster it starts token authentication where RAY_AUTH_MODE is unset, and one it joins where a
    # token is at hand, with a WARNING saying so: nothing to act on, muted while Ray starts. (Setting RAY_AUTH_MODE
    # here would not do: Ray reads it when first imported, and this process has imported Ray to read the shards.) A
    # logger of Ray's internals: were it renamed, the line would show again, nothing worse
    setup_log = logging.getLogger(RAY_AUTH_LOGGER)
    level = setup_log.level
    setup_log.setLevel(logging.ERROR)
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, **options)
    except ConnectionError as error:
        raise InputError(f"--address {address or 'RAY_ADDRESS=' + os.environ['RAY_ADDRESS']}: {error}") from None
    finally:
        setup_log.setLevel(level)
    return True


def shutdown_ray() -> None:
    """Stop the Ray this process started, here rather than in Ray's exit hook: a Ctrl-C during that hook prints
    "Exception ignored in atexit callback" and leaves the exit status 0. One during this call is a stop (130), and
    the shutdown still runs to its end, as Ray's processes would otherwise outlive the command."""
    import ray

    try:
        ray.shutdown()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        ray.shutdown()
        raise


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


class ShardScorer(StoryScorer):
    """The actors' scorer: a batch it cannot score (an error in the scorer, not a row's problem, which is NaN already)
    comes back with NaN scores and the error in :data:`FAILURE_COLUMN`, so the job goes on and only that batch's
    shard goes without its part. Raised instead, it would fail the whole job, and every rerun the same way."""

    def __call__(self, batch):
        import pyarrow as pa

        try:
            scored = super().__call__(batch)
            return scored.append_column(FAILURE_COLUMN, pa.nulls(batch.num_rows, pa.string()))
        except Exception as error:  # broad on purpose: whatever it is, it is reported by shard, not raised
            failure = innermost(error)
        rows = batch.num_rows
        scored = self.with_scores(batch, {key: [math.nan] * rows for key in self.keys}, [None] * rows)
        return scored.append_column(FAILURE_COLUMN, pa.array([failure] * rows, pa.string()))


class JobError(RuntimeError):
    """The cluster failed the job after it started (a node lost for good, a shard changed mid-job); the message
    says why in one line, and what was kept."""


@dataclass
class JobState:
    """What a run has done so far, for the line a stop or a failure prints."""

    output: Path | None = None
    before: int = 0  # parts a run before this one wrote
    written: int = 0  # parts this run wrote
    started_ray: bool = False

    def kept(self) -> str:
        return (f"the {self.written} part(s) this run wrote and {self.before} from before are kept in {self.output}: {RESUME}"
                if self.written or self.before else "no part was written")


class PartAssembler:
    """Takes the scored rows as Ray gives them back (in input order, each with the path it was read from) and
    writes each shard's part as soon as its last row is in, so a stopped job keeps every shard it finished. A shard
    with a batch the actors could not score (:class:`ShardScorer`) gets no part; the others still do."""

    def __init__(self, parts: dict, run: dict, identities: dict, rows: dict, state: JobState):
        self.parts, self.run, self.identities, self.rows, self.state = parts, run, identities, rows, state
        self.by_path = {os.path.abspath(shard): shard for shard in parts}
        self.pieces: dict[Path, list] = {}
        self.received = dict.fromkeys(parts, 0)
        self.scored = self.unscorable = 0
        self.unscorable_rows: list[str] = []  # the first SHOWN_ROWS, as shard:row (from 1, in the shard's order)
        self.failed: dict[Path, str] = {}  # shard -> its first failed batch's rows and error
        self.problem_column = f"{run['score_field']}_problem"

    def add(self, batch) -> None:
        start = 0
        for path, group in itertools.groupby(batch.column(PATH_COLUMN).to_pylist()):
            size = sum(1 for _ in group)
            shard = self.by_path.get(os.path.abspath(path))
            if shard is None:
                raise JobError(f"Ray read a row from {path}, which is no shard of this job; no part was written for it")
            piece = batch.slice(start, size).drop_columns([PATH_COLUMN])
            start += size
            first = self.received[shard] + 1  # the piece's first row in its shard, from 1
            self.received[shard] += size
            if self.received[shard] > self.rows[shard]:
                raise JobError(f"the job gave more rows of {shard.name} than the {self.rows[shard]} it holds; "
                               f"{self.parts[shard]} not written")
            failure = None
            if FAILURE_COLUMN in piece.column_names:
                failure = piece.column(FAILURE_COLUMN)[0].as_py()
                piece = piece.drop_columns([FAILURE_COLUMN])
            if failure is not None and shard not in self.failed:
                self.failed[shard] = f"{shard.name} rows {first}-{first + size - 1}: {failure}"
                self.pieces.pop(shard, None)
            if shard in self.failed:
                continue
            self.pieces.setdefault(shard, []).append(piece)
            self.scored += size
            problems = piece.column(self.problem_column)
            self.unscorable += size - problems.null_count
            if problems.null_count < size and len(self.unscorable_rows) < SHOWN_ROWS:
                self.unscorable_rows += [f"{shard.name}:{first + k}" for k, problem in enumerate(problems.to_pylist())
                                         if problem is not None][:SHOWN_ROWS - len(self.unscorable_rows)]
            if self.received[shard] == self.rows[shard]:
                write_part(self.parts[shard], self.pieces.pop(shard), self.run, self.identities[shard], self.rows[shard])
                self.state.written += 1

    def unfinished(self) -> list[str]:
        return [shard.name for shard, count in self.received.items() if count < self.rows[shard]]

    def unscorable_summary(self) -> str:
        """The closing line's account of the rows that got NaN: how many, the first few by shard:row."""
        if not self.unscorable:
            return f"0 unscorable (a row that cannot be scored gets NaN, reason in {self.problem_column})"
        more = f" and {self.unscorable - len(self.unscorable_rows)} more" if self.unscorable > len(self.unscorable_rows) else ""
        return (f"{self.unscorable} unscorable (NaN, reason in {self.problem_column}) at shard:row "
                f"{', '.join(self.unscorable_rows)}{more}")


def run(args) -> int:
    """``storyeval score-shards``: returns the exit status (130 for a stop, as a shell gives for Ctrl-C)."""
    state = JobState()
    try:
        with stops_quietly():
            try:
                return reporting_bad_input(lambda: score_shards(args, state))
            finally:
                if state.started_ray:
                    shutdown_ray()  # a Ctrl-C during it is a stop too
    except JobError as error:
        print(f"storyeval: error: {error}; {state.kept()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\nscore-shards: stopped; {state.kept()}", file=sys.stderr)
        return 130


@contextlib.contextmanager
def stops_quietly():
    """A stop (Ctrl-C) prints one line: when Ray Data stops its actors, Ray prints a line on standard output for each
    task they still held ("(raylet) Task ... failed ... will be retried"), so that output, where this command writes
    nothing, is muted from the signal on, until the command returns."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
        yield
        return
    handler, stdout = signal.getsignal(signal.SIGINT), sys.stdout

    def interrupted(signum, frame):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (closed below)
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if sys.stdout is not stdout:
            sys.stdout.close()
            sys.stdout = stdout


def score_shards(args, state: JobState) -> int:
    """The command: its job built from ``args`` first (:func:`storyeval.cli.jobs.shards_job`), then every step takes it."""
    from storyeval.analysis.ray_data import RAY_INSTALL
    from storyeval.cli.jobs import shards_job

    job = shards_job(args)
    check_address(job.address)  # seconds, where reading a large corpus's shards below takes longer
    source, output = job.input, job.output
    shards, fmt = list_shards(source, f".{job.format}" if job.format else None)
    if output.exists() and not output.is_dir():
        raise InputError(f"output {output} is not a folder")
    if output.resolve() == source.resolve():
        raise InputError(f"output {output} is the input folder; give another")
    parts = {shard: part_path(output, shard) for shard in shards}
    if len(set(parts.values())) < len(parts):
        raise InputError(f"{source}: two shards share a name before their extension, so they would share a part file")
    try:
        import ray.data  # noqa: F401 (to say what to install before any work; the shards are read as Ray reads them)
    except ImportError:
        raise ImportError(f"score-shards runs on Ray Data: {RAY_INSTALL}") from None
    run_record = job_record(job)
    known = {part.name for part in parts.values()}
    if output.is_dir():
        for stray in sorted(output.glob("*.parquet")):
            if stray.name not in known:
                raise PartError(f"{stray}: no shard of {source} is named {stray.stem}; this folder holds another job's parts: "
                                "score into another folder")
    pending, identities = [], {}
    for shard in shards:
        identities[shard] = shard_identity(shard)
        part = parts[shard]
        part.with_name(part.name + PARTIAL).unlink(missing_ok=True)  # left by a run that stopped while writing it
        if part.exists():
            check_part(part, shard, run_record, identities[shard])
        else:
            pending.append(shard)
    state.output, state.before = output, len(shards) - len(pending)
    if not pending:
        print(f"score-shards: all {len(shards)} parts are in {output} already; nothing to score", file=sys.stderr)
        return 0
    found = {shard: check_shard(shard, fmt, job) for shard in pending}
    check_shared_types(found)
    rows = {shard: found[shard].rows for shard in pending}
    if any(rows.values()):
        state.started_ray = connect(job.address)  # the last check: nothing is written before it passes
    output.mkdir(parents=True, exist_ok=True)
    for shard in [shard for shard in pending if rows[shard] == 0]:  # nothing to score: no actor is needed for it
        write_part(parts[shard], [empty_part_table(job.added)], run_record, identities[shard], 0)
        state.written += 1
        pending.remove(shard)
    if not pending:
        print(f"score-shards: {state.written} empty part(s) written, {state.before} already there; nothing to score", file=sys.stderr)
        return 0
    assembler = PartAssembler({shard: parts[shard] for shard in pending}, run_record, identities, rows, state)
    started = time.perf_counter()
    stream_parts(job, fmt, pending, assembler)
    seconds = time.perf_counter() - started
    print(f"score-shards: {state.written} part(s) written, {state.before} already there; {assembler.scored} rows in {seconds:.1f} s "
          f"({assembler.scored / max(seconds, 1e-9):.1f} rows/s with startup), {assembler.unscorable_summary()}; "
          f"{run_record['settings']}", file=sys.stderr)
    if assembler.failed:
        print(f"storyeval: error: {len(assembler.failed)} shard(s) could not be scored, so their parts were not written: "
              f"{'; '.join(assembler.failed.values())}; fix them and rerun the same command to score them alone "
              f"(the other parts are kept in {output})", file=sys.stderr)
        return 1
    return 0


def check_shard(shard: Path, fmt: str, job) -> Shard:
    """A shard read whole and checked (see :mod:`storyeval.cli.shard_files`) before Ray starts."""
    from storyeval.analysis.ray_data import check_columns

    found = read_shard(shard, fmt, job.columns.fields)
    if found.names:  # else an empty file: nothing to score, and an empty part is written for it
        if PATH_COLUMN in found.names:
            raise InputError(f"{shard} has a column {PATH_COLUMN!r}, the name Ray's readers give the column that says which "
                             "file a row came from: rename it")
        if FAILURE_COLUMN in found.names:
            raise InputError(f"{shard} has a column {FAILURE_COLUMN!r}, the name of the column this command's actors report "
                             "a failed batch in: rename it")
        check_columns(found.names, found.types, job.columns.column, job.columns.context_column, job.added, where=str(shard))
    return found


def check_shared_types(found: dict[Path, Shard]) -> None:
    """The shards' columns unify into one schema, as Ray's blocks of several shards must (a column of numbers in one
    shard and of text in another fails the job where two such blocks meet)."""
    import pyarrow as pa

    unified, first = None, None
    for shard, columns in found.items():
        if not columns.names:
            continue
        schema = pa.schema(list(zip(columns.names, columns.types)))
        try:
            unified = schema if unified is None else pa.unify_schemas([unified, schema], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
            raise InputError(f"{shard}: its columns do not fit those of {first.name} and the shards before it "
                             f"({error}); a job's shards share their column types") from None
        first = first or shard


def stream_parts(job, fmt: str, pending: list[Path], assembler: PartAssembler) -> None:
    """Score the pending shards as one Ray dataset, handing each batch to ``assembler`` as it comes back."""
    import ray.data
    import ray.data.exceptions
    import ray.exceptions
    from tqdm.auto import tqdm

    from storyeval.analysis.ray_data import mapped_scores

    actors = job.actors or default_actors(job.cpus_per_actor, job.gpus_per_actor)
    total = sum(assembler.rows[shard] for shard in pending)
    batches = None
    with job_settings():
        try:
            dataset = read_in_blocks(fmt, pending, assembler.rows, job.rows_per_batch, job.columns.fields)
            # every argument was checked when the job was built, and every shard's columns before Ray started
            scored = mapped_scores(dataset, job.scoring.metric, job.scoring.config, job.columns.column,
                                   context_column=job.columns.context_column, score_field=job.columns.score_field,
                                   actors=actors, num_cpus=job.cpus_per_actor, num_gpus=job.gpus_per_actor,
                                   batch_size=job.scoring.batch_size,
                                   # a block per call, so no call holds rows of two shards (see read_in_blocks); Ray
                                   # asks for a number of rows where the actors take GPUs
                                   ray_batch_size=None if job.gpus_per_actor == 0 else job.rows_per_batch,
                                   dtype=job.scoring.dtype, device=None, num_threads=max(1, math.floor(job.cpus_per_actor)),
                                   combination=job.scoring.combination, scorer_class=ShardScorer)
            with tqdm(total=total, unit="row", disable=job.quiet, desc=f"{job.scoring.name} on {actors} actor(s)") as bar:
                batches = iter(scored.iter_batches(batch_size=None, batch_format="pyarrow"))
                for batch in batches:
                    if not bar.n:  # the actors have started, and Ray's core has logged its line about them
                        tqdm.write(RESTARTS_NOTE, file=sys.stderr)
                    assembler.add(batch)
                    bar.update(batch.num_rows)
        except (ray.exceptions.RayError, ray.data.exceptions.SystemException, ray.data.exceptions.ExecutionTimeoutError) as error:
            raise JobError(f"the job failed: {innermost(error)} (Ray's logs hold the traceback)") from None
        finally:
            if batches is not None:
                batches.close()  # a stopped job stops its actors too
    if unfinished := assembler.unfinished():
        raise JobError(f"the job gave too few rows for {unfinished}; their parts were not written")


def read_in_blocks(fmt: str, pending: list[Path], rows: dict[Path, int], rows_per_batch: int, text_columns: list[str]):
    """The pending shards as one Ray dataset whose blocks each hold rows of one shard only: the whole shard where it
    has at most ``rows_per_batch`` rows, else about a quarter to all of ``rows_per_batch``. Scored a block per call, a
    block comes back as soon as it is scored, so a shard's part is written once its own blocks are back, whatever its
    size, and the progress bar moves block by block.

    Ray gives each file a read task of its own when asked for at least as many blocks as files, and splits each read
    task's output into (blocks asked for) / (read tasks) blocks, one number for all
    (ray/data/_internal/logical/rules/set_read_parallelism.py): so the shards are read in groups that share it (the
    power of two at or above a shard's rows / rows_per_batch, so that the groups are few), and the groups joined; a
    part's rows keep their order, as Ray keeps each read's. The reads take no CPU: with the actors holding every CPU of the
    cluster (2 on a 2-core machine), a read task that asked for one would wait for ever, and reading is light beside
    scoring. Absolute paths: a worker may run in another folder, or on another node."""
    import ray.data

    groups: dict[int, list[Path]] = {}
    for shard in pending:
        groups.setdefault(1 << (math.ceil(rows[shard] / rows_per_batch) - 1).bit_length(), []).append(shard)
    reads = [getattr(ray.data, READERS[fmt])([os.path.abspath(shard) for shard in shards], include_paths=True, num_cpus=0,
                                             partitioning=None, override_num_blocks=len(shards) * split,
                                             **reader_options(fmt, text_columns))
             for split, shards in groups.items()]
    return reads[0].union(*reads[1:]) if len(reads) > 1 else reads[0]


@contextlib.contextmanager
def job_settings():
    """Ray Data's settings for the job, restored after it, and its console kept to this command's lines."""
    import ray.data

    context = ray.data.DataContext.get_current()
    saved = context.execution_options.preserve_order, context.enable_progress_bars, context.use_datasource_v2
    # in input order, so that a part holds its shard's rows in the shard's order
    context.execution_options.preserve_order, context.enable_progress_bars = True, False
    # Ray 2.60 reads Parquet through its DataSourceV2 path, which first lists the files in a task of its own that
    # asks for a CPU whatever num_cpus says (ray/data/_internal/planner/plan_list_files_op.py): with the actors
    # holding every CPU, that task never runs and the job waits for ever. Its other Parquet reader, like the JSON
    # and CSV ones, reads in tasks of num_cpus=0
    context.use_datasource_v2 = False
    # Ray Data prints each failed task's traceback, in colour, on its console handlers: muted, its log file kept
    consoles = [handler for handler in logging.getLogger("ray.data").handlers
                if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)]
    levels = [handler.level for handler in consoles]
    for handler in consoles:
        handler.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            # Ray Data's advice to its own users ("the operator only received 1 input(s)", for a job of fewer rows
            # than two batches) is none this command's user can act on
            warnings.filterwarnings("ignore", category=UserWarning, module=r"ray\.data")
            yield
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars, context.use_datasource_v2 = saved
        for handler, level in zip(consoles, levels):
            handler.setLevel(level)


ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")


def innermost(error: BaseException) -> str:
    """The innermost cause of a Ray error, as one line without the colour codes of Ray's tracebacks."""
    while (inner := getattr(error, "cause", None) or error.__cause__) is not None and inner is not error:
        error = inner
    lines = [line.strip() for line in ANSI_CODE.sub("", str(error)).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"
