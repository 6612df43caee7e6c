"""What each ``storyeval`` command is asked to do, resolved once from its parsed arguments into one value.

``storyeval score``, ``score-shards``, ``compare`` and ``demo`` each build their job here, and nowhere else: the
metric, its config (the metric's default from :mod:`storyeval.checkpoints.registry`, or the suite's, where none is
given), the dtype, device and batch size, the text columns and the score fields. Every helper of a command takes
the job, never argparse's Namespace, and reads what it needs from it instead of working it out again.

A job's checkpoint folder is resolved the first time it is asked for (:attr:`Scoring.checkpoint`), at the point of a
run where the command needed it before (after the input is checked, so a bad line is reported before a checkpoint
is fetched), and kept for the rest of the run.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from storyeval.analysis.suite import DEFAULT_SUITE_CONFIG, FAST_SUITE_CONFIG
from storyeval.checkpoints.registry import METRICS, MetricSpec, default_note, metric_spec
from storyeval.files import InputError

SUITE = "story_quality"  # the suite: every metric in one score (storyeval.analysis.suite)
SUITE_BATCH_SIZE = 16  # the suite's windows or pairs per forward pass (StoryQuality.score's default)
# the story classifiers: the metrics that run in int8 and whose scores --explain can blame on sentences
STORY_METRICS = ("union", "plot_coherence")
STDIN_NAME = "<stdin>"  # how messages name standard input


class UsageError(ValueError):
    """An option's value that no command could run with (a blank name): one line and exit status 2, as argparse's own
    errors end."""


def scoring_device(dtype: str | None, device: str | None) -> str | None:
    """The device a job scores on: the one given, else the CPU for int8, which runs there only (not CUDA by default)."""
    return "cpu" if dtype == "int8" and device is None else device


def default_config(metric: str) -> str:
    """The config a metric scores with when none is given: the registry's, or the suite's."""
    return DEFAULT_SUITE_CONFIG if metric == SUITE else metric_spec(metric).default


@dataclass(frozen=True)
class Scoring:
    """What scores the texts: the part of a job that ``score``, ``score-shards`` and ``compare`` share."""

    metric: str
    config: str
    dtype: str | None = None
    batch_size: int | None = None  # None: the scorer's own default
    device: str | None = None
    num_threads: int | None = None
    combination: str | None = None  # story_quality: mean or learned (None: the config's)
    folder: Path | None = field(default=None, repr=False)  # the checkpoint's folder, where a check resolved it already

    @property
    def is_suite(self) -> bool:
        return self.metric == SUITE

    @property
    def spec(self) -> MetricSpec | None:
        """The metric's registry entry; None for the suite, which is no single checkpoint."""
        return None if self.is_suite else METRICS[self.metric]

    @property
    def scores_continuations(self) -> bool:
        """Whether the metric scores a continuation given its context (continuation quality), not a story alone."""
        return not self.is_suite and self.spec.takes_contexts

    @property
    def is_story_classifier(self) -> bool:
        return self.metric in STORY_METRICS

    @property
    def name(self) -> str:
        """How progress bars and summaries name what scored: ``union/roc``."""
        return f"{self.metric}/{self.config}"

    @functools.cached_property
    def checkpoint(self) -> Path:
        """The checkpoint's local folder, resolved on first use and kept (a download, or the bundled copy entered into
        the Hugging Face cache, happens once)."""
        from storyeval.checkpoints.resolution import resolve_checkpoint

        if self.is_suite:
            raise ValueError("story_quality is a suite of checkpoints, not one: its parts resolve their own")
        return self.folder if self.folder is not None else resolve_checkpoint(self.metric, self.config)


@dataclass(frozen=True)
class Columns:
    """Where the texts are and where the scores go."""

    column: str
    context_column: str | None
    score_field: str

    @property
    def fields(self) -> list[str]:
        """The text fields a row must hold, the story's first."""
        return [self.column, self.context_column] if self.context_column else [self.column]


@dataclass(frozen=True)
class ScoreJob:
    """``storyeval score``."""

    scoring: Scoring
    columns: Columns
    input: str
    output: str | None  # None: standard output
    format: str | None
    overwrite: bool
    skip_invalid: bool
    quiet: bool
    percentile: str | None
    explain: bool
    # where no config was given and the default is not the fast one: the line that names the fast one, said once the
    # input has passed its checks and the model has loaded
    default_note: str | None = None

    @property
    def input_name(self) -> str:
        """How messages name the input."""
        return STDIN_NAME if self.input == "-" else self.input

    @property
    def score_columns(self) -> list[str]:
        """The fields or columns the scores go in (before any percentile's): one per criterion of continuation quality,
        else one (the suite's: its combined percentile)."""
        if self.scoring.scores_continuations:
            from storyeval.models.continuation.model import CRITERIA

            return [f"{self.columns.score_field}_{criterion}" for criterion in CRITERIA]
        return [self.columns.score_field]


