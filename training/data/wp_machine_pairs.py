"""Pairs of a human WritingPrompts story and a machine story for the same prompt or opening (``wp_extra``).

    python -m storyeval_training.data.wp_machine_pairs --output-dir outputs/wp-machine

Writes three folders under ``--output-dir``, each a ``DatasetDict`` split as the builders split the
human stories (a machine story goes where its human story goes):

* ``pairs/``: every (human, machine) pair, with the generator in ``techniques`` (the check of how a
  checkpoint ranks each generator's stories against human ones);
* ``candidates/``: for the adversarial filter (``storyeval-adversarial-filter``), each training human
  story with the stories the ``--negative-generators`` wrote for it;
* ``selection/``: the validation and test pairs of the ``--held-out-generators``, which no training
  pair uses: the selection signal of a classifier trained on ``candidates/``
  (``--selection-pairs-dir``).

Both stories of a pair went through the WP builder's preprocessing (200-word cut, tokenising, names
replaced) and the leakage rule. Human and machine is a label of origin, not of quality: only stories
of weak generators serve as negatives (see ``benchmarks/experiments/wp_v2.md``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
from collections import Counter, defaultdict

import datasets

from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.data.builders import WritingPromptsMachine, prepare
from storyeval_training.data.builders.wp_extra import default_extra_dir
from storyeval_training.data.output_folder import refuse_existing, written_whole
from storyeval_training.export.provenance import environment

logger = logging.getLogger("storyeval_training.data.wp_machine_pairs")

SPLITS = ("train", "validation", "test")
# Fast-DetectGPT's open models continue the human story's own opening: weak, and paired within one source
NEGATIVE_GENERATORS = ("gpt2-xl", "opt-2.7b", "gpt-neo-2.7b", "gpt-j-6b")
HELD_OUT_GENERATORS = ("gpt-neox-20b",)
CANDIDATE_FEATURES = datasets.Features(
    {"id": datasets.Value("string"), "story": datasets.Value("string"), "candidates": datasets.List(datasets.Value("string"))}
)


def cut_to_words(text: str, words: int) -> str:
    """The first ``words`` whitespace tokens of a preprocessed story."""
    return " ".join(text.split()[:words])


def equal_length(*stories: str) -> list[str]:
    """The stories cut to the shortest one's token count.

    Human stories here run longer than their machine continuations (the longer story of a pair is the
    human one in about 85% of weak generators' pairs), so uncut pairs would teach length. Both sides of
    most pairs already end mid-sentence (a source's token limit), so a cut mid-sentence is no new cue.
    """
    shortest = min(len(story.split()) for story in stories)
    return [cut_to_words(story, shortest) for story in stories]


def moved_to_validation(human_id: str, percent: int, seed: int = 42) -> bool:
    """Whether a training human story is held out for selection (a seeded hash, like the builders' split)."""
    digest = hashlib.blake2b(f"{seed}:selection:{human_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 100 < percent


def build(extra_dir: str | None, negative_generators, held_out_generators, cache_dir: str | None = None,
          extra_validation_percent: int = 15, cut_equal: bool = True) -> tuple[dict, dict]:
    """The three DatasetDicts, and counts for the run's record.

    The builders' 5% validation split holds about 24 human stories with weak generators' stories, too few
    to select on, so ``extra_validation_percent`` of the training split's human stories join it (with
    every machine story written for them); the test split is the builders'.
    """
    overlap = set(negative_generators) & set(held_out_generators)
    if overlap:
        raise ValueError(f"generators both negative and held out: {sorted(overlap)}")
    builder = WritingPromptsMachine(cache_dir=cache_dir, data_dir=extra_dir or str(default_extra_dir()))
    prepare(builder)
    known = set()
    machine = {}
    for split in SPLITS:  # as_dataset fails on an empty split (a tiny corpus)
        empty = not builder.info.splits[split].num_examples
        machine[split] = [] if empty else builder.as_dataset(split=split)
        known |= {row["generator"] for row in machine[split]}
    unknown = (set(negative_generators) | set(held_out_generators)) - known
    if unknown:
        raise ValueError(f"unknown generators {sorted(unknown)}; the data has {sorted(known)}")
    humans = builder.human_stories()
    logger.info("preprocessed %d human stories (max_words=%d)", len(humans), builder.config.max_words)

    pairs, candidates, selection = {}, {}, {}
    counts = {"leakage_dropped_machine_stories": dict(builder.leakage_dropped()), "splits": {}}
    rows_of = {split: [] for split in SPLITS}
    for split in SPLITS:
        for row in machine[split]:
            moved = split == "train" and row["human_id"] and moved_to_validation(row["human_id"], extra_validation_percent)
            rows_of["validation" if moved else split].append(row)
    for split in SPLITS:
        rows = {name: [] for name in PAIR_FEATURES}
        by_human = defaultdict(list)
        per_generator = Counter()
        for row in rows_of[split]:
            if not row["human_id"] or row["human_id"] not in humans:
                continue  # no pairing, or a human story that the config drops
            human, negative = equal_length(humans[row["human_id"]], row["story"]) if cut_equal else (humans[row["human_id"]], row["story"])
            for name, value in (("id", row["id"]), ("context", row["context"]), ("human", human), ("negative", negative),
                                ("original", human), ("techniques", [row["generator"]])):
                rows[name].append(value)
            per_generator[row["generator"]] += 1
            if row["generator"] in negative_generators:
                by_human[row["human_id"]].append(row["story"])
        pairs[split] = datasets.Dataset.from_dict(rows, features=PAIR_FEATURES)
        held_out = pairs[split].filter(lambda r: r["techniques"][0] in held_out_generators)
        if split != "train":
            selection[split] = held_out
        if split == "train":
            ids = sorted(by_human)
            # a group is cut to its shortest story, so that the filter cannot pick negatives by length either
            groups = [equal_length(humans[i], *by_human[i]) if cut_equal else [humans[i], *by_human[i]] for i in ids]
            candidates[split] = datasets.Dataset.from_dict(
                {"id": ids, "story": [g[0] for g in groups], "candidates": [g[1:] for g in groups]}, features=CANDIDATE_FEATURES
            )
        counts["splits"][split] = {"pairs": len(pairs[split]), "per_generator": dict(sorted(per_generator.items())),
                                   "held_out_pairs": len(held_out), "human_stories_with_negatives": len(by_human)}
    return {"pairs": datasets.DatasetDict(pairs), "candidates": datasets.DatasetDict(candidates),
            "selection": datasets.DatasetDict(selection)}, counts


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output-dir", required=True)
    p.add_argument("--extra-dir", default=None, help="the wp_extra folder (default: the shared data's)")
    p.add_argument("--negative-generators", nargs="+", default=list(NEGATIVE_GENERATORS))
    p.add_argument("--held-out-generators", nargs="+", default=list(HELD_OUT_GENERATORS))
    p.add_argument("--extra-validation-percent", type=int, default=15,
                   help="share of the training split's human stories held out for selection, with their machine stories")
    p.add_argument("--no-equal-length", dest="equal_length", action="store_false",
                   help="keep each story whole (default: both sides of a pair, and every story of a group, cut to the shortest)")
    p.add_argument("--cache-dir", default=None, help="`datasets` cache")
    args = p.parse_args(argv)
    if not 0 <= args.extra_validation_percent < 100:
        p.error("--extra-validation-percent must be in [0, 100)")
    refuse_existing(p, args.output_dir)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    run_environment = environment()
    folders, counts = build(args.extra_dir, args.negative_generators, args.held_out_generators, args.cache_dir,
                            args.extra_validation_percent, args.equal_length)
    record = {"args": vars(args), **counts, "environment": run_environment}
    with written_whole(args.output_dir) as output:
        for name, folder in folders.items():
            folder.save_to_disk(str(output / name))
        (output / "wp_machine_pairs.json").write_text(json.dumps(record, indent=2) + "\n")
    for split, split_counts in counts["splits"].items():
        print(f"{split}: {json.dumps(split_counts)}")


if __name__ == "__main__":
    main()
