"""``storyeval compare``: the command over :mod:`storyeval.analysis.compare` (its docstring is the command's help)."""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from storyeval.analysis import compare
from storyeval.analysis.compare import ComparisonInputError, FewItemsWarning, SuiteCombined, compare_files, plot_comparison
from storyeval.analysis.suite import check_dtype as check_suite_dtype
from storyeval.cli.jobs import CompareJob, default_config


def add_parser(commands, formatter_class=argparse.HelpFormatter) -> argparse.ArgumentParser:
    """Add ``storyeval compare`` to the CLI's subcommands; its handler is :func:`run`, given the command's job
    (:func:`storyeval.cli.jobs.compare_job`)."""
    from storyeval.inputs import DTYPE_NAMES, positive_int

    parser = commands.add_parser("compare", help="compare systems' outputs on one metric, with confidence intervals and paired tests",
                                 description=compare.__doc__.split("\n\n", 2)[2].split("\n\nIn Python")[0].replace("``", ""),
                                 formatter_class=formatter_class)
    parser.add_argument("inputs", nargs="+", help="one .jsonl or .txt file per system, for the same prompts")
    parser.add_argument("--metric", default="union", choices=compare.COMPARE_METRICS,
                        help="scores the files' stories when they carry no scores; story_quality: the suite's combined percentile")
    parser.add_argument("--config", default=None,
                        help=f"checkpoint (story_quality: suite config): a config name, a folder or a Hub repo id {config_defaults()}")
    parser.add_argument("--field", default="story", help="the story field (.jsonl)")
    parser.add_argument("--score-field", default="score", help="a field holding scores already computed (.jsonl)")
    parser.add_argument("--id-field", default="id", help="matches items across files (.jsonl); without it, by line")
    parser.add_argument("--resamples", type=positive_int, default=compare.DEFAULT_RESAMPLES,
                        help="bootstrap and permutation resamples; the smallest p-value is 1 / (resamples + 1)")
    parser.add_argument("--seed", type=int, default=compare.DEFAULT_SEED, help="seeds every resampling, so a comparison repeats exactly")
    parser.add_argument("--confidence", type=float, default=compare.DEFAULT_CONFIDENCE, help="confidence level of the intervals")
    parser.add_argument("--json", dest="json_path", help="also write the comparison as JSON to this file ('-': stdout, instead of the table)")
    parser.add_argument("--plot", help="write a box plot of the score distributions (.png, .pdf, .svg; needs matplotlib)")
    parser.add_argument("--batch-size", type=positive_int, default=16, help="windows per forward pass when scoring")
    parser.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1 (default: CUDA if available)")
    parser.add_argument("--dtype", default=None, choices=DTYPE_NAMES,
                        help="weights' precision when scoring (default: float32); compare only scores of one dtype")
    parser.add_argument("--num-threads", type=positive_int, default=None, help="CPU threads for scoring (default: torch's)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json or --plot file")
    return parser


def config_defaults() -> str:
    """The --config default, as the registry has it: one config where every metric compared defaults to it alike."""
    defaults = {metric: default_config(metric) for metric in compare.COMPARE_METRICS}
    if len(set(defaults.values())) == 1:
        return f"(default: {next(iter(defaults.values()))})"
    return "(default: the metric's: " + ", ".join(f"{metric} {config}" for metric, config in defaults.items()) + ")"


def _check_output(path: str | None, inputs: Sequence[str], flag: str, overwrite: bool = False) -> None:
    if path in (None, "-"):
        return
    if Path(path).is_dir():
        raise ComparisonInputError(f"{flag} {path} is a directory; give a file path")
    if not Path(path).resolve().parent.is_dir():
        raise ComparisonInputError(f"{flag} {path}: its folder does not exist")
    if any(Path(path).resolve() == Path(p).resolve() for p in inputs):
        raise ComparisonInputError(f"{flag} {path} is one of the inputs; give another path")
    if Path(path).is_file() and not overwrite:
        raise ComparisonInputError(f"{flag} {path} exists; pass --overwrite to replace it")


def load_scorer(job: CompareJob):
    """The job's story scorer (the suite's ``combined`` for story_quality), loaded when the files need scoring."""
    from storyeval.scoring.devices import set_num_threads

    scoring = job.scoring
    set_num_threads(scoring.num_threads)
    if scoring.is_suite:
        return SuiteCombined(scoring.config, device=scoring.device)
    from storyeval.scoring import sequence

    return sequence.load_scorer(scoring.metric, scoring.checkpoint, device=scoring.device)


def run(job: CompareJob) -> int:
    """``storyeval compare``: returns the exit status."""
    scoring = job.scoring
    try:
        _check_output(job.json_path, job.inputs, "--json", job.overwrite)
        _check_output(job.plot, job.inputs, "--plot", job.overwrite)
        if job.plot and Path(job.plot).suffix.lower() not in (".png", ".pdf", ".svg"):
            raise ComparisonInputError(f"--plot {job.plot}: use a .png, .pdf or .svg file name")
        if job.plot:
            import importlib.util

            if importlib.util.find_spec("matplotlib") is None:
                raise ComparisonInputError("--plot needs matplotlib: pip install 'storyeval[plot]'")
        if scoring.is_suite:
            try:
                check_suite_dtype(scoring.dtype)
            except ValueError:
                raise ComparisonInputError(f"--metric story_quality scores in float32, not {scoring.dtype}: "
                                           "pass --dtype float32 or leave it out") from None
        with warnings.catch_warnings():  # said once, as a warning line below, not as Python's warning with a source line
            warnings.simplefilter("ignore", FewItemsWarning)
            comparison, scores, from_files = compare_files(
                job.inputs, lambda: load_scorer(job), story_field=job.story_field, score_field=job.score_field,
                id_field=job.id_field, batch_size=scoring.batch_size, dtype=scoring.dtype, metric=scoring.metric,
                config=scoring.config, confidence_level=job.confidence, resamples=job.resamples, seed=job.seed,
            )
    # ImportError: an optional runtime (dtype int8) is missing; its message says what to install
    except (ComparisonInputError, LookupError, OSError, ValueError, TypeError, ImportError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"storyeval: error: {message}", file=sys.stderr)
        return 1
    for warning in comparison.warnings:
        print(f"storyeval: warning: {warning}", file=sys.stderr)
    if job.json_path == "-":
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        print(comparison.table())
        if job.json_path:
            Path(job.json_path).write_text(json.dumps(comparison.to_dict(), indent=2) + "\n", encoding="utf-8")
    if job.plot:
        label = job.score_field if from_files else f"{scoring.metric} ({scoring.config})"
        plot_comparison(comparison, scores, job.plot, metric=label)
    return 0
