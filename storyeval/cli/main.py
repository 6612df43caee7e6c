"""``storyeval``: score files, register the metrics with ``evaluate``, run the demo, push to the Hub.

    storyeval score stories.txt                       # one story per line -> one score per line
    storyeval score stories.jsonl --field story -o scored.jsonl
    storyeval score stories.csv --column text --metric union --config wp
    storyeval score pairs.jsonl --metric continuation_quality --context-field context
    storyeval score stories.txt --metric story_quality  # the suite's combined percentile, 0-100
    storyeval register                                # evaluate.load("union") from anywhere, offline
    storyeval score-shards shards/ -o scored/         # a folder of shards on a Ray cluster, resumably (cli/shards.py)

The whole input is read and checked before a model loads: a line that is not
its format, a story that cannot be scored (no letters, or clearly not English:
the metrics are trained on English stories only) or an input with no stories
stops the run with one error line naming the line, and nothing is scored or
written. With ``--skip-invalid`` the other stories are scored, an unscorable one
gets nan (null in .jsonl), and a warning names its lines and why.

Stories are then scored in chunks, so files larger than memory stream through.
The output has the input's format: a score per line for ``.txt``; each record
with a ``score`` field added for ``.jsonl`` (and ``score_settings``, what the
scores were computed with); a ``score`` column added for ``.csv``
(``--score-field`` names it; continuation quality adds one per criterion,
``score_overall`` ...). Every format writes a score as the shortest text that
reads back as the same float. A progress bar and a one-line summary go to stderr.

An existing output file is replaced only with ``--overwrite``, and its extension
must be the input's (the output is written in the input's format). ``-`` as the
input reads standard input: ``--format`` names its format (.txt by default;
standard input that looks like JSON Lines or CSV is refused without it), and it
is copied to a temporary file before anything else, so it is checked whole like a
file. ``-o -`` writes standard output, as no ``-o`` does, and ``-o /dev/null``
discards the scores (to time a run). A failure while scoring (out of memory, an
interrupt) leaves no ``-o`` file, which appears only when complete; standard
output keeps the chunks of 1,024 scores written before it.
"""
from __future__ import annotations

import argparse
import errno
import io
import itertools
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

from tqdm.auto import tqdm

from storyeval.analysis.suite import DEFAULT_SUITE_CONFIG, SUITE_CONFIGS
from storyeval.analysis.suite import check_dtype as check_suite_dtype
from storyeval.checkpoints import resolution as checkpoints
from storyeval.checkpoints.registry import CORPORA as REFERENCE_CORPORA
from storyeval.checkpoints.registry import METRICS
from storyeval.cli import compare, jobs, shards
from storyeval.cli.errors import reporting_bad_input
from storyeval.cli.jobs import STDIN_NAME, STORY_METRICS, SUITE, DemoJob, ScoreJob, Scoring
from storyeval.files import FORMATS, InputError, Writer, csv_header, file_format, read_rows, sniffed_format, survey_rows
from storyeval.inputs import DTYPE_NAMES, PROBE_STORY, positive_int, rows_by_reason
from storyeval.version import __version__

CHUNK = 1024  # stories read, scored and written at a time
# storyeval is on no index, so the extra's own requirement is what to install (setup.py's DEMO has the same pin)
DEMO_INSTALL = 'python -m pip install "gradio>=5.0" (in a checkout: python -m pip install -e ".[demo]")'
SCORE_METRICS = (*METRICS, SUITE)  # what `storyeval score --metric` takes
FORMAT_NAMES = {".jsonl": "JSON Lines", ".csv": "CSV"}


