"""Reference distributions for the percentile scale: each checkpoint's scores of human-written test stories.

    python -m benchmarks.checkpoints.reference_scores --checkpoint union-roc=hub_cards/union-roc \
        --checkpoint union-wp=hub_cards/union-wp --checkpoint plot-coherence-roc=hub_cards/plot-coherence-roc \
        --checkpoint continuation-quality=hub_cards/continuation-quality

The stories are the held-out test split of the ``storyeval_training`` builders
(``load_split(ROCStories, "test")``, ``load_split(WritingPrompts, "test")``):
never trained on, never used to choose a checkpoint, and not human-judged. A
story metric (UNION, plot coherence) scores each whole story, its first
sentence (ROC) or prompt (WP) first, as the training stories were built. For
continuation quality the reference is each test story's true continuation given
its opening: the context is the first sentence (ROC) or the prompt (WP) and the
continuation the rest of the story, the shape of its training pairs. Each
checkpoint is scored on the corpus it was trained on (``args.dataset`` of its
``training_results.json``), continuation quality on both. Test stories the
checkpoint trained on all the same are left out and counted: plot-coherence-roc
trained on the paper's released AF_ManPlts groups, whose human stories include
some of the builders' ROC test stories (matched by their leakage key).

Each folder gets ``reference_scores.json`` (sorted scores with provenance, see
``storyeval.analysis.percentiles``); a summary with quantiles goes to
``benchmarks/results/reference_scores.json``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.common import add_checkpoint_options, checked_checkpoints, command_line, machine, results_name, write_results
from storyeval.analysis.percentiles import REFERENCE_FILE

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def test_stories(corpus: str) -> list[list[str]]:
    """The test split's stories as sentence lists, the context (first sentence or prompt) first."""
    from storyeval_training.data.build_negatives import story_units
    from storyeval_training.data.builders import BUILDERS, load_split

    split = load_split(BUILDERS[corpus], "test")
    return [[" ".join(tokens) for tokens in story_units(example)] for example in split]


def corpora_of(folder: Path, metric: str) -> list[str]:
    from storyeval.analysis.percentiles import CORPORA

    if metric == "continuation_quality":
        return list(CORPORA)  # trained on rated pairs of both corpora
    dataset = json.loads((folder / "training_results.json").read_text())["args"].get("dataset")
    if dataset not in CORPORA:
        raise SystemExit(f"{folder}: training_results.json names no corpus I know ({dataset!r}); choose with --corpus")
    return [dataset]


def seen_in_training(folder: Path, metric: str) -> frozenset[str]:
    """Leakage keys of human stories a checkpoint trained on outside the builders' train split: plot coherence
    trained on the paper's released AF_ManPlts groups, whose human ROC stories the builders split their own way."""
    if metric != "plot_coherence":
        return frozenset()
    args = json.loads((folder / "training_results.json").read_text())["args"]
    if args.get("negatives") != "paper":
        return frozenset()
    from storyeval import text as textlib
    from storyeval_training.data.builders.roc import read_af_tsv
    from storyeval_training.data.plot_pairs import PAPER_AF_FILES
    from storyeval_training.paths import data_dir

    return frozenset(textlib.leakage_key(human) for name in PAPER_AF_FILES for human, _ in read_af_tsv(data_dir() / "roc" / name))


def score_corpus(scorer, metric: str, stories: list[list[str]], batch_size: int) -> tuple[dict[str, list[float]], dict]:
    if metric == "continuation_quality":
        pairs = [(story[0], " ".join(story[1:])) for story in stories if len(story) > 1]
        scores = scorer.score([c for c, _ in pairs], [r for _, r in pairs], batch_size=max(batch_size, 256))
        what = "each test story's continuation (all sentences after the first sentence or prompt) given that opening"
        return scores, {"items": len(pairs), "scored": what}
    scores = scorer.score([" ".join(story) for story in stories], batch_size=batch_size, progress_bar=True)
    return {"score": scores}, {"items": len(stories), "scored": "each whole test story, first sentence or prompt included"}


def _stored_corpora(folder: Path) -> list[str]:
    path = folder / REFERENCE_FILE
    return list(json.loads(path.read_text(encoding="utf-8"))["references"]) if path.is_file() else []


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", nargs="+", choices=["roc", "wp"], help="score on these corpora instead of the checkpoint's own")
    add_checkpoint_options(parser, batch_size=32)
    parser.add_argument("--output", type=results_name, default="reference_scores",
                        help="name of the summary results file (another name keeps the earlier checkpoints' summary)")
    args = parser.parse_args(argv)
    checkpoints = checked_checkpoints(parser, args, folders=False)  # each folder is checked below, with its metric

    import storyeval
    from storyeval import text as textlib
    from storyeval.analysis.percentiles import build_reference, write_reference
    from storyeval.checkpoints.resolution import recorded_metric
    from storyeval.scoring.sequence import load_scorer
    from storyeval_training.data.builders import BUILDERS

    plans = []
    for label, folder in checkpoints.items():  # every folder is checked before any scoring
        folder = Path(folder)
        metric = recorded_metric(folder)
        if metric is None:
            parser.error(f"--checkpoint {label}={folder}: not a storyeval checkpoint folder")
        corpora = args.corpus or corpora_of(folder, metric)
        # the file is rewritten whole, with one provenance: a run must rebuild every corpus it holds
        kept = sorted(set(_stored_corpora(folder)) - set(corpora))
        if kept:
            parser.error(f"--checkpoint {label}={folder}: its {REFERENCE_FILE} also holds {kept}, which this run would drop; "
                         "score those corpora too (leave out --corpus to score every corpus of the checkpoint)")
        plans.append((label, folder, metric, corpora))
    command = command_line(__name__, argv)
    environment = machine()
    provenance = {"command": command, "commit": environment["commit"], "uncommitted_changes": environment["uncommitted_changes"],
                  "storyeval_version": storyeval.__version__, "created": time.strftime("%Y-%m-%d", time.gmtime())}
    stories = {corpus: test_stories(corpus) for corpus in sorted({c for *_, corpora in plans for c in corpora})}
    summary = {"machine": environment, "command": command, "checkpoints": {}}
    for label, folder, metric, corpora in plans:
        scorer = load_scorer(metric, folder)
        references = {}
        entry = summary["checkpoints"][label] = {"metric": metric, "path": str(folder), "corpora": {}}
        for corpus in corpora:
            started = time.perf_counter()
            seen = seen_in_training(folder, metric)
            held_out = [story for story in stories[corpus] if textlib.leakage_key(" ".join(story)) not in seen]
            scores, description = score_corpus(scorer, metric, held_out, args.batch_size)
            description = {"builder": BUILDERS[corpus].__name__, "split": "test", **description}
            if seen:
                description["left_out_seen_in_training"] = len(stories[corpus]) - len(held_out)
            references[corpus] = build_reference(metric, corpus, scores, description)
            entry["corpora"][corpus] = {
                **description, "seconds": round(time.perf_counter() - started, 2),
                "quantiles": {name: dict(zip(map(str, QUANTILES), np.quantile(values, QUANTILES).round(4).tolist())) for name, values in scores.items()},
            }
            print(f"{label} on {corpus}: {description['items']} items, " + ", ".join(
                f"{name} median {np.median(values):.4f}" for name, values in scores.items()))
        print("wrote", write_reference(folder, metric, references, provenance))
    print("wrote", write_results(args.output, summary))


if __name__ == "__main__":
    main()
