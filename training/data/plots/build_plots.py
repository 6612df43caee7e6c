"""Build plot-guided data: each story with its plot and a manipulated plot.

    storyeval-build-plots --dataset roc --output-dir outputs/roc-plots
    storyeval-build-plots --dataset wp --plot-source extracted --limit 500 --output-dir outputs/wp-plots

Stages 1-2 of Ghazarian et al. (2021): the plot comes from the release
(``--plot-source paper``, the builder's ``plot`` field) or is extracted from
the story (``--plot-source extracted``: yake storylines for ROC, verb-argument
plots for WP), and 2-4 manipulations turn it into an implausible plot
(``--techniques`` restricts the choice, for the leave-one-out ablation). The
rows (id, story, sentences, plot, manipulated_plot, techniques) are saved with
``Dataset.save_to_disk``; ``plots_stats.json`` beside them counts the
techniques applied and the stories the leakage rule dropped (those whose
first sentence opens a human-judged item; of the whole split, before
``--limit``). Rows are reproducible for the same arguments, ``--limit``
included: substitution draws from the selected stories' sentence plots, so
another ``--limit`` changes the manipulations of stories that get a substitution.

The WP release's plots often cover more of the story than the builder keeps (it
cuts stories at 200 words), so such a plot is cut where the kept text ends: its
sentence plots are matched in order against the kept text (content words, names
folded) and cut after the last one found, never before the story's own sentence
count. The release splits sentences differently from the builder (one ``</s>``
chunk may hold several sentences), so cutting by count alone dropped plot parts of
sentences the story keeps. ``plots_stats.json`` counts the release plots whose
sentence count differs from their story's.
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import datasets
from tqdm.auto import tqdm

from storyeval import text as textlib
from storyeval.checkpoints import resources
from storyeval_training import paths
from storyeval_training.data.builders import BUILDERS, prepare
from storyeval_training.data.plots.extraction import extract_plot
from storyeval_training.data.plots.manipulation import TECHNIQUES, PlotLexicon, check_techniques, manipulate_plot
from storyeval_training.data.technique_counts import technique_counts
from storyeval_training.export.provenance import environment

logger = logging.getLogger("storyeval_training.data.plots.build_plots")

PLOT_SOURCES = ("paper", "extracted")
DEFAULT_LIMIT = 5000

PLOT_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "story": datasets.Value("string"),
        "sentences": datasets.List(datasets.Value("string")),
        "plot": datasets.List(datasets.List(datasets.Value("string"))),
        "manipulated_plot": datasets.List(datasets.List(datasets.Value("string"))),
        "techniques": datasets.List(datasets.Value("string")),
    }
)


def story_plots(stories: datasets.Dataset, dataset: str, plot_source: str) -> tuple[list[list[list[str]]], int]:
    """One plot per story, cut where the story's kept text ends, and how many release plots had
    another sentence count than their story (0 for extracted plots, one per sentence)."""
    if plot_source not in PLOT_SOURCES:
        raise KeyError(f"unknown plot source {plot_source!r}; choose from {PLOT_SOURCES}")
    plots, mismatched = [], 0
    for example in tqdm(stories, desc=f"plots ({plot_source})", unit="story"):
        if plot_source == "paper":
            plot = example["plot"]
            mismatched += len(plot) != len(example["sentences"])
        else:
            plot = extract_plot(dataset, example["sentences"])
        plots.append([list(sentence) for sentence in cut_to_story(plot, example["sentences"])])
    return plots, mismatched


def _folded(word: str) -> str | None:
    """A plot or story word as the two are compared: lower-cased, names and placeholders as one
    symbol; None for a stopword or a token without letters."""
    if word.upper() in textlib.NAME_PLACEHOLDERS or textlib.name_gender(word, cased=word[:1].isupper()):
        return "<name>"
    word = word.lower()
    return word if word.isalpha() and word not in resources.stopwords() else None


def _index_from(story: list[str | None], word: str, start: int) -> int | None:
    """The first position of ``word`` in ``story`` at or after ``start``, or None (one scan, no copy)."""
    try:
        return story.index(word, start)
    except ValueError:
        return None


def cut_to_story(plot: list[list[str]], sentences: list[str]) -> list[list[str]]:
    """``plot`` without the sentence plots past the end of the kept ``sentences`` (module docstring)."""
    if len(plot) <= len(sentences):
        return plot
    story = [_folded(token) for token in " ".join(sentences).split()]
    position = kept = 0
    for index, sentence_plot in enumerate(plot):
        words = {w for phrase in sentence_plot for w in map(_folded, phrase.split()) if w}
        found = [i for i in (_index_from(story, w, position) for w in words) if i is not None]
        if words and not found:
            break
        position, kept = min(found, default=position), index + 1
    return plot[: max(kept, len(sentences))]


def manipulate_all(
    stories: datasets.Dataset, plots: list, seed: int, lexicon: PlotLexicon, techniques: Sequence[str] = TECHNIQUES
) -> tuple[datasets.Dataset, int]:
    """Manipulate every plot; returns the rows and how many stories had no plot to manipulate."""
    # substitution draws sentence plots from the same split, so splits stay disjoint
    pool = [sentence for plot in plots for sentence in plot if sentence]
    rows = {name: [] for name in PLOT_FEATURES}
    skipped = 0
    for example, plot in tqdm(zip(stories, plots), total=len(plots), desc="manipulating", unit="story"):
        if not any(plot):  # e.g. the official ROC CSV, which has no storylines
            skipped += 1
            continue
        # one generator per story, seeded by its id; the pool still depends on --limit (see the module docstring)
        manipulated, applied = manipulate_plot(plot, random.Random(f"{seed}:{example['id']}"), pool, lexicon, techniques)
        for name, value in (
            ("id", example["id"]),
            ("story", example["story"]),
            ("sentences", example["sentences"]),
            ("plot", plot),
            ("manipulated_plot", manipulated),
            ("techniques", applied),
        ):
            rows[name].append(value)
    return datasets.Dataset.from_dict(rows, features=PLOT_FEATURES), skipped


def build(
    dataset: str,
    split: str = "train",
    plot_source: str = "paper",
    seed: int = 42,
    limit: int | None = DEFAULT_LIMIT,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    techniques: Sequence[str] = TECHNIQUES,
) -> tuple[datasets.Dataset, int, Counter, int]:
    """(story, plot, manipulated plot) rows for one split of ``dataset`` ('roc' or 'wp'), the count skipped
    without a plot, the stories the leakage rule dropped by split, and the release plots whose sentence
    count differs from their story's."""
    if dataset not in BUILDERS:
        raise KeyError(f"unknown dataset {dataset!r}; choose from {sorted(BUILDERS)}")
    check_techniques(techniques)  # before the slow part
    root = Path(data_dir) if data_dir else paths.data_dir()
    lexicon = PlotLexicon.from_data_dir(root)  # first: a missing lexicon fails before the slow part
    builder = BUILDERS[dataset](cache_dir=cache_dir, data_dir=str(root / dataset))
    prepare(builder)
    stories = builder.as_dataset(split=split)
    if limit:
        stories = stories.select(range(min(limit, len(stories))))
    plots, mismatched = story_plots(stories, dataset, plot_source)
    if mismatched:
        logger.warning("%d of %d release plots have another sentence count than their story", mismatched, len(plots))
    rows, skipped = manipulate_all(stories, plots, seed, lexicon, techniques)
    return rows, skipped, builder.leakage_dropped(), mismatched


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=sorted(BUILDERS), required=True)
    parser.add_argument("--output-dir", required=True, help="where Dataset.save_to_disk writes the rows")
    parser.add_argument("--split", default="train", choices=["train", "validation", "test"])
    parser.add_argument("--plot-source", choices=PLOT_SOURCES, default="paper", help="the release's plots, or plots extracted from the stories")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="use only the first N stories of the split "
                                                                         "(0: all); they are also the substitution pool")
    parser.add_argument("--data-dir", default=None, help="data root (default: $STORYEVAL_DATA or ../shared/data)")
    parser.add_argument("--cache-dir", default=None, help="`datasets` cache folder")
    parser.add_argument("--techniques", nargs="+", choices=TECHNIQUES, default=list(TECHNIQUES),
                        help="the manipulations to draw from (default: all four; leave one out for the paper's Table-7 ablation)")
    args = parser.parse_args(argv)
    if args.limit < 0:
        parser.error("--limit must be 0 (all) or positive")
    if len(set(args.techniques)) != len(args.techniques):
        parser.error(f"--techniques lists a name twice: {' '.join(args.techniques)}")
    return args