def load_scorer(job: ScoreJob):
    """The job's scorer, loaded once: the suite, the int8 export without torch where it is cached, or the torch scorer."""
    scoring = job.scoring
    if scoring.is_suite:
        from storyeval.analysis.suite import StoryQuality
        from storyeval.scoring.devices import set_num_threads

        import_nltk_without_unused_statistics()
        set_num_threads(scoring.num_threads)
        return StoryQuality(scoring.config, device=scoring.device)
    folder = scoring.checkpoint
    import_nltk_without_unused_statistics()
    if scoring.dtype == "int8" and scoring.device == "cpu" and scoring.spec.loader == "storyeval.scoring.sequence:load_story_classifier":
        from storyeval.scoring.int8.cached import load_cached_int8_scorer

        checkpoints.check_metric(scoring.metric, folder)
        scorer = load_cached_int8_scorer(folder, scoring.num_threads)
        if scorer is not None:  # the export is cached: no torch, no transformers (cold start)
            scorer.windows(PROBE_STORY)  # missing NLTK data fails here, as in the torch scorer's load
            return scorer
    from storyeval.scoring import sequence as scoring_module
    from storyeval.scoring.devices import set_num_threads

    set_num_threads(scoring.num_threads)
    if job.quiet:  # transformers draws its own bar while it reads the weights
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    return scoring_module.load_scorer(scoring.metric, folder, device=scoring.device)


def check_dtype(scoring: Scoring) -> None:
    """Refuse a --dtype the metric or checkpoint does not run in, before the input is read or a model loads
    (the Python API refuses the same, once the scorer is loaded)."""
    if scoring.dtype is None:
        return
    if scoring.is_suite:
        if scoring.dtype == "int8":  # its story metrics' int8 copies, where the config holds the int8 fidelity rule
            from storyeval.analysis.suite import story_part_folders, suite_int8_problem

            if problem := suite_int8_problem(scoring.config, story_part_folders(scoring.config)):
                raise InputError(problem)
            return
        try:
            check_suite_dtype(scoring.dtype)
        except ValueError:
            raise InputError(f"--metric story_quality scores in float32 or int8, not {scoring.dtype}: pass --dtype float32 or leave it out") from None
        return
    if scoring.dtype != "int8":
        return
    if not scoring.is_story_classifier:
        raise InputError(f"--dtype int8 runs {' and '.join(STORY_METRICS)} only; {scoring.metric} scores in float32, bfloat16 or float16")
    from storyeval.scoring.int8.runtime import checkpoint_int8_problem

    if problem := checkpoint_int8_problem(scoring.checkpoint):
        raise InputError(problem)


def resolve_auto_dtype(job: ScoreJob) -> ScoreJob:
    """``--dtype auto``: int8 where the metric scores in int8, on the CPU, with int8 instructions, the runtime installed and
    the checkpoint (or every story part of the suite's config) holding the int8 fidelity rule; float32 otherwise. One line
    on stderr says which and why (not with --quiet). The job comes back with that dtype (and int8's CPU)."""
    import dataclasses

    from storyeval.scoring.int8.runtime import auto_dtype, checkpoint_int8_problem

    scoring = job.scoring
    device = scoring.device
    if device is None:  # the default device, CUDA where there is one (which takes torch to tell: --device cpu saves it)
        from storyeval.scoring.devices import resolve_device

        device = str(resolve_device(None))
    if device != "cpu":
        dtype, why = "float32", f"int8 runs on the CPU, not on {device}"
    elif not (scoring.is_story_classifier or scoring.is_suite):
        dtype, why = "float32", f"{scoring.metric} has no int8 copy"
    elif scoring.is_suite:
        from storyeval.analysis.suite import story_part_folders, suite_int8_problem

        dtype, why = auto_dtype(suite_int8_problem(scoring.config, story_part_folders(scoring.config)))
    else:
        dtype, why = auto_dtype(checkpoint_int8_problem(scoring.checkpoint))
    if not job.quiet:
        print(f"storyeval: --dtype auto scores in {dtype}: {why}", file=sys.stderr)
    return dataclasses.replace(job, scoring=dataclasses.replace(scoring, dtype=dtype, device=jobs.scoring_device(dtype, scoring.device)))


