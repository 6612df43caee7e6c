"""Score a Ray Data dataset on a pool of actors, each of which loads its scorer once.

    import ray
    from storyeval import score_dataset

    stories = ray.data.read_parquet("s3://bucket/stories/")        # or read_json, read_csv, from_huggingface
    scored = score_dataset(stories, "union", "roc", column="text", actors=16, dtype="int8")
    scored.write_parquet("s3://bucket/scored/")                    # text, ..., score, score_problem, score_settings

:func:`score_dataset` adds the score columns and returns the dataset, lazily, as Ray Data's own
``map_batches`` does: each actor of the pool constructs :class:`StoryScorer` once (it loads the
checkpoint, as :func:`storyeval.load_from_checkpoint` does) and scores batch after batch. The columns:

* ``union``, ``plot_coherence``: ``score`` (``score_field`` names it);
* ``continuation_quality`` (needs ``context_column``): ``score_overall``, ``score_relevance``, ``score_interestingness``;
* ``story_quality``: ``score_union``, ``score_union_percentile``, ..., ``score_combined`` (its per-story keys; with
  ``context_column``, continuation quality joins and the story metrics score context + story);

and for every metric ``score_problem``, null where the row was scored, else why it could not be (no letters,
not English, a null): such a row gets NaN in every score column instead of stopping the job, and ``score_settings``, the
result's settings string (checkpoint, dtype, versions), the same on every row.

Everything that can be checked without scoring is checked before the dataset runs, each with one line: the metric
and config, the dtype, the columns (present, text, and no score column there already). An actor that dies (a node
lost, a process killed) is restarted and its batch retried by Ray, so every row comes out once.

Ray is imported only when a dataset is scored: ``pip install "storyeval[ray]"``.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

from storyeval.analysis.rows import column_keys, score_rows, settings_of
from storyeval.inputs import DTYPE_NAMES, FLOAT_DTYPE_NAMES, check_batch_size

SUITE_METRIC = "story_quality"
logger = logging.getLogger(__name__)
RAY_INSTALL = 'pip install "storyeval[ray]" (Ray Data: pip install "ray[data]>=2.60")'


def metric_names() -> list[str]:
    from storyeval.checkpoints.registry import METRICS

    return [*METRICS, SUITE_METRIC]


def check_job(metric: str, config: str | None, dtype: str | None, context_column: str | None,
              combination: str | None = None) -> tuple[str, Path | None]:
    """The config a job scores with (the metric's default for None) and its checkpoint's local folder here (None for the
    suite, whose parts each have one), or a one-line error about the metric, the config, the dtype or the context
    column, before anything runs. A config is resolved here, so a checkpoint that is neither bundled, cached nor a
    folder fails now and not on every actor."""
    from storyeval.checkpoints import resolution as checkpoints
    from storyeval.checkpoints.registry import METRICS

    if metric not in metric_names():
        raise ValueError(f"unknown metric {metric!r}; choose one of {metric_names()}")
    if metric == SUITE_METRIC:
        from storyeval.analysis.suite import SUITE_CONFIGS, check_combination, check_config

        config = check_config(config or "default")
        check_combination(config, combination)
        if dtype not in (None, "float32"):
            raise ValueError(f"story_quality scores in float32 only, not dtype {dtype!r}")
        for part in SUITE_CONFIGS[config]:
            checkpoints.resolve_checkpoint(part.metric, part.config)
        return config, None
    if combination is not None:
        raise ValueError("combination is a story_quality option")
    spec = METRICS[metric]
    allowed = FLOAT_DTYPE_NAMES if spec.takes_contexts else DTYPE_NAMES
    if dtype is not None and dtype not in allowed:
        raise ValueError(f"unsupported dtype {dtype!r} for {metric}; choose from {list(allowed)}")
    if spec.takes_contexts and context_column is None:
        raise ValueError(f"{metric} scores a continuation given its context: name the context column")
    if not spec.takes_contexts and context_column is not None:
        raise ValueError(f"{metric} scores the story alone: a context column is for continuation_quality and story_quality")
    config = spec.default if config is None else config
    folder = checkpoints.resolve_checkpoint(metric, config)
    if config not in spec.configs and Path(config).expanduser().is_dir():
        config = str(Path(config).expanduser().resolve())  # a worker process may start in another folder than this one
    return config, folder


def load_any_scorer(metric: str, config: str, device=None):
    """A scorer for any metric, the suite included, loaded once per process (as :func:`storyeval.load_from_checkpoint`)."""
    if metric == SUITE_METRIC:
        from storyeval.analysis.suite import StoryQuality

        return StoryQuality(config, device=device)
    from storyeval.checkpoints import resolution as checkpoints
    from storyeval.scoring.sequence import load_scorer

    return load_scorer(metric, checkpoints.resolve_checkpoint(metric, config), device=device)


def output_columns(metric: str, config: str, score_field: str, with_contexts: bool) -> list[str]:
    """The columns a job adds, in order: the scores, then ``<score_field>_problem`` and ``<score_field>_settings``."""
    if metric == SUITE_METRIC:
        from storyeval.analysis.suite import output_keys

        keys = output_keys(config, with_contexts)
    elif metric == "continuation_quality":
        from storyeval.models.continuation.model import CRITERIA

        keys = list(CRITERIA)
    else:
        keys = [""]
    return [_named(score_field, key) for key in keys] + [f"{score_field}_problem", f"{score_field}_settings"]


def _named(score_field: str, key: str) -> str:
    return f"{score_field}_{key}" if key else score_field


def check_columns(names: list[str], types: list, column: str, context_column: str | None, added: list[str],
                  where: str = "the dataset") -> None:
    """The text columns are there and hold text, and no column the job adds is there already."""
    import pyarrow as pa

    by_name = dict(zip(names, types))
    for name in filter(None, (column, context_column)):
        if name not in by_name:
            raise KeyError(f"{where} has no column {name!r}; its columns: {names}")
        kind = by_name[name]
        if isinstance(kind, pa.DataType) and not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                                                  or pa.types.is_string_view(kind) or pa.types.is_null(kind)):
            raise TypeError(f"{where}: column {name!r} holds {kind}, not text")
    if clashes := [name for name in added if name in by_name]:
        raise ValueError(f"{where} already has column(s) {clashes}; choose another score_field for the scores")


class StoryScorer:
    """The callable class ``map_batches`` constructs once per actor: it loads the scorer, and each call adds the
    score columns to a batch (a ``pyarrow.Table``; the other columns pass through untouched)."""

    def __init__(self, metric: str, config: str, column: str, context_column: str | None = None, score_field: str = "score",
                 batch_size: int | None = None, dtype: str | None = None, device=None, num_threads: int | None = None,
                 combination: str | None = None):
        from storyeval.scoring.devices import set_num_threads

        set_num_threads(num_threads)
        self.scorer = load_any_scorer(metric, config, device)
        self.column, self.context_column, self.score_field = column, context_column, score_field
        self.batch_size, self.dtype, self.combination = batch_size, dtype, combination
        with_contexts = context_column is not None
        self.keys = column_keys(self.scorer, with_contexts)
        self.settings = settings_of(self.scorer, dtype, with_contexts, combination)

    def __call__(self, batch):
        texts = batch.column(self.column).to_pylist()
        contexts = batch.column(self.context_column).to_pylist() if self.context_column else None
        columns, problems = score_rows(self.scorer, texts, contexts, batch_size=self.batch_size, dtype=self.dtype,
                                       combination=self.combination, names=(f"column {self.column!r}", f"column {self.context_column!r}"))
        return self.with_scores(batch, columns, problems)

    def with_scores(self, batch, columns: dict[str, list[float]], problems: list[str | None]):
        """``batch`` with the score columns added: ``columns`` as :func:`score_rows` gives them, and ``problems``."""
        import pyarrow as pa

        for key in self.keys:
            batch = batch.append_column(_named(self.score_field, key), pa.array(columns[key], pa.float64()))
        batch = batch.append_column(f"{self.score_field}_problem", pa.array(problems, pa.string()))
        return batch.append_column(f"{self.score_field}_settings", pa.array([self.settings] * len(problems), pa.string()))


def score_dataset(dataset, metric: str = "union", config: str | None = None, column: str = "story", *,
                  context_column: str | None = None, score_field: str = "score", actors: int = 1, num_cpus: float = 1,
                  num_gpus: float = 0, batch_size: int | None = None, ray_batch_size: int | None = 256, dtype: str | None = None,
                  device=None, num_threads: int | None = None, combination: str | None = None,
                  scorer_class: type[StoryScorer] = StoryScorer):
    """``dataset`` (a ``ray.data.Dataset``) with the score columns of ``metric``/``config`` added (see the module
    docstring), scored by ``actors`` actors of ``num_cpus`` CPUs and ``num_gpus`` GPUs each.

    ``batch_size``: windows (continuation quality: pairs) per forward pass, as everywhere in storyeval (None: the
    metric's default); ``ray_batch_size``: rows handed to an actor per call (``map_batches``' ``batch_size``: Ray
    gathers consecutive blocks until it has as many, so a call may hold rows of several blocks, and its rows come back
    together when it ends), or None to hand each block whole, one per call, for a dataset whose blocks you sized
    (Ray asks for a number where the actors take GPUs).
    ``dtype``: ``"float32"`` (default), ``"bfloat16"``, ``"float16"``, or ``"int8"`` (union and plot_coherence, CPU
    only). ``device``: each actor's (None: CUDA when Ray gave it a GPU, else the CPU). ``num_threads``: torch's CPU
    threads per actor (None: ``num_cpus``, at least 1). ``scorer_class``: a subclass of :class:`StoryScorer` to run
    instead, to add columns of your own (each actor's memory, say). Returns a lazy dataset, as ``map_batches`` does.

    Ray Data's read tasks ask for a CPU each by default: where the actors take every CPU of the cluster, read with
    ``num_cpus=0`` (``ray.data.read_json(..., num_cpus=0)``), or the reads wait for a CPU that never frees. Ray 2.60's
    Parquet reader also lists its files in a task that asks for a CPU whatever ``num_cpus`` says: set
    ``ray.data.DataContext.get_current().use_datasource_v2 = False`` before ``read_parquet`` (its other reader
    honours ``num_cpus=0``), or leave a CPU free."""
    try:
        import ray.data
    except ImportError:
        raise ImportError(f"scoring a Ray dataset needs Ray Data: {RAY_INSTALL}") from None
    config, _ = check_job(metric, config, dtype, context_column, combination)
    if batch_size is not None:
        check_batch_size(batch_size)
    for name, value in (("actors", actors), *([] if ray_batch_size is None else [("ray_batch_size", ray_batch_size)])):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not num_cpus > 0 or num_gpus < 0:
        raise ValueError(f"num_cpus must be positive and num_gpus not negative, got {num_cpus} and {num_gpus}")
    if ray_batch_size is None and num_gpus:
        raise ValueError("ray_batch_size=None hands each block whole, which Ray refuses for actors with GPUs: "
                         "give the rows per call")
    if not score_field or not score_field.strip():
        raise ValueError("score_field must be a non-blank name")
    schema = dataset.schema()
    if schema is None:
        raise ValueError("the dataset has no schema (is it empty?)")
    added = output_columns(metric, config, score_field, context_column is not None)
    check_columns(list(schema.names), list(schema.types), column, context_column, added)
    if not (isinstance(scorer_class, type) and issubclass(scorer_class, StoryScorer)):
        raise TypeError(f"scorer_class must be StoryScorer or a subclass of it, got {scorer_class!r}")
    threads = num_threads if num_threads is not None else max(1, math.floor(num_cpus))
    if ray.is_initialized() and actors * num_cpus >= ray.cluster_resources().get("CPU", math.inf):
        if lists_files_in_a_task(dataset):
            logger.warning("the %d actor(s) take every CPU of the cluster, and Ray's Parquet reader lists its files in a "
                           "task that asks for one whatever num_cpus says: it waits for ever. Set "
                           "ray.data.DataContext.get_current().use_datasource_v2 = False before read_parquet (and read "
                           "with num_cpus=0), or give the actors fewer", actors)
        elif dataset.input_files():  # read from files by tasks that may each ask for a CPU
            logger.warning("the %d actor(s) take every CPU of the cluster: a task that reads the input and asks for a CPU "
                           "(Ray's readers do by default) waits for ever; read with num_cpus=0 "
                           "(ray.data.read_json(..., num_cpus=0)) or give the actors fewer", actors)
    scored = mapped_scores(dataset, metric, config, column, context_column=context_column, score_field=score_field,
                           actors=actors, num_cpus=num_cpus, num_gpus=num_gpus, batch_size=batch_size,
                           ray_batch_size=ray_batch_size, dtype=dtype, device=device, num_threads=threads,
                           combination=combination, scorer_class=scorer_class)
    show_one_progress_bar(scored)
    return scored


def mapped_scores(dataset, metric: str, config: str, column: str, *, context_column: str | None, score_field: str,
                  actors: int, num_cpus: float, num_gpus: float, batch_size: int | None, ray_batch_size: int | None,
                  dtype: str | None, device, num_threads: int, combination: str | None, scorer_class: type[StoryScorer]):
    """:func:`score_dataset`'s last step, unchecked: Ray Data's ``map_batches`` over an actor pool. For a caller that has
    checked every argument as :func:`score_dataset` does (``storyeval score-shards`` checks them, every shard's columns
    included, before Ray starts), so that nothing is checked twice and no schema is read again."""
    import ray.data

    return dataset.map_batches(
        scorer_class,
        fn_constructor_kwargs={"metric": metric, "config": config, "column": column, "context_column": context_column,
                               "score_field": score_field, "batch_size": batch_size, "dtype": dtype, "device": device,
                               "num_threads": num_threads, "combination": combination},
        batch_size=ray_batch_size, batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=actors),
        # an actor that dies is restarted and the batch it held is run again: Ray Data gives an actor pool
        # max_restarts=-1 and max_task_retries=-1 (ray/data/_internal/execution/operators/actor_pool_map_operator.py)
        num_cpus=num_cpus, num_gpus=num_gpus or None, udf_modifying_row_count=False,
    )


def show_one_progress_bar(dataset) -> None:
    """Ray Data draws a bar per operator besides the total (reading, scoring), and where standard output is no terminal
    (a log, a notebook) logs each one's state every 10 s: here, the total alone. The setting is the dataset's context,
    which it shares with the dataset it was made from (each read makes its own), so other datasets keep theirs."""
    from ray.util.debug import log_once

    dataset.context.enable_operator_progress_bars = False
    # Ray logs a WARNING, once, that operator bars are off, on the first run with them off: they are off on purpose
    # here. Its log_once key is Ray's own (ray/data/_internal/progress/__init__.py); were it renamed, the line shows
    log_once("ray_data_progress_manager_global")


def lists_files_in_a_task(dataset) -> bool:
    """Whether ``dataset`` reads through Ray's DataSourceV2 path (Parquet, from Ray 2.60), which lists its files in a
    task of its own that asks for a CPU. Ray has no public view of a dataset's plan: this walks the logical one, and a
    Ray that has changed it answers False (the other warning still covers reads from files)."""
    try:
        operators, names = [dataset._logical_plan.dag], set()
        while operators:
            operator = operators.pop()
            names.add(operator.name)
            operators.extend(operator.input_dependencies)
    except AttributeError:
        return False
    return "ListFiles" in names