@paths.one_line_errors
def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    run_environment = environment()  # taken at the start: the code the run ran, not what the checkout holds when it ends
    rows, skipped, leaked, mismatched = build(args.dataset, args.split, args.plot_source, args.seed, args.limit, args.data_dir, args.cache_dir, args.techniques)
    logger.info("leakage rule: dropped %d stories of this split (%d of all splits)", leaked[args.split], sum(leaked.values()))
    if skipped:
        logger.warning("%d stories have no plot (%s source) and were left out", skipped, args.plot_source)
    rows.save_to_disk(args.output_dir)
    stats = technique_counts(rows, unit="stories")
    stats.update(skipped_without_plot=skipped, plots_with_another_sentence_count=mismatched, dataset=args.dataset, split=args.split,
                 plot_source=args.plot_source, seed=args.seed,
                 allowed_techniques=args.techniques,
                 # the leakage rule (shared/data/README.md): this split's share, and the whole corpus's
                 leakage_dropped_stories=leaked[args.split], leakage_dropped_stories_all_splits=sum(leaked.values()))
    stats["seconds"] = round(time.perf_counter() - started, 1)
    stats["environment"] = run_environment
    Path(args.output_dir, "plots_stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    for technique, count in stats["per_technique"].items():
        logger.info("%s: %d stories", technique, count)
    print(f"built {len(rows)} manipulated plots in {stats['seconds']} s -> {args.output_dir}")


if __name__ == "__main__":
    main()