def import_nltk_without_unused_statistics() -> None:
    """Import NLTK with scipy and scikit-learn hidden, when none of the three is imported yet.

    NLTK's package ``__init__`` imports scipy.stats and scikit-learn for collocation statistics and
    classifier wrappers that the scorers never use: about 1.1 s of the command's start (speed.md).
    NLTK imports both inside ``try: ... except ImportError``, so hiding them only leaves those NLTK
    features without their backend in this process, which the command line owns; scipy and
    scikit-learn themselves import as usual afterwards (``sys.modules[name] = None`` is Python's own
    way to make an import fail).
    """
    if any(name in sys.modules for name in ("nltk", "scipy", "sklearn")):
        return
    hidden = ("scipy", "sklearn")
    sys.modules.update(dict.fromkeys(hidden))
    try:
        import nltk  # noqa: F401
    finally:
        for name in hidden:
            del sys.modules[name]


def load_percentile_reference(job: ScoreJob):
    """The checkpoint's human-written reference scores of the job's corpus, or an :class:`InputError` saying why there are none."""
    from storyeval.analysis.percentiles import load_reference

    try:
        return load_reference(job.scoring.checkpoint, job.percentile)
    except (FileNotFoundError, KeyError, ValueError) as error:
        raise InputError(f"--percentile: {error.args[0] if isinstance(error, KeyError) else error}") from None


def with_percentiles(scores: list[list[float]], reference, scoring: Scoring) -> list[list[float]]:
    """Each row's scores followed by their percentiles among the reference's human-written stories."""
    criteria = [None]
    if scoring.scores_continuations:
        from storyeval.models.continuation.model import CRITERIA

        criteria = list(CRITERIA)
    columns = [reference.percentile([row[i] for row in scores], criterion) for i, criterion in enumerate(criteria)]
    return [row + [column[j] for column in columns] for j, row in enumerate(scores)]


def output_is_a_device(output: str | None) -> bool:
    """Whether ``-o`` names something that exists and is neither a regular file nor a folder (/dev/null, a pipe):
    written to directly, with no extension to match, nothing to overwrite and no .partial file beside it."""
    return bool(output) and os.path.exists(output) and not os.path.isfile(output) and not os.path.isdir(output)


def check_paths(job: ScoreJob, path: Path, fmt: str) -> None:
    """Everything about the input and output paths, before a model loads: nothing is written on a refusal."""
    output = job.output
    if not output or output_is_a_device(output):
        return
    # writing onto the input would replace the stories with their scores
    if os.path.isdir(output):
        raise InputError(f"output {output} is a directory; give a file path")
    if os.path.exists(output) and os.path.samefile(output, path):
        raise InputError(f"output {output} is the input file; give another path")
    if not Path(output).resolve().parent.is_dir():
        raise InputError(f"output {output}: its folder does not exist")
    if Path(output).suffix.lower() != fmt:
        raise InputError(
            f"output {output}: the scores are written in the input's format ({fmt}); name the output *{fmt}"
        )
    if os.path.lexists(output) and not job.overwrite:
        raise InputError(f"output {output} exists; pass --overwrite to replace it")


def score_chunk(scorer, job: ScoreJob, rows) -> list[list[float]]:
    """Scores per row, in the order of the score columns."""
    scoring, columns = job.scoring, job.columns
    contexts = [row.texts[columns.context_column] for row in rows] if columns.context_column else None
    stories = [row.texts[columns.column] for row in rows]
    if scoring.scores_continuations:
        scores = scorer.score(contexts, stories, batch_size=scoring.batch_size, dtype=scoring.dtype)
        return [list(values) for values in zip(*scores.values())]
    from storyeval.scoring.windows import StoryTooLongError

    try:
        if scoring.is_suite:
            return [[value] for value in scorer.score(stories, contexts=contexts, batch_size=scoring.batch_size, dtype=scoring.dtype)["combined"]]
        return [[value] for value in scorer.score(stories, batch_size=scoring.batch_size, dtype=scoring.dtype)]
    except StoryTooLongError as error:
        raise InputError(f"{job.input_name}:{rows[error.index].line}: {error.problem}") from None


