"""The correlation harness every metric shares: the human-judged sets, the check against each
paper's own scores, scoring a set with a checkpoint, and refreshing a checkpoint's card.

These human sets are test sets: nothing here may be used to choose a checkpoint or a hyperparameter.
"""
from __future__ import annotations

import csv
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from storyeval_training.paths import data_dir

from .common import correlations

COEFFICIENTS = ("pearson", "spearman", "kendall")
AMT_RATED_TEXTS = 5  # Input.text1..5 / Answer.text1..5 per AMT row


@dataclass(frozen=True)
class PaperRow:
    """A paper's published row on a human set, and the file of its released scores that reproduces it."""

    scores_file: str  # under the set's folder
    published: dict[str, float]  # coefficient -> value as printed
    decimals: int  # as printed; the harness must match to this precision
    scorer: str  # what produced the released scores, for tables


@dataclass(frozen=True)
class HumanSet:
    name: str
    stories: list[str]
    human: np.ndarray  # one human score per story
    paper: PaperRow


# Table 5 of Guan & Huang (2020), UNION row; Table 5 of Ghazarian et al. (2021), ROC, RoBERTa trained on manipulated plots
PAPER_ROWS = {
    "union_roc": PaperRow("paper_metric_outputs/union.txt", {"pearson": 0.3687, "spearman": 0.4599, "kendall": 0.3386}, 4, "UNION, BERT-base"),
    "union_wp": PaperRow("paper_metric_outputs/union.txt", {"pearson": 0.3663, "spearman": 0.4493, "kendall": 0.3293}, 4, "UNION, BERT-base"),
    "plot_amt_roc": PaperRow("paper_pred_roberta_af_manplts.txt", {"spearman": 0.558, "kendall": 0.410}, 3, "RoBERTa-base on AF_ManPlts"),
}
HUMAN_SETS = tuple(PAPER_ROWS)


def human_dir(set_name: str) -> Path:
    folder = data_dir() / "human" / set_name
    if not folder.is_dir():
        raise SystemExit(f"human-judged set {set_name!r} not found at {folder}; set STORYEVAL_DATA to the data root")
    return folder


def normalise(text: str) -> str:
    return " ".join(text.split())


def read_union_human(set_name: str) -> tuple[list[str], np.ndarray]:
    """UNION's human-judged stories (``roc`` or ``wp``) and their scores (the mean of 7 binary votes)."""
    path = human_dir(f"union_{set_name}") / "ant_data.txt"
    stories, scores = [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = [f.strip() for f in line.split("|||")]
        if len(fields) != 3:
            raise ValueError(f"{path}:{lineno}: expected 'id ||| story ||| votes'")
        votes = [int(v) for v in fields[2].split()]
        stories.append(fields[1])
        scores.append(sum(votes) / len(votes))
    return stories, np.array(scores)


def read_amt_ratings() -> dict[str, list[float]]:
    """The plot paper's AMT set: normalised story text -> its 0-5 plausibility ratings."""
    path = human_dir("plot_amt_roc") / "amt_roc.csv"
    ratings: dict[str, list[float]] = defaultdict(list)
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            for i in range(1, AMT_RATED_TEXTS + 1):
                text, rating = row[f"Input.text{i}"], row[f"Answer.text{i}"]
                if text.strip():
                    ratings[normalise(text)].append(float(rating))
    return dict(ratings)


def read_amt_paper_scores() -> tuple[list[str], np.ndarray]:
    """The plot paper's released RoBERTa scores: (normalised texts, scores), in file order."""
    path = human_dir("plot_amt_roc") / PAPER_ROWS["plot_amt_roc"].scores_file
    texts, scores = [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise ValueError(f"{path}:{lineno}: expected 'text<TAB>score'")
        texts.append(normalise(fields[0]))
        scores.append(float(fields[1]))
    return texts, np.array(scores)


def amt_human_scores(texts: list[str], ratings: dict[str, list[float]]) -> np.ndarray:
    missing = [t for t in texts if t not in ratings]
    if missing:
        raise SystemExit(f"{len(missing)} scored texts have no AMT rating, e.g. {missing[0][:80]!r}")
    return np.array([np.mean(ratings[t]) for t in texts])


def paper_scores(set_name: str) -> np.ndarray:
    """The scores the paper released for the set's stories, in the set's order."""
    if set_name == "plot_amt_roc":
        return read_amt_paper_scores()[1]
    path = human_dir(set_name) / PAPER_ROWS[set_name].scores_file
    return np.array([float(x) for x in path.read_text().split()])


def load_human_set(set_name: str) -> HumanSet:
    """``union_roc`` (400 stories), ``union_wp`` (200) or ``plot_amt_roc`` (300, in the order of the paper's scores file)."""
    if set_name not in PAPER_ROWS:
        raise KeyError(f"unknown human set {set_name!r}; choose from {', '.join(HUMAN_SETS)}")
    if set_name == "plot_amt_roc":
        texts, _ = read_amt_paper_scores()
        return HumanSet(set_name, texts, amt_human_scores(texts, read_amt_ratings()), PAPER_ROWS[set_name])
    stories, human = read_union_human(set_name.removeprefix("union_"))
    return HumanSet(set_name, stories, human, PAPER_ROWS[set_name])


def reproduce_paper(human_set: HumanSet) -> dict:
    """Correlate the paper's released scores with the human scores; stop unless that gives the published row,
    since a harness that cannot reproduce the paper cannot be trusted with our checkpoints."""
    result = correlations(paper_scores(human_set.name), human_set.human)
    expected = human_set.paper.published
    got = {name: result[name] for name in expected}
    tolerance = 0.5 * 10 ** -human_set.paper.decimals + 1e-12  # what rounding to the printed digits allows
    if any(abs(got[name] - value) > tolerance for name, value in expected.items()):
        raise SystemExit(f"harness check failed on {human_set.name}: got {got}, the paper reports {expected}")
    return result


def score_set(scorer, human_set: HumanSet, batch_size: int, keep_scores: bool = False):
    """The checkpoint's correlations on the set, and how long scoring took (with ``keep_scores``: and the scores)."""
    started = time.perf_counter()
    scores = scorer.score(human_set.stories, batch_size=batch_size)
    result = correlations(scores, human_set.human)
    result["seconds"] = round(time.perf_counter() - started, 2)
    return (result, scores) if keep_scores else result


def format_row(result: dict, order=COEFFICIENTS, decimals: int = 4, p_values: bool = True) -> str:
    return " / ".join(f"{name} {result[name]:.{decimals}f}" + (f" (p={result[name + '_p']:.1e})" if p_values else "") for name in order)


def update_card(folder, metric: str, correlations_by_set: dict, command: str) -> None:
    """``--update-card``: record the figures beside the checkpoint and re-render its model card."""
    from storyeval_training.export.model_card import update_evaluation

    update_evaluation(Path(folder), metric, command, correlations_by_set)
