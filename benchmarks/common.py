"""Shared pieces of the benchmarks: checkpoint options, correlations, machine info, results files."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from storyeval_training.export.provenance import environment, portable

CHECKOUT = Path(__file__).resolve().parent.parent
RESULTS = CHECKOUT / "benchmarks" / "results"  # the files behind BENCHMARKS.md's summary, the cards and the docs
EXPERIMENTS = "experiments"  # under RESULTS: one folder of runs per log in EXPERIMENT_LOGS, named as the log
EXPERIMENT_LOGS = CHECKOUT / "benchmarks" / "experiments"
BUNDLED = CHECKOUT / "hub_cards"


def checkpoint_spec(value: str) -> tuple[str, str]:
    """argparse type of ``--checkpoint label=folder_or_config``."""
    label, sep, config = value.partition("=")
    if not (sep and label and config):
        raise argparse.ArgumentTypeError(f"expects label=folder_or_config, got {value!r}")
    return label, config


def weighted_spec(value: str) -> tuple[str, str, float | None]:
    """``label=body:weight`` split into its label, its body and its weight (None where the weight is not a number or a
    part is missing): what a benchmark's ``--OPTION LABEL=...:WEIGHT`` type checks further and words its error from."""
    label, sep, spec = value.partition("=")
    body, _, weight = spec.rpartition(":")
    try:
        number = float(weight)
    except ValueError:
        number = None
    return label, body, number if sep and label and body else None


def metric_checkpoint_spec(value: str) -> tuple[str, str, str]:
    """argparse type of ``--checkpoint metric:label=folder_or_config``."""
    metric, sep, rest = value.partition(":")
    if not (sep and metric):
        raise argparse.ArgumentTypeError(f"expects metric:label=folder_or_config, got {value!r}")
    return (metric, *checkpoint_spec(rest))


def require_checkpoint_folders(parser: argparse.ArgumentParser, checkpoints: dict[str, str], option: str = "--checkpoint") -> None:
    """A mistyped path fails here, before any scoring or results file."""
    for label, path in checkpoints.items():
        if not (Path(path) / "config.json").is_file():
            parser.error(f"{option} {label}={path}: no checkpoint there (config.json)")


def add_checkpoint_options(parser: argparse.ArgumentParser, batch_size: int, required: bool = True,
                           help: str = "label=folder (repeatable)") -> None:
    """The benchmarks' ``--checkpoint label=folder`` (repeatable) and ``--batch-size``; see :func:`checked_checkpoints`."""
    parser.add_argument("--checkpoint", action="append", default=[], required=required, type=checkpoint_spec, help=help)
    parser.add_argument("--batch-size", type=int, default=batch_size)


def checked_checkpoints(parser: argparse.ArgumentParser, args: argparse.Namespace, default: dict[str, str] | None = None,
                        folders: bool = True) -> dict[str, str]:
    """``--checkpoint`` as label -> folder (``default`` when none is given), refused before any scoring if a label
    repeats (one result would silently replace another), a folder holds no checkpoint (unless ``folders`` is False:
    config names are allowed), or ``--batch-size`` is not positive."""
    if args.batch_size < 1:
        parser.error("--batch-size must be positive")
    labels = [label for label, _ in args.checkpoint]
    if len(set(labels)) != len(labels):
        parser.error(f"each --checkpoint label must be unique, got {labels}")
    checkpoints = dict(args.checkpoint) or dict(default or {})
    if folders:
        require_checkpoint_folders(parser, checkpoints)
    return checkpoints


def correlations(metric_scores, human_scores) -> dict:
    """Pearson, Spearman and Kendall coefficients with their p-values (scipy.stats)."""
    metric_scores, human_scores = np.asarray(metric_scores, float), np.asarray(human_scores, float)
    if metric_scores.shape != human_scores.shape:
        raise ValueError(f"{metric_scores.shape} metric scores for {human_scores.shape} human scores")
    out = {"n": int(len(human_scores))}
    for name, test in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        result = test(metric_scores, human_scores)
        out[name], out[f"{name}_p"] = float(result.statistic), float(result.pvalue)
    return out


def command_line(module: str, argv: list[str] | None) -> str:
    """The command as a reader reruns it, recorded in every results file."""
    if module == "__main__":  # run as python -m benchmarks.<group>.<name>: the module's real name is on its spec
        module = getattr(sys.modules["__main__"].__spec__, "name", module)
    return portable(" ".join([f"python -m {module}", *(sys.argv[1:] if argv is None else argv)]))  # no path of this machine


def machine() -> dict:
    # results are outputs of the benchmark, not inputs
    return environment(exclude=("benchmarks/results",))


def experiment_logs() -> list[str]:
    """The experiments a results name may name: each log's file name in ``benchmarks/experiments/`` less ``.md``."""
    return sorted(path.stem for path in EXPERIMENT_LOGS.glob("*.md"))


def results_name(value: str) -> str:
    """argparse type of a results file's name: ``NAME`` (a file behind the summary, the cards or the docs) or
    ``EXPERIMENT/NAME`` (a run an experiment log reports), refused here, before anything is measured, if it is neither."""
    experiment, _, name = value.rpartition("/")
    if not name or name.endswith(".json") or name.startswith(".") or "\\" in value:
        raise argparse.ArgumentTypeError(f"{value!r}: give NAME or EXPERIMENT/NAME, without .json")
    if experiment and experiment not in experiment_logs():
        raise argparse.ArgumentTypeError(f"{value!r}: no experiment log benchmarks/experiments/{experiment}.md "
                                         f"(the logs: {', '.join(experiment_logs())})")
    return value


def results_path(name: str, folder: Path | None = None) -> Path:
    """Where results file ``name`` is, or goes: ``EXPERIMENT/NAME`` in ``<folder>/experiments/EXPERIMENT/``, a bare ``NAME``
    in ``<folder>`` (default: RESULTS, read at call time, so tests can point it elsewhere) unless only an experiment's
    folder holds it: a recorded command, or an ``--earlier`` name, finds its file where it was filed."""
    folder = RESULTS if folder is None else Path(folder)
    if "/" in name:
        experiment, _, stem = name.rpartition("/")
        return folder / EXPERIMENTS / experiment / f"{stem}.json"
    top = folder / f"{name}.json"
    filed = sorted((folder / EXPERIMENTS).glob(f"*/{name}.json"))
    if top.exists() or not filed:
        return top
    if len(filed) > 1:
        raise ValueError(f"results file {name}.json is in several experiments' folders ({', '.join(p.parent.name for p in filed)}): "
                         "name it as EXPERIMENT/NAME")
    return filed[0]


def write_results(name: str, payload: dict, folder: Path | None = None) -> Path:
    """Results file ``name`` (:func:`results_path`), with every absolute path in it made portable: results are published,
    and a checkpoint's or a run's folder names this machine."""
    path = results_path(name, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(portable(payload), indent=2) + "\n")
    return path