def story_scorers(scorer, scoring: Scoring) -> list:
    """The scorers that cut stories into windows: the metric's own, or the suite's story metrics'."""
    if scoring.is_suite:
        return [part for name, _, part, _ in scorer.components if name != "continuation_quality"]
    return [] if scoring.scores_continuations else [scorer]


def check_long_stories(path: Path, fmt: str, lines: list[int], scorer, job: ScoreJob) -> None:
    """Cut the long stories of a file (:data:`storyeval.files.LONG_TEXT`) into the scorer's windows before any story is
    scored: one past the window limit stops the run now rather than after the stories before it."""
    windowed = story_scorers(scorer, job.scoring)
    if not lines or not windowed:
        return
    wanted = set(lines)
    columns = job.columns
    for row in read_rows(path, fmt, columns.fields):
        if row.line not in wanted:
            continue
        story = row.texts[columns.column]
        if job.scoring.is_suite and columns.context_column:  # the suite's story metrics score the context and the story
            story = f"{row.texts[columns.context_column]} {story}"
        for part in windowed:
            try:
                part.windows(story)
            except ValueError as error:
                raise InputError(f"{path}:{row.line}: {error}") from None


def format_rate(count: int, seconds: float, unit: str = "story", units: str = "stories") -> str:
    """A rate a person can read: "170.3 stories/s", or "4.2 s/story" below one a second (a long story)."""
    if count and seconds / count > 1:
        return f"{seconds / count:.1f} s/{unit}"
    return f"{count / max(seconds, 1e-9):.1f} {units}/s"


