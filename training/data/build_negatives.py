"""Build UNION's paired training set: (human, negative, original) per story.

    storyeval-build-negatives --dataset roc --output-dir data/union-roc-negatives

Each split of the builder gives one split of pairs, saved with
``DatasetDict.save_to_disk``. ``original`` is the story the negative was made
from, i.e. the target of UNION's reconstruction loss; ``techniques`` records
the perturbations applied, in order.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

import datasets

from storyeval.checkpoints import resources
from storyeval_training import paths
from storyeval_training.data.builders import BUILDERS, prepare
from storyeval_training.data.negatives.sampler import NegativeSampler
from storyeval_training.data.negatives.substitution import KeywordLexicon
from storyeval_training.data.output_folder import refuse_existing, written_whole
from storyeval_training.data.technique_counts import technique_counts
from storyeval_training.export.model_card import write_negatives_card
from storyeval_training.export.provenance import environment

logger = logging.getLogger("storyeval_training.data.build_negatives")

PAIR_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "context": datasets.Value("string"),
        "human": datasets.Value("string"),
        "negative": datasets.Value("string"),
        "original": datasets.Value("string"),
        "techniques": datasets.List(datasets.Value("string")),
    }
)


def story_units(example: dict) -> list[list[str]]:
    """The story as token lists with the context first (the prompt for WP, sentence 1 for ROC)."""
    sentences = [s.split() for s in example["sentences"]]
    context = example["context"].split()
    return sentences if sentences and sentences[0] == context else [context] + sentences


def tag_batch(batch: dict) -> dict:
    return {"tags": [[[tag for _, tag in resources.pos_tag(s)] for s in story_units(ex)] for ex in _rows(batch)]}


def _rows(batch: dict):
    keys = list(batch)
    return (dict(zip(keys, values)) for values in zip(*batch.values()))


def make_pairs(batch: dict, sampler: NegativeSampler) -> dict:
    out = {name: [] for name in PAIR_FEATURES}
    for example in _rows(batch):
        units = story_units(example)
        negative = sampler.sample(units, 1, sampler.rng_for(example["id"]), tags=example["tags"])
        if negative is None:  # nothing after the context to perturb
            continue
        human = " ".join(" ".join(s) for s in units)
        out["id"].append(example["id"])
        out["context"].append(example["context"])
        out["human"].append(human)
        out["negative"].append(" ".join(" ".join(s) for s in negative.sentences))
        out["original"].append(human)
        out["techniques"].append(negative.techniques)
    return out


def build(
    dataset: str,
    splits=("train", "validation", "test"),
    seed: int = 42,
    num_proc: int | None = None,
    limit: int | None = None,
    cache_dir: str | None = None,
    data_dir: str | None = None,
    config: str | None = None,
) -> datasets.DatasetDict:
    """Build the pair splits for ``dataset`` ('roc' or 'wp'), from the builder's ``config`` (default: its default)."""
    builder = story_builder(dataset, config, cache_dir, data_dir)
    root = Path(data_dir) if data_dir else paths.data_dir()
    prepare(builder)
    # as_dataset() for all splits fails on an empty one (a tiny corpus), so ask only for non-empty ones
    stories = datasets.DatasetDict({name: builder.as_dataset(split=name) for name, info in builder.info.splits.items() if info.num_examples})
    missing = [s for s in splits if s not in stories]
    if missing:
        raise KeyError(f"unknown or empty split(s) {missing}; choose from {list(stories)}")
    if limit:
        stories = datasets.DatasetDict({s: stories[s].select(range(min(limit, len(stories[s])))) for s in stories})
    return perturb(stories, splits, root, seed, num_proc)