def score_job(args) -> ScoreJob:
    """``storyeval score``'s job; a :class:`UsageError` for a blank score field or config."""
    if args.metric == SUITE:
        batch_size, context_column = SUITE_BATCH_SIZE, args.context_column
    else:
        spec = metric_spec(args.metric)
        # union and plot coherence score the story as written, without a context
        batch_size, context_column = spec.batch_size, (args.context_column or "context") if spec.takes_contexts else None
    config = default_config(args.metric) if args.config is None else args.config
    if not args.score_field.strip():  # a blank name would write a nameless CSV column
        raise UsageError("--score-field must be a non-blank name")
    if not config.strip():  # a blank name would mean the current folder
        raise UsageError("--config must be a config name, a folder or a Hub repo id")
    scoring = Scoring(args.metric, config, dtype=args.dtype, batch_size=batch_size if args.batch_size is None else args.batch_size,
                      device=scoring_device(args.dtype, args.device), num_threads=args.num_threads)
    fast = FAST_SUITE_CONFIG if args.metric == SUITE else metric_spec(args.metric).fast
    return ScoreJob(scoring, Columns(args.column, context_column, args.score_field), input=args.input,
                    output=None if args.output == "-" else args.output, format=args.format, overwrite=args.overwrite,
                    skip_invalid=args.skip_invalid, quiet=args.quiet, percentile=args.percentile, explain=args.explain,
                    default_note=default_note(args.metric, config, fast) if args.config is None else None)


@dataclass(frozen=True)
class ShardsJob:
    """``storyeval score-shards``: its scoring is checked (metric, config, dtype, context column) when it is built."""

    scoring: Scoring
    columns: Columns
    input: Path
    output: Path
    format: str | None
    address: str | None
    actors: int | None
    cpus_per_actor: float
    gpus_per_actor: float
    rows_per_batch: int
    quiet: bool

    @property
    def with_contexts(self) -> bool:
        return self.columns.context_column is not None

    @functools.cached_property
    def added(self) -> list[str]:
        """The columns a part adds to its shard's: the scores, then the problem and settings."""
        from storyeval.analysis.ray_data import output_columns

        return output_columns(self.scoring.metric, self.scoring.config, self.columns.score_field, self.with_contexts)


def shards_job(args) -> ShardsJob:
    """``storyeval score-shards``' job, its scoring checked; an :class:`InputError` (or the ValueError of the check) names
    what is wrong."""
    from storyeval.analysis.ray_data import check_job

    context_column = args.context_column
    if args.metric == "continuation_quality" and context_column is None:
        context_column = "context"
    if not args.score_field.strip():
        raise InputError("--score-field must be a non-blank name")
    if not args.cpus_per_actor > 0 or args.gpus_per_actor < 0:
        raise InputError("--cpus-per-actor must be positive and --gpus-per-actor not negative")
    config, folder = check_job(args.metric, args.config, args.dtype, context_column, args.combination)
    scoring = Scoring(args.metric, config, dtype=args.dtype, batch_size=args.batch_size, combination=args.combination,
                      folder=folder)
    return ShardsJob(scoring, Columns(args.column, context_column, args.score_field), input=Path(args.input),
                     output=Path(args.output), format=args.format, address=args.address, actors=args.actors,
                     cpus_per_actor=args.cpus_per_actor, gpus_per_actor=args.gpus_per_actor,
                     rows_per_batch=args.rows_per_batch, quiet=args.quiet)


@dataclass(frozen=True)
class CompareJob:
    """``storyeval compare``."""

    scoring: Scoring
    inputs: list[str]
    story_field: str
    score_field: str
    id_field: str
    resamples: int
    seed: int
    confidence: float
    json_path: str | None
    plot: str | None
    overwrite: bool


def compare_job(args) -> CompareJob:
    config = default_config(args.metric) if args.config is None else args.config
    scoring = Scoring(args.metric, config, dtype=args.dtype, batch_size=args.batch_size, device=args.device,
                      num_threads=args.num_threads)
    return CompareJob(scoring, list(args.inputs), story_field=args.field, score_field=args.score_field, id_field=args.id_field,
                      resamples=args.resamples, seed=args.seed, confidence=args.confidence, json_path=args.json_path,
                      plot=args.plot, overwrite=args.overwrite)


@dataclass(frozen=True)
class DemoJob:
    """``storyeval demo``: which metrics the page scores with, and where it listens."""

    metrics: tuple[str, ...]
    host: str
    port: int


def demo_job(args) -> DemoJob:
    return DemoJob(tuple(METRICS) if args.metric == "all" else (args.metric,), args.host, args.port)