def prepare_int8(scorer) -> None:
    """Make the torch scorer's int8 copy now, before the rate is timed, saying so when that means exporting it
    (seconds, once per checkpoint; a cached export loads without torch and never gets here)."""
    import torch

    from storyeval.scoring.int8 import runtime as int8_runtime

    exporting = int8_runtime.needs_export(scorer.model)
    if exporting:
        print(f"storyeval: exporting {scorer.name} to int8, once (later runs reuse it from {int8_runtime.cache_root()}) ...",
              file=sys.stderr, flush=True)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        scorer.model_in(torch.int8)
    for warning in caught:  # a CPU without int8 instructions scores in float32: one line that says so, not Python's two
        if issubclass(warning.category, RuntimeWarning):
            print(f"storyeval: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    if exporting:
        print(f"storyeval: exported in {time.perf_counter() - started:.1f} s", file=sys.stderr)


def spool_stdin(fmt: str) -> Path:
    """Standard input copied into a temporary file, which the readers go through twice (a count for the progress
    bar, then the stories); the caller removes it."""
    handle, name = tempfile.mkstemp(prefix="storyeval-stdin-", suffix=fmt)
    with os.fdopen(handle, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
    return Path(name)


def score_file(job: ScoreJob) -> dict:
    if job.input != "-":
        return score_path(job, Path(job.input))
    fmt = f".{job.format or 'txt'}"
    spooled = spool_stdin(fmt)
    try:
        if job.format is None and (found := sniffed_format(spooled, job.columns.column)):
            what = "a JSON object" if found == ".jsonl" else "a header"
            raise InputError(f"{STDIN_NAME}: looks like {FORMAT_NAMES[found]} (its first line is {what}), which would be scored "
                             f"line by line as plain text; pass --format {found.lstrip('.')}, or --format txt to score the lines as they are")
        return score_path(job, spooled, fmt)
    except InputError as error:  # name standard input, not the temporary copy
        raise InputError(str(error).replace(str(spooled), STDIN_NAME)) from None
    finally:
        spooled.unlink(missing_ok=True)


def no_stories(path: Path, fmt: str, stdin: bool) -> InputError:
    """The error of an input that holds no stories: an empty file, blank lines, a CSV header alone."""
    if stdin and path.stat().st_size == 0:
        return InputError(f"{path}: no stories to score (standard input was empty)")
    if fmt == ".csv" and csv_header(path):
        return InputError(f"{path}: no stories to score (a header and no rows)")
    return InputError(f"{path}: no stories to score ({'an empty file' if path.stat().st_size == 0 else 'blank lines only'})")


def score_path(job: ScoreJob, path: Path, fmt: str | None = None) -> dict:
    scoring, columns = job.scoring, job.columns
    if path.is_dir():
        raise InputError(f"{path} is a folder; give a story file (.txt, .jsonl or .csv) in it")
    if not path.is_file():
        raise InputError(f"input file not found: {path}")
    stdin = fmt is not None
    fmt = fmt or (f".{job.format}" if job.format else file_format(path))
    fields = columns.fields
    if columns.context_column and fmt == ".txt":
        if scoring.is_suite:
            raise InputError(f"{path}: --context-field needs a .jsonl or .csv file with {columns.column!r} and "
                             f"{columns.context_column!r} fields")
        raise InputError(f"{path}: {scoring.metric} scores a text given its context; give a .jsonl or .csv file with "
                         f"{columns.column!r} and {columns.context_column!r} fields")
    check_paths(job, path, fmt)
    score_columns = job.score_columns
    settings_field = f"{columns.score_field}_settings"
    if job.explain and (fmt != ".jsonl" or not scoring.is_story_classifier):
        raise InputError("--explain writes each story's sentence blame as a field per record: use a .jsonl input and a story metric (union, plot_coherence)")
    if job.percentile:
        if scoring.is_suite:
            raise InputError("--percentile: story_quality's score is a percentile already (the mean of its metrics' percentiles)")
        if fmt == ".txt":
            raise InputError("--percentile adds a column per score: use a .jsonl or .csv input")
        score_columns += [f"{column}_percentile" for column in score_columns]
    check_dtype(scoring)
    if job.explain:
        from storyeval.analysis import explain  # its sentence splitting needs NLTK: imported only when asked for
    # fields the output adds: an input that has one already is refused, not overwritten
    added = score_columns + ([settings_field] if fmt == ".jsonl" else []) + ([explain.FIELD] if job.explain else [])
    # the whole input, read and checked before a model loads: a bad line late in a file wastes no scoring
    survey = survey_rows(path, fmt, fields, added)
    if not survey.rows:
        raise no_stories(path, fmt, stdin)
    unscored = "null" if fmt == ".jsonl" else "nan"
    if survey.invalid and not job.skip_invalid:
        line, problem = survey.first_problem
        more = f"; {len(survey.invalid) - 1} more row(s) cannot be scored" if len(survey.invalid) > 1 else ""
        raise InputError(f"{path}:{line}: {problem}{more} (--skip-invalid scores the rest and writes {unscored} there)")
    reference = load_percentile_reference(job) if job.percentile else None
    scorer = load_scorer(job)
    if scoring.dtype == "int8":  # the torch scorers' int8 copies are made before the clock starts (a cached export needs none)
        for part in story_scorers(scorer, scoring):
            if hasattr(part, "model_in"):
                prepare_int8(part)
    check_long_stories(path, fmt, survey.long_lines, scorer, job)
    if job.default_note:
        print(f"storyeval: {job.default_note}", file=sys.stderr)
    settings = (scorer.settings(with_contexts=bool(columns.context_column), dtype=scoring.dtype) if scoring.is_suite
                else scorer.settings(scoring.dtype))
    # an output file appears only when scoring succeeds: a bad line never truncates an old result
    output = job.output
    device_output = output_is_a_device(output)
    partial = Path(str(output) + ".partial") if output and not device_output else None
    if device_output:
        out_handle = open(output, "w", encoding="utf-8", newline="")
    else:
        out_handle = partial.open("w", encoding="utf-8", newline="") if partial else sys.stdout
    total, summed, low, high = 0, 0.0, math.inf, -math.inf
    started = time.perf_counter()
    try:
        # written to a buffer per chunk, so a failure inside a chunk leaves no half-written chunk behind
        writer_buffer = io.StringIO()
        writer = Writer(writer_buffer, fmt, score_columns, csv_header(path) if fmt == ".csv" else None,
                        constants={settings_field: settings})
        rows = read_rows(path, fmt, fields, added)
        with tqdm(total=survey.rows, disable=job.quiet, unit="story", desc=scoring.name) as bar:
            while chunk := list(itertools.islice(rows, CHUNK)):
                valid = [row for row in chunk if row.line not in survey.invalid]
                if job.explain and valid:  # each record gets its sentences' leave-one-out score changes
                    valid = explain.with_explanations(valid, scorer, columns.column, batch_size=scoring.batch_size,
                                                      dtype=scoring.dtype)
                    explained = {row.line: row for row in valid}
                    chunk = [explained.get(row.line, row) for row in chunk]
                scores = score_chunk(scorer, job, valid) if valid else []
                if reference is not None:
                    scores = with_percentiles(scores, reference, scoring)
                scores = iter(scores)
                for row in chunk:
                    values = [math.nan] * len(score_columns) if row.line in survey.invalid else next(scores)
                    writer.write(row.record, values)
                    if not math.isnan(values[0]):
                        total += 1
                        summed += values[0]
                        low, high = min(low, values[0]), max(high, values[0])
                out_handle.write(writer_buffer.getvalue())
                writer_buffer.seek(0)
                writer_buffer.truncate()
                bar.update(len(chunk))
        if partial:  # inside the try, so a failed rename still removes the .partial file
            out_handle.close()
            partial.replace(output)
    except BaseException:
        if partial:
            out_handle.close()
            partial.unlink(missing_ok=True)
        raise
    finally:
        if device_output:
            out_handle.close()
    seconds = time.perf_counter() - started
    if not total:
        low = high = math.nan
    skipped = sorted(survey.invalid)
    summary = {"stories": total, "mean": summed / total if total else math.nan, "min": low, "max": high,
               "seconds": seconds, "skipped_lines": skipped, "settings": settings}
    mean_label = "mean" if len(score_columns) == 1 else f"mean {score_columns[0]}"
    if skipped:
        print(f"storyeval: warning: {len(skipped)} row(s) could not be scored and were written as {unscored}: "
              f"{rows_by_reason(survey.by_reason(), unit='line')}", file=sys.stderr)
    if not total:  # every row was skipped: there is no mean or rate to give
        print(f"{scoring.name}: no story scored ({len(skipped)} skipped); {settings}", file=sys.stderr)
        return summary
    print(
        f"{scoring.name}: {total} {'story' if total == 1 else 'stories'}, {mean_label} {summary['mean']:.4f} "
        f"(min {low:.4f}, max {high:.4f}), {format_rate(total, seconds)}; {settings}",
        file=sys.stderr,
    )
    return summary


def register(args) -> int:
    from storyeval.checkpoints.registration import register as register_everything

    try:
        report = register_everything()
    except OSError as error:
        print(f"storyeval: error: {error}", file=sys.stderr)
        return 1
    for stale in report.replaced:
        print(f"replaced the stale copy {stale}", file=sys.stderr)
    print("evaluate.load() now takes " + ", ".join(f"evaluate.load({name!r})" for name in report.modules), file=sys.stderr)
    print("snapshot_download(..., local_files_only=True) finds " + ", ".join(report.checkpoints), file=sys.stderr)
    return 0


def demo(job: DemoJob) -> int:
    try:
        import gradio  # noqa: F401 (only to know whether the [demo] extra is installed)
    except ImportError:
        print(f"storyeval: error: the demo needs the [demo] extra: {DEMO_INSTALL}", file=sys.stderr)
        return 1
    if problem := port_problem(job.host, job.port):
        print(f"storyeval: error: {problem}", file=sys.stderr)
        return 1
    from storyeval.cli.demo import launch

    launch(job.metrics, job.host, job.port)
    return 0


def port_problem(host: str, port: int) -> str | None:
    """Why the demo cannot listen on ``host:port`` (in use, not an address here), or None: checked before Gradio
    starts, whose own failure is a long traceback."""
    import socket

    if not 0 < port < 65536:
        return f"--port must be between 1 and 65535, got {port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        return f"--host {host}: not an address here ({error.strerror})"
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return f"port {port} is in use; pass --port N"
            return f"cannot listen on {host}:{port} ({error.strerror}); pass another --host or --port"
    return None


def push(args) -> int:
    from storyeval.cli.hub import PushError, push_folder

    try:
        report = push_folder(args.folder, args.repo_id, dry_run=args.dry_run, private=args.private)
    # ValueError: a checkpoint of another metric; LookupError: missing NLTK data, as in `score`
    except (PushError, KeyError, OSError, ValueError, LookupError) as error:
        print(f"storyeval: error: {error}", file=sys.stderr)
        return 1
    for check in report.checks:
        print(f"ok: {check}", file=sys.stderr)
    action = "would upload" if args.dry_run else "uploaded"
    print(f"{action} {len(report.files)} files to {report.kind} repo {args.repo_id}", file=sys.stderr)
    return 0


class Parser(argparse.ArgumentParser):
    """An argument error is one line, as every other error of the command is: the usage it would print
    first is what ``--help`` shows."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class HelpWithDefaults(argparse.HelpFormatter):
    """Adds each option's default to its help, unless the help says it already (a default that
    depends on --metric) or there is nothing to say (a flag, an option that is off by default)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return text + " (default: %(default)s)"

    # argparse's own wrap breaks at hyphens, splitting config names ("wp- base"); these keep them whole
    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False)

    def _fill_text(self, text, width, indent):
        import textwrap

        return textwrap.fill(self._whitespace_matcher.sub(" ", text).strip(), width, initial_indent=indent,
                             subsequent_indent=indent, break_on_hyphens=False)


