"""The plot-coherence classifier's groups (a human story and its implausible ones) as train / validation pairs.

The groups come from the plot paper's released AF_ManPlts files (``read_af_tsv``) or from
``storyeval-adversarial-filter``'s output (:func:`read_generated`). Groups whose human story opens a human-judged
item are dropped (the leakage rule) and counted; the rest are split by a seeded hash of the human story, 95/5.
``storyeval-train-plot-coherence`` trains on them; its ``--pairs-only`` validation split is the project's
held-out model-written pair set, and :mod:`storyeval_training.data.transfer` keeps every story of it out of
the distillation data.
"""
from __future__ import annotations

import hashlib
import logging

import datasets

from storyeval import text as textlib
from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.data.builders.common import human_judged_keys

logger = logging.getLogger("storyeval_training.data.plot_pairs")

PAPER_AF_FILES = ("af_manplts_valid.tsv", "af_manplts_test.tsv")
VALIDATION_PERCENT = 5


def read_generated(folder) -> list[tuple[str, list[str]]]:
    """(human story, kept negatives) groups from ``storyeval-adversarial-filter``'s output.

    A DatasetDict is read whole, every split training like both released AF
    files; its group ids restart in each split, so groups are keyed by split too.
    """
    loaded = datasets.load_from_disk(str(folder))
    splits = {"": loaded} if isinstance(loaded, datasets.Dataset) else dict(loaded)
    if len(splits) > 1:
        logger.info("reading the negatives of splits %s", ", ".join(splits))
    by_group: dict = {}
    for split, rows in splits.items():
        for story, label, group in zip(rows["story"], rows["label"], rows["group"]):
            entry = by_group.setdefault((split, group), [None, []])
            if label == 1:
                entry[0] = story
            else:
                entry[1].append(story)
    return [(human, negatives) for human, negatives in by_group.values() if human is not None and negatives]


def _bucket(human: str, seed: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{human}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 100


def build_pairs(groups, human_dir, seed: int = 42, source: str = "paper") -> tuple[datasets.DatasetDict, int]:
    """Train/validation (human, negative) pairs, and how many groups the leakage rule dropped."""
    leaked = human_judged_keys(str(human_dir))
    kept = [(human, negatives) for human, negatives in groups if textlib.leakage_key(human) not in leaked]
    dropped = len(groups) - len(kept)
    if len(kept) < 2:
        raise ValueError(f"{len(kept)} groups left after the leakage rule: need at least 2 (train and validation)")
    buckets = [_bucket(human, seed) for human, _ in kept]
    lowest = min(range(len(kept)), key=buckets.__getitem__)  # a tiny corpus still gets one validation group
    rows = {"train": {name: [] for name in PAIR_FEATURES}, "validation": {name: [] for name in PAIR_FEATURES}}
    for index, (human, negatives) in enumerate(kept):
        split = rows["validation" if buckets[index] < VALIDATION_PERCENT or index == lowest else "train"]
        group_id = hashlib.blake2b(human.encode(), digest_size=8).hexdigest()
        context = (textlib.split_sentences(human) or [human])[0]
        for k, negative in enumerate(negatives):
            if negative == human:  # a negative identical to its source teaches nothing
                continue
            for name, value in (("id", f"{group_id}-{k}"), ("context", context), ("human", human), ("negative", negative),
                                ("original", human), ("techniques", [source])):
                split[name].append(value)
    pairs = datasets.DatasetDict({s: datasets.Dataset.from_dict(r, features=PAIR_FEATURES) for s, r in rows.items()})
    return pairs, dropped
