"""Ordered pairs of WritingPrompts stories of three kinds, each split train / validation / test by story.

    python -m storyeval_training.data.wp_kinds --output-dir runs/wp-kinds

Each kind is a ``DatasetDict`` in its own folder under ``--output-dir`` (``human`` is the story that should
score higher, ``negative`` the other; ``techniques`` says how the pair was made), and ``wp_kinds.json``
records the counts:

* ``origin``: a human story above a weak generator's continuation of its opening (the pairs of
  :mod:`storyeval_training.data.wp_machine_pairs`; GPT-NeoX-20B only in validation and test);
* ``damage``: a story above its UNION perturbation (repetition, reordering, substitution, negation), for
  human stories and for machine stories of every generator (``techniques``: ``human`` or ``machine``, then
  the perturbations);
* ``strength``: for the same human story's prompt or opening and the same source, a stronger generator's
  story above a weaker one's, by the order declared in :data:`STRENGTH_TIERS` (public facts: each model's
  generation, size and tuning; never a human-judged set). Human against a strong model is left out: it is
  not an order of quality.

Splits are by story, alike for every kind: a human story keeps the WP builders' split, except that 15% of
the training split (``wp_machine_pairs``' seeded hash) joins validation, and a machine story follows its
human story; so no story of a validation or test pair, nor its human story, is in any kind's training pairs.
Both stories of every pair are cut to the shorter one's word count (a pair that becomes two equal stories
is dropped), so that length tells nothing; chat preambles are cut by the builder; both sides went through
the builders' preprocessing and the leakage rule. Prompts are left out: every kind scores the story alone.
"""
from __future__ import annotations

import argparse
import json
import logging
from collections import Counter, defaultdict
from itertools import combinations

import datasets

from storyeval_training import paths
from storyeval_training.data import build_negatives, wp_machine_pairs
from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.data.builders import WritingPrompts, WritingPromptsMachine, prepare
from storyeval_training.data.output_folder import refuse_existing, written_whole
from storyeval_training.data.technique_counts import technique_counts

logger = logging.getLogger("storyeval_training.data.wp_kinds")

SPLITS = ("train", "validation", "test")
KINDS = ("origin", "damage", "strength")
# Declared 2026-11-27, before any run, from public facts about each model (never from people's ratings):
# 1 open base language models of 2019-2023, 1.5B-20B parameters, not instruction-tuned (GPT-2-XL 1.5B,
#   OPT-2.7B, GPT-Neo-2.7B, GPT-J-6B, GPT-NeoX-20B, LLaMA-7B);
# 2 GPT-3 davinci (175B), continuing the human opening like tier 1;
# 3 instruction- or chat-tuned models of 2022-2023 (GPT-3.5-turbo, and DetectRL's "chatgpt" label for it,
#   Claude-instant, PaLM, Llama-2-70B, and HANNA's tuned 7B-70B models);
# 4 GPT-4, the newest and largest of them.
STRENGTH_TIERS = {
    "gpt2-xl": 1, "opt-2.7b": 1, "gpt-neo-2.7b": 1, "gpt-j-6b": 1, "gpt-neox-20b": 1, "llama-7b": 1,
    "davinci": 2,
    "gpt-3.5-turbo": 3, "chatgpt": 3, "claude-instant": 3, "google-palm": 3, "llama-2-70b": 3, "mistral-7b": 3,
    "beluga-13b": 3, "orcaplatypus-13b": 3, "llamainstruct-30b": 3, "platypus2-70b": 3,
    "gpt-4": 4,
}
WEAK = wp_machine_pairs.NEGATIVE_GENERATORS + wp_machine_pairs.HELD_OUT_GENERATORS


def check_strength_order(generators, tiers=STRENGTH_TIERS) -> None:
    """Every generator in the data must have a declared place in the order."""
    missing = sorted(set(generators) - set(tiers))
    if missing:
        raise ValueError(f"generators missing from the declared strength order: {', '.join(missing)}; "
                         "declare their tier in STRENGTH_TIERS before building")


def story_split(split: str, human_id: str, percent: int) -> str:
    """The split of a story whose human story (or itself, unpaired) has ``human_id`` and builder split ``split``."""
    if split == "train" and human_id and wp_machine_pairs.moved_to_validation(human_id, percent):
        return "validation"
    return split


def _pair(rows: dict, pair_id: str, better: str, worse: str, techniques: list[str], dropped: Counter) -> None:
    better, worse = wp_machine_pairs.equal_length(better, worse)
    if better == worse:  # the cut took away what told them apart
        dropped["equal_after_cut"] += 1
        return
    for name, value in (("id", pair_id), ("context", ""), ("human", better), ("negative", worse), ("original", better),
                        ("techniques", techniques)):
        rows[name].append(value)


def _empty() -> dict:
    return {name: [] for name in PAIR_FEATURES}


def origin_pairs(cache_dir, percent: int) -> tuple[datasets.DatasetDict, dict]:
    folders, counts = wp_machine_pairs.build(None, wp_machine_pairs.NEGATIVE_GENERATORS, wp_machine_pairs.HELD_OUT_GENERATORS,
                                             cache_dir, percent)
    pairs = folders["pairs"]
    allowed = {"train": set(wp_machine_pairs.NEGATIVE_GENERATORS), "validation": set(WEAK), "test": set(WEAK)}
    return datasets.DatasetDict({split: pairs[split].filter(lambda row, s=split: row["techniques"][0] in allowed[s])
                                 for split in SPLITS}), counts