def build_parser() -> argparse.ArgumentParser:
    defaults = HelpWithDefaults
    parser = Parser(prog="storyeval", description="Reference-free story metrics.", formatter_class=defaults)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    # what can be loaded (bundled or published); a registered config with no checkpoint yet says why when asked for
    configs = "; ".join(f"{name}: {', '.join(checkpoints.available_configs(name))} (default {spec.default})" for name, spec in METRICS.items())
    configs += f"; {SUITE}: {', '.join(SUITE_CONFIGS)} (default {DEFAULT_SUITE_CONFIG}). Which to pick: README.md, 'Which config'"
    batch_sizes = ", ".join(f"{spec.batch_size} for {name}" for name, spec in METRICS.items()) + f", {jobs.SUITE_BATCH_SIZE} for {SUITE}"
    score = commands.add_parser("score", help="score a .txt / .jsonl / .csv file of stories", formatter_class=defaults,
                                description=plain(__doc__.split("\n\n", 2)[2]), epilog=f"configs: {configs}")
    score.add_argument("input", help="stories: .txt (one per line), .jsonl or .csv; - reads standard input")
    score.add_argument("-o", "--output", help="output file, same format and extension as the input; - or none: standard output")
    score.add_argument("--format", choices=[f.lstrip(".") for f in FORMATS], default=None,
                       help="the input's format (default: its extension; txt for standard input)")
    score.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    score.add_argument("--metric", default="union", choices=list(SCORE_METRICS),
                       help="which metric scores the file; story_quality: the suite's combined percentile (0-100), its metrics in one score")
    score.add_argument("--config", default=None,
                       help="checkpoint: a config name, a folder or a Hub repo id (default: the metric's default config, see below)")
    score.add_argument("--column", "--field", default="story", help="the story (or continuation) column (.csv) or field (.jsonl)")
    score.add_argument("--context-column", "--context-field", default=None,
                       help="the column or field with the text before each story: continuation_quality needs it (default: context); "
                            "story_quality uses it when given (its story metrics then score context + story, and continuation quality joins)")
    score.add_argument(
        "--score-field", default="score",
        help="the column (.csv) or field (.jsonl) the scores go in (continuation_quality: <name>_overall ...); must not already be in the input",
    )
    score.add_argument("--batch-size", type=positive_int, default=None, help=f"windows or pairs per forward pass (default: {batch_sizes})")
    score.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1 (default: CUDA if available; the CPU with --dtype int8)")
    score.add_argument(
        "--dtype", default=None, choices=[*DTYPE_NAMES, "auto"],
        help="weights' precision (default: float32); bfloat16 is faster on some CPUs with bf16 instructions (time it), scores move slightly; "
        "int8 (union and plot_coherence, CPU only: the MiniLM configs, and a -base config whose int8 copy holds the fidelity rule) runs an "
        "int8 copy in OpenVINO; story_quality: float32, or int8 through its story metrics where its config holds the rule; "
        "auto: int8 where it is offered and this CPU has int8 instructions, else float32 (one line says which)",
    )
    score.add_argument("--num-threads", type=positive_int, default=None,
                       help="CPU threads for scoring, int8 included (default: torch's, usually one per core)")
    score.add_argument("--skip-invalid", action="store_true",
                       help="score the other rows when one cannot be scored (empty, no letters, not English): nan there "
                            "(null in .jsonl), and a warning naming its lines and why")
    score.add_argument("--quiet", action="store_true", help="no progress bar")
    score.add_argument("--percentile", choices=REFERENCE_CORPORA, default=None,
                       help="also write each score's percentile among human-written test stories of this corpus "
                            "(the checkpoint's reference_scores.json): 30 means it scores higher than 30%% of them")
    score.add_argument("--explain", action="store_true",
                       help="add an 'explanation' field per record (.jsonl, story metrics): each sentence's score change when left out")
    commands.add_parser("register", formatter_class=defaults,
                        help="let evaluate.load('union') etc. find the metrics, and snapshot_download the bundled checkpoints, offline")
    demo_parser = commands.add_parser("demo", help="start the Gradio demo (needs the [demo] extra)", formatter_class=defaults)
    demo_parser.add_argument("--metric", choices=["all", *METRICS], default="all", help="which metrics the page scores with")
    demo_parser.add_argument("--host", default="127.0.0.1", help="address to serve on (0.0.0.0: every interface)")
    demo_parser.add_argument("--port", type=int, default=7860, help="port to serve on")
    push = commands.add_parser("push", help="push a checkpoint, metric or dataset folder to the Hugging Face Hub", formatter_class=defaults)
    push.add_argument("folder", help="e.g. hub_cards/union-roc, metrics/union, spaces/storyeval")
    push.add_argument("--repo-id", required=True, help="owner/name on the Hub")
    push.add_argument("--dry-run", action="store_true", help="validate offline (card, files, requirements, checkpoint load); upload nothing")
    push.add_argument("--private", action="store_true", help="create the repo private")
    compare.add_parser(commands, formatter_class=defaults)
    shards.add_parser(commands, formatter_class=defaults)
    return parser


