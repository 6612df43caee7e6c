"""Correlation of plot-coherence scores with the plot paper's AMT plausibility ratings (ROC).

    python benchmarks/plot_coherence_correlation.py                            # the paper's row only
    python benchmarks/plot_coherence_correlation.py --checkpoint ours=outputs/plot-coherence-roc/best

300 ROC stories (150 human-written, 150 from GPT-2), each rated 0-5 by five
workers; the human score of a story is its mean rating. First the paper's
Table 5 RoBERTa row is recomputed from the paper's own scores
(``paper_pred_roberta_af_manplts.txt``, joined to the ratings on the
whitespace-normalised text), which checks this harness; then each checkpoint
scores the same stories. Results go to
``benchmarks/results/plot_coherence_correlation.json``. This is a test set:
nothing here may be used to choose a checkpoint or a hyperparameter.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import checkpoint_spec, correlations, data_dir, machine, normalise, read_amt_ratings, write_results  # noqa: E402

# Table 5 of Ghazarian et al. (2021), ROC, RoBERTa trained on manipulated plots: (Spearman, Kendall), as printed
PAPER_TABLE5 = {"spearman": 0.558, "kendall": 0.410}


def read_paper_scores() -> tuple[list[str], np.ndarray]:
    """The paper's RoBERTa scores: (normalised texts, scores), in file order."""
    path = data_dir() / "human" / "plot_amt_roc" / "paper_pred_roberta_af_manplts.txt"
    texts, scores = [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise ValueError(f"{path}:{lineno}: expected 'text<TAB>score'")
        texts.append(normalise(fields[0]))
        scores.append(float(fields[1]))
    return texts, np.array(scores)


def human_scores(texts: list[str], ratings: dict[str, list[float]]) -> np.ndarray:
    missing = [t for t in texts if t not in ratings]
    if missing:
        raise SystemExit(f"{len(missing)} scored texts have no AMT rating, e.g. {missing[0][:80]!r}")
    return np.array([np.mean(ratings[t]) for t in texts])


def reproduce_paper(texts: list[str], human: np.ndarray, paper_scores: np.ndarray) -> dict:
    result = correlations(paper_scores, human)
    got = {name: round(result[name], 3) for name in PAPER_TABLE5}
    if got != PAPER_TABLE5:
        raise SystemExit(f"harness check failed: got {got}, the paper reports {PAPER_TABLE5}")
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", default=[], type=checkpoint_spec, help="label=folder or config name (repeatable)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", default="plot_coherence_correlation", help="name of the results file")
    parser.add_argument("--update-card", action="store_true", help="write evaluation.json + model card into each checkpoint folder")
    args = parser.parse_args(argv)
    checkpoints = dict(args.checkpoint)

    ratings = read_amt_ratings()
    texts, paper_scores = read_paper_scores()
    human = human_scores(texts, ratings)
    payload = {
        "machine": machine(),
        "command": " ".join(["python benchmarks/plot_coherence_correlation.py", *(argv if argv is not None else sys.argv[1:])]),
        "human": {"stories": len(texts), "ratings_per_story": sorted({len(ratings[t]) for t in texts})},
        "paper": reproduce_paper(texts, human, paper_scores),
        "checkpoints": {},
    }
    print("paper RoBERTa (manipulated plots, AF) on ROC: " + _row(payload["paper"]))

    if checkpoints:
        from storyeval.checkpoints import resolve_checkpoint
        from storyeval.scoring import load_plot_coherence_scorer

    for label, config in checkpoints.items():
        path = resolve_checkpoint("plot_coherence", config)
        scorer = load_plot_coherence_scorer(path)
        started = time.perf_counter()
        scores = scorer.score(texts, batch_size=args.batch_size)
        result = correlations(scores, human)
        result["seconds"] = round(time.perf_counter() - started, 2)
        payload["checkpoints"][label] = {"path": str(path), "roc": result}
        print(f"{label} on ROC: " + _row(result))
        if args.update_card:
            _update_card(Path(path), result, payload["command"])
    print("wrote", write_results(args.output, payload))


def _update_card(folder: Path, result: dict, command: str) -> None:
    from storyeval_training.model_card import write_plot_coherence_card

    (folder / "evaluation.json").write_text(json.dumps({"command": command, "correlations": result}, indent=2) + "\n")
    results_path = folder / "training_results.json"
    if results_path.is_file():
        write_plot_coherence_card(folder, json.loads(results_path.read_text()))


def _row(r: dict) -> str:
    return " / ".join(f"{name} {r[name]:.3f} (p={r[name + '_p']:.1e})" for name in ("spearman", "kendall", "pearson"))


if __name__ == "__main__":
    main()