def _story_first(row: dict) -> dict:
    """The story without its prompt: its first sentence becomes the context, which the perturbations leave alone."""
    return {"context": row["sentences"][0] if row["sentences"] else row["context"]}


def damage_pairs(cache_dir, seed: int, percent: int, dropped: Counter) -> datasets.DatasetDict:
    root = paths.data_dir()
    human_builder = WritingPrompts(cache_dir=cache_dir, data_dir=str(root / "wp"), config_name="extra")
    machine_builder = WritingPromptsMachine(cache_dir=cache_dir, data_dir=str(root / "wp_extra"))
    rows = {split: _empty() for split in SPLITS}
    for origin, builder in (("human", human_builder), ("machine", machine_builder)):
        prepare(builder)
        stories = datasets.DatasetDict({s: builder.as_dataset(split=s).map(_story_first) for s in SPLITS})
        human_of = {s: dict(zip(stories[s]["id"], stories[s]["human_id"] if origin == "machine" else stories[s]["id"])) for s in SPLITS}
        perturbed = build_negatives.perturb(stories, SPLITS, root, seed)
        for split in SPLITS:
            for row in perturbed[split]:
                target = story_split(split, human_of[split][row["id"]], percent)
                _pair(rows[target], f"{origin}-{row['id']}", row["human"], row["negative"], [origin, *row["techniques"]], dropped)
    return datasets.DatasetDict({s: datasets.Dataset.from_dict(r, features=PAIR_FEATURES) for s, r in rows.items()})


def strength_pairs(cache_dir, percent: int, dropped: Counter, tiers=STRENGTH_TIERS) -> datasets.DatasetDict:
    builder = WritingPromptsMachine(cache_dir=cache_dir, data_dir=str(paths.data_dir() / "wp_extra"))
    prepare(builder)
    rows = {split: _empty() for split in SPLITS}
    for split in SPLITS:
        machine = builder.as_dataset(split=split)
        check_strength_order(set(machine["generator"]), tiers)
        groups = defaultdict(list)
        for row in machine:
            if row["human_id"]:  # unpaired stories share no prompt or opening that the data records
                groups[(row["human_id"], row["source"])].append(row)
        for (human_id, _), stories in sorted(groups.items()):
            target = story_split(split, human_id, percent)
            for a, b in combinations(stories, 2):
                if tiers[a["generator"]] == tiers[b["generator"]]:
                    continue
                better, worse = (a, b) if tiers[a["generator"]] > tiers[b["generator"]] else (b, a)
                _pair(rows[target], f"{better['id']}>{worse['id']}", better["story"], worse["story"],
                      [f"{better['generator']}>{worse['generator']}"], dropped)
    return datasets.DatasetDict({s: datasets.Dataset.from_dict(r, features=PAIR_FEATURES) for s, r in rows.items()})


def build(cache_dir=None, seed: int = 42, percent: int = 15) -> tuple[dict[str, datasets.DatasetDict], dict]:
    dropped = {kind: Counter() for kind in KINDS}
    origin, origin_counts = origin_pairs(cache_dir, percent)
    kinds = {"origin": origin, "damage": damage_pairs(cache_dir, seed, percent, dropped["damage"]),
             "strength": strength_pairs(cache_dir, percent, dropped["strength"])}
    empty = [f"{kind} ({split})" for kind, pairs in kinds.items() for split in ("validation", "test") if len(pairs[split]) == 0]
    if empty:
        raise ValueError(f"kinds with no held-out pairs: {', '.join(empty)}")
    counts = {kind: {split: technique_counts(pairs[split]) for split in SPLITS} for kind, pairs in kinds.items()}
    for kind in KINDS:
        counts[kind]["dropped"] = dict(dropped[kind])
    counts["origin"]["leakage_dropped_machine_stories"] = origin_counts["leakage_dropped_machine_stories"]
    return kinds, counts


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output-dir", required=True, help="a new folder")
    p.add_argument("--seed", type=int, default=42, help="the perturbations' seed")
    p.add_argument("--extra-validation-percent", type=int, default=15,
                   help="share of the training split's human stories held out for selection, with every story paired with them")
    p.add_argument("--cache-dir", default=None, help="`datasets` cache")
    args = p.parse_args(argv)
    refuse_existing(p, args.output_dir)
    if not 0 <= args.extra_validation_percent < 100:
        p.error("--extra-validation-percent must be in [0, 100)")
    return args


def main(argv=None) -> None:
    from storyeval_training.export.provenance import environment

    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    run_environment = environment()
    kinds, counts = build(args.cache_dir, args.seed, args.extra_validation_percent)
    record = {"args": vars(args), "strength_tiers": STRENGTH_TIERS, **counts, "environment": run_environment}
    with written_whole(args.output_dir) as output:
        for kind, pairs in kinds.items():
            pairs.save_to_disk(str(output / kind))
        (output / "wp_kinds.json").write_text(json.dumps(record, indent=2) + "\n")
    for kind in KINDS:
        print(kind, {split: counts[kind][split]["pairs"] for split in SPLITS})


if __name__ == "__main__":
    main()
