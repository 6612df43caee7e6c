"""What an ending checkpoint's score of the check's intact stories follows: their length, the length of the sentences
it reads, or whether the text really ends where its story does (first_checks.md, E7).

    python -m benchmarks.agreement.ending_length --breaks-dir runs/modern-r2 --split validation \
        --checkpoint e1=FOLDER --output first_checks/e7_diagnostic

Per view of the modern-text check (:data:`benchmarks.agreement.modern_breaks.VIEWS`), over its intact stories, the
Spearman of the ending checkpoint's score of the last two sentences (as the ``--ending`` rows read them) with the
story's words (``story_words``), with the words of those two sentences (``ending_words``), and with whether the text
reaches its story's end (``reaches_end``: the check gave it a half); and how the two lengths go together. An ending
scorer that follows ``ending_words`` where ``reaches_end`` is rare has learned length, not endings. Not a figure of
the check: run it on ``validation`` (what a run selects on).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from scipy import stats

from benchmarks.common import add_checkpoint_options, checked_checkpoints, command_line, machine, results_name, write_results

from .ending_mix import TAIL_SENTENCES, load_ending_scorer
from .modern_breaks import VIEWS, read_stories


def spearman(a: list, b: list) -> float | None:
    """Spearman's rho, None where either side is constant (a view in which every text reaches its end, say)."""
    if len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return round(float(stats.spearmanr(a, b).statistic), 4)


def view_figures(rows: list[dict], ending_of: dict[str, str], scores: dict[str, float]) -> dict:
    """One view's figures; ``ending_of``: each story's last two sentences, ``scores``: their scores."""
    endings = [ending_of[r["text"]] for r in rows]
    story_words = [r["words"] for r in rows]
    ending_words = [len(e.split()) for e in endings]
    reaches_end = [int("half" in r["sides"]) for r in rows]
    score = [scores[e] for e in endings]
    return {"stories": len(rows), "share_reaching_end": round(sum(reaches_end) / len(rows), 4),
            "score_with": {"story_words": spearman(score, story_words), "ending_words": spearman(score, ending_words),
                           "reaches_end": spearman(score, reaches_end)},
            "ending_words_with_story_words": spearman(ending_words, story_words),
            "story_words_with_reaches_end": spearman(story_words, reaches_end)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--breaks-dir", required=True, type=Path, help="python -m storyeval_training.data.modern_breaks's output")
    parser.add_argument("--split", default="validation", choices=["validation", "test"])
    add_checkpoint_options(parser, batch_size=32, help="label=an ending checkpoint's folder, as --ending's second folder (repeatable)")
    parser.add_argument("--output", required=True, type=results_name, help="results file: NAME or EXPERIMENT/NAME")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args)
    try:
        rows = [r for r in read_stories(args.breaks_dir, args.split, list(VIEWS), None, 0, ("shuffle", "half"))
                if r["kind"] == "intact"]
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    from storyeval.text import last_sentences

    ending_of = {r["text"]: last_sentences(r["text"], TAIL_SENTENCES) for r in rows}
    endings = sorted(set(ending_of.values()))
    payload = {"machine": machine(), "command": command_line(__name__, argv), "split": args.split, "checkpoints": {}}
    for label, folder in checkpoints.items():
        try:
            scorer = load_ending_scorer(folder)
        except ValueError as error:
            parser.error(str(error))
        scores = dict(zip(endings, scorer.score(endings, batch_size=args.batch_size)))
        views = {view: view_figures([r for r in rows if r["view"] == view], ending_of, scores) for view in VIEWS
                 if any(r["view"] == view for r in rows)}
        payload["checkpoints"][label] = views
        for view, figures in views.items():
            print(f"{label} {view}: {figures}")
    print(f"wrote {write_results(args.output, payload)}")


if __name__ == "__main__":
    main()
