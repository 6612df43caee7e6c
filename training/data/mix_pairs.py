"""One pair folder from several: e.g. UNION's perturbations beside weak generators' stories as negatives.

    python -m storyeval_training.data.mix_pairs --output-dir outputs/wp-mixed \\
        --pairs perturbations=<storyeval-build-negatives output> --pairs machine=<wp_machine_pairs output>/pairs \\
        --techniques machine=gpt2-xl,opt-2.7b,gpt-neo-2.7b,gpt-j-6b --max-train-pairs perturbations=600 \\
        --max-train-pairs machine=600

Each ``--pairs`` folder is a ``DatasetDict`` of (human, negative) pairs with the same columns, as
``storyeval-build-negatives`` and ``wp_machine_pairs`` save them; a set may lack a split (a selection folder
has no train split). Each split of the output holds every set's pairs of that split, after ``--techniques``
(which perturbations, or which generators, a set keeps) and ``--max-train-pairs`` (a seeded sample of a
set's training pairs). The output trains with ``storyeval-train-union --pairs-dir``.

Sets built by different tools may split the same human story differently (``wp_machine_pairs`` moves some
training stories into validation), so a training pair is dropped when its human story, by the leakage key,
is judged by any validation or test pair of the output: the selection never sees a story training saw.
"""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import datasets

from storyeval import text as textlib
from storyeval_training.data.named_sets import checked_pair_folders, counts_per_set, pair_folder, techniques_per_set, with_techniques
from storyeval_training.data.output_folder import refuse_existing, written_whole
from storyeval_training.data.technique_counts import technique_counts
from storyeval_training.export.provenance import environment

logger = logging.getLogger("storyeval_training.data.mix_pairs")

SPLITS = ("train", "validation", "test")
RECORD = "mix_pairs.json"


def load_set(name: str, folder: Path, techniques: list[str] | None) -> datasets.DatasetDict:
    pairs = datasets.load_from_disk(str(folder))
    if techniques:
        pairs = datasets.DatasetDict({split: with_techniques(rows, techniques, name) for split, rows in pairs.items()})
        if not any(len(rows) for rows in pairs.values()):
            raise ValueError(f"--techniques {name}={','.join(techniques)}: no pair of {folder} was made by them")
    return pairs


def mix(sets: dict[str, datasets.DatasetDict], max_train_pairs: dict[str, int], seed: int) -> tuple[datasets.DatasetDict, dict]:
    """The mixed folder and its counts: per split, per set and per technique, and the training pairs dropped."""
    columns = None
    for name, pairs in sets.items():
        for split, rows in pairs.items():
            if columns is None:
                columns = rows.features
            elif rows.features != columns:
                raise ValueError(f"--pairs {name}: its {split} split's columns differ from the first set's "
                                 f"({sorted(rows.features)} against {sorted(columns)})")
    held_out = {textlib.leakage_key(story) for pairs in sets.values() for split, rows in pairs.items() if split != "train"
                for story in rows["human"]}
    counts = {"per_set": {}, "train_pairs_dropped_for_held_out_stories": {}}
    parts = {split: [] for split in SPLITS}
    for name, pairs in sets.items():
        counts["per_set"][name] = {}
        for split, rows in pairs.items():
            if split not in parts:
                raise ValueError(f"--pairs {name}: unknown split {split!r} (expected {SPLITS})")
            if split == "train":
                before = len(rows)
                rows = rows.filter(lambda row: textlib.leakage_key(row["human"]) not in held_out,
                                   desc=f"dropping {name}'s held-out stories")
                counts["train_pairs_dropped_for_held_out_stories"][name] = before - len(rows)
                if name in max_train_pairs and len(rows) > max_train_pairs[name]:
                    rows = rows.shuffle(seed=seed).select(range(max_train_pairs[name]))
            parts[split].append(rows)
            counts["per_set"][name][split] = technique_counts(rows)
    mixed = datasets.DatasetDict({split: datasets.concatenate_datasets(rows).shuffle(seed=seed)
                                  for split, rows in parts.items() if rows})
    counts["pairs"] = {split: len(rows) for split, rows in mixed.items()}
    return mixed, counts


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output-dir", required=True)
    p.add_argument("--pairs", action="append", default=[], required=True, type=pair_folder, metavar="NAME=FOLDER",
                   help="a pair folder (repeatable)")
    p.add_argument("--techniques", action="append", default=[], metavar="NAME=T1,T2",
                   help="keep only the pairs of set NAME made by these techniques (generators, for wp_machine_pairs)")
    p.add_argument("--max-train-pairs", action="append", default=[], metavar="NAME=N",
                   help="a seeded sample of at most N of set NAME's training pairs")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    try:
        names = checked_pair_folders(args.pairs)
        args.techniques = techniques_per_set(args.techniques, names)
        args.max_train_pairs = counts_per_set("max-train-pairs", args.max_train_pairs, names)
    except ValueError as error:
        p.error(str(error))
    args.pairs = dict(args.pairs)
    refuse_existing(p, args.output_dir)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    run_environment = environment()
    sets = {name: load_set(name, folder, args.techniques.get(name)) for name, folder in args.pairs.items()}
    mixed, counts = mix(sets, args.max_train_pairs, args.seed)
    arguments = {**vars(args), "pairs": {name: str(folder) for name, folder in args.pairs.items()}}
    with written_whole(args.output_dir) as output:
        mixed.save_to_disk(str(output))
        (output / RECORD).write_text(json.dumps({"args": arguments, **counts, "environment": run_environment}, indent=2) + "\n")
    print(json.dumps(counts["pairs"]))


if __name__ == "__main__":
    main()
