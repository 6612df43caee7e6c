"""Shared pieces of the benchmarks: data paths, human judgments, correlations, machine info."""
from __future__ import annotations

import argparse
import csv
import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats
from storyeval_training.provenance import environment

CHECKOUT = Path(__file__).resolve().parent.parent
RESULTS = CHECKOUT / "benchmarks" / "results"


def data_dir() -> Path:
    root = Path(os.environ.get("STORYEVAL_DATA", CHECKOUT.parent / "shared" / "data"))
    if not (root / "human").is_dir():
        raise SystemExit(f"shared data not found at {root}; set STORYEVAL_DATA")
    return root


def read_union_human(set_name: str) -> tuple[list[str], np.ndarray]:
    """UNION's human-judged stories and their scores (the mean of 7 binary votes)."""
    path = data_dir() / "human" / f"union_{set_name}" / "ant_data.txt"
    stories, scores = [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = [f.strip() for f in line.split("|||")]
        if len(fields) != 3:
            raise ValueError(f"{path}:{lineno}: expected 'id ||| story ||| votes'")
        votes = [int(v) for v in fields[2].split()]
        stories.append(fields[1])
        scores.append(sum(votes) / len(votes))
    return stories, np.array(scores)


AMT_RATED_TEXTS = 5  # Input.text1..5 / Answer.text1..5 per AMT row


def normalise(text: str) -> str:
    return " ".join(text.split())


def read_amt_ratings() -> dict[str, list[float]]:
    """The plot paper's AMT set: normalised story text -> its 0-5 plausibility ratings."""
    path = data_dir() / "human" / "plot_amt_roc" / "amt_roc.csv"
    ratings: dict[str, list[float]] = defaultdict(list)
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            for i in range(1, AMT_RATED_TEXTS + 1):
                text, rating = row[f"Input.text{i}"], row[f"Answer.text{i}"]
                if text.strip():
                    ratings[normalise(text)].append(float(rating))
    return dict(ratings)


def checkpoint_spec(value: str) -> tuple[str, str]:
    """argparse type of ``--checkpoint label=folder_or_config``."""
    label, sep, config = value.partition("=")
    if not (sep and label and config):
        raise argparse.ArgumentTypeError(f"expects label=folder_or_config, got {value!r}")
    return label, config


def metric_checkpoint_spec(value: str) -> tuple[str, str, str]:
    """argparse type of ``--checkpoint metric:label=folder_or_config``."""
    metric, sep, rest = value.partition(":")
    if not (sep and metric):
        raise argparse.ArgumentTypeError(f"expects metric:label=folder_or_config, got {value!r}")
    return (metric, *checkpoint_spec(rest))


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


def machine() -> dict:
    # results are outputs of the benchmark, not inputs
    return environment(exclude=("benchmarks/results",))


def write_results(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