def perturb(stories: datasets.DatasetDict, splits, root: Path, seed: int = 42, num_proc: int | None = None) -> datasets.DatasetDict:
    """One UNION negative per story of each split in ``splits`` (rows with the builders' fields); the keyword
    lexicon counts mentions in ``stories["train"]``, and sentence substitution draws from the same split."""
    tagged = stories.map(tag_batch, batched=True, num_proc=num_proc, desc="POS tagging")
    lexicon = KeywordLexicon.from_data_dir(root)
    lexicon.count_mentions(tag_seq for ex in tagged["train"] for tag_seq in _tagged_units(ex))

    pairs = {}
    for split in splits:
        # sentence substitution draws from the same split, so splits stay disjoint
        pool = [unit for ex in tagged[split] for unit in story_units(ex)[1:]]
        sampler = NegativeSampler(lexicon, pool, seed=seed)
        pairs[split] = tagged[split].map(
            make_pairs,
            fn_kwargs={"sampler": sampler},
            batched=True,
            remove_columns=tagged[split].column_names,
            features=PAIR_FEATURES,
            num_proc=num_proc,
            desc=f"negatives ({split})",
        )
    return datasets.DatasetDict(pairs)


def story_builder(dataset: str, config: str | None = None, cache_dir: str | None = None, data_dir: str | None = None):
    """The builder of ``dataset`` with ``config``; unknown names are errors that list the choices."""
    if dataset not in BUILDERS:
        raise KeyError(f"unknown dataset {dataset!r}; choose from {sorted(BUILDERS)}")
    configs = list(BUILDERS[dataset].builder_configs)
    if config is not None and config not in configs:
        raise KeyError(f"unknown config {config!r} of dataset {dataset!r}; choose from {configs}")
    root = Path(data_dir) if data_dir else paths.data_dir()
    return BUILDERS[dataset](cache_dir=cache_dir, data_dir=str(root / dataset), config_name=config)


def _tagged_units(example):
    return (list(zip(tokens, tags)) for tokens, tags in zip(story_units(example), example["tags"]))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=sorted(BUILDERS), required=True)
    parser.add_argument("--output-dir", required=True, help="where DatasetDict.save_to_disk writes the pairs")
    parser.add_argument("--config", default=None, help="the builder's config, e.g. wp's 'extra' (default: its default)")
    parser.add_argument("--splits", nargs="+", default=["train", "validation", "test"])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--num-proc", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--limit", type=int, default=None, help="use only the first N stories of each split")
    parser.add_argument("--data-dir", default=None, help="data root (default: $STORYEVAL_DATA or ../shared/data)")
    parser.add_argument("--cache-dir", default=None, help="`datasets` cache folder")
    args = parser.parse_args(argv)
    if args.num_proc < 1 or (args.limit is not None and args.limit < 1):
        parser.error("--num-proc and --limit must be at least 1")
    refuse_existing(parser, args.output_dir)
    return args


@paths.one_line_errors
def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    run_environment = environment()  # taken at the start: the code the run ran, not what the checkout holds when it ends
    pairs = build(args.dataset, args.splits, args.seed, args.num_proc if args.num_proc > 1 else None, args.limit, args.cache_dir,
                  args.data_dir, args.config)
    stats = {split: technique_counts(pairs[split]) for split in pairs}
    # the leakage rule (shared/data/README.md): how many stories it kept out of each split
    leaked = story_builder(args.dataset, args.config, args.cache_dir, args.data_dir).leakage_dropped()
    for split in pairs:
        stats[split]["leakage_dropped_stories"] = leaked[split]
    stats["leakage_dropped_stories_all_splits"] = sum(leaked.values())
    stats["seconds"] = round(time.perf_counter() - started, 1)
    stats["dataset"], stats["seed"] = args.dataset, args.seed  # so training from this folder knows its corpus
    stats["config"] = args.config or "default"
    stats["environment"] = run_environment
    with written_whole(args.output_dir) as output:
        pairs.save_to_disk(str(output))
        (output / "negatives_stats.json").write_text(json.dumps(stats, indent=2) + "\n")
        write_negatives_card(output, args.dataset, args.seed, stats)
    for split in pairs:
        print(f"{split}: {json.dumps(stats[split])}")
    print(f"built {sum(len(p) for p in pairs.values())} pairs in {stats['seconds']} s -> {args.output_dir}")


if __name__ == "__main__":
    main()