def plain(text: str) -> str:
    """A docstring as --help shows it: without reStructuredText's double backticks."""
    return text.replace("``", "")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        return demo(jobs.demo_job(args))
    if args.command == "register":
        return register(args)
    if args.command == "push":
        return push(args)
    if args.command == "compare":
        return compare.run(jobs.compare_job(args))
    if args.command == "score-shards":
        return shards.run(args)  # builds its job where a stop (Ctrl-C) during its checks is reported as one
    try:
        job = jobs.score_job(args)
    except jobs.UsageError as error:
        print(f"storyeval: error: {error}", file=sys.stderr)
        return 2

    def score() -> None:
        nonlocal job
        if job.scoring.dtype == "auto":
            job = resolve_auto_dtype(job)
        if job.scoring.device != "cpu":  # the CPU is always there, and checking it would import torch
            from storyeval.scoring.devices import resolve_device

            resolve_device(job.scoring.device)  # a bad --device fails before the model loads or the input is read
        score_file(job)

    try:
        return reporting_bad_input(score)
    except KeyboardInterrupt:  # a stop (Ctrl-C): one line and a shell's status, as score-shards gives
        if job.output and not output_is_a_device(job.output):
            kept = f"nothing written to {job.output}"
        else:
            kept = "the rows printed before it are whole"
        print(f"\nstoryeval score: stopped; {kept}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
