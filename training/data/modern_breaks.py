"""Stories by today's language models, intact and with one planted break: the modern-text check, and pairs to learn from.

    python -m storyeval_training.data.modern_breaks --output-dir runs/modern-breaks

No human label goes in. The intact stories are ``wp_extra``'s stories by instruction-tuned generators
(:data:`MODERN_GENERATORS`; base models continuing a human opening are not today's text), each read two ways
(:data:`VIEWS`): ``wp``, its leading whole sentences up to 260 words, and ``roc``, one window of 5-7
consecutive sentences at a seeded place (ROCStories' length). Every story gets one broken copy per kind of
:mod:`storyeval_training.data.breaks` (an off-topic sentence from another story of the same generator, a
contradiction, two events swapped, a sentence repeated, a cut mid-plot, a sentence moved out of its place, and the
first checks: the sentences shuffled, a sentence said three times, the first half alone), each
with exactly one break; a cut (or half) only where the view reaches the story's end (a longer story's leading 260 words, or a
window in its middle, already stop before it: cutting them again breaks nothing), the others counted. A story of
fewer than four sentences carries no break: it is skipped and counted, never paired, and a break that cannot
apply to a story (no sentence far enough to swap) is counted too.

Splits are by prompt (the WP builders' groups), and one generator (:data:`HELD_OUT_GENERATOR`) is held out
entirely: ``test`` holds all its stories and the other generators' stories of the WP builders' validation and
test splits, which no shipped checkpoint trained on; ``validation`` (for selecting) and ``train`` share the rest
by a seeded hash of the prompt. For training, human stories (``wp_extra``'s and the plot-guided WP release's,
and ROCStories) of the builders' training split get the same breaks in ``train`` and ``validation``, so that what
is learned is the break and not the writer. The check's human views (``human-roc``: whole ROCStories stories;
``human-wp``: human WP stories at WP length) are stories of the builders' test splits (``--max-human-test-stories``
of each corpus), in ``test`` only: a researcher's first checks run on human stories too.

Output, under ``--output-dir``:

* ``stories/``: a ``DatasetDict`` (train / validation / test) of every intact story and broken copy, as
  written (cased; the scorers normalise text themselves) and as its ``sentences``, with ``unit`` (the intact story a row belongs to),
  ``group`` (its prompt), ``generator``, ``origin``, ``view``, ``kind`` (``intact`` or the break),
  ``break_at`` (the sentence the break shows in; -1 when intact) and ``words``;
* ``pairs/<view>-<kind>/`` (``wp-insert``, ``roc-cut``, ...): the same as (intact, broken) pairs in the negative
  samplers' pair format, normalised as the checkpoints were trained (for ``train_ranker --pairs``);
* ``modern_breaks.json``: every count (stories, units, pairs by split, view, kind and generator; skipped and
  leakage-dropped stories) and the environment.

The leakage rule: the builders drop stories that open like a human-judged item, and a window (or story), or a
shuffled copy, that opens like one is dropped here, all counted; a finished output in which any story still opens
like one is refused with the count, and nothing is written.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
from collections import Counter, defaultdict
from pathlib import Path

import datasets

from storyeval import text as textlib
from storyeval_training import paths
from storyeval_training.data import breaks
from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.data.builders import ROCStories, WritingPrompts, WritingPromptsMachine, prepare
from storyeval_training.data.builders.common import human_judged_keys
from storyeval_training.data.output_folder import refuse_existing, written_whole

logger = logging.getLogger("storyeval_training.data.modern_breaks")

SPLITS = ("train", "validation", "test")
VIEWS = ("wp", "roc")
# Declared 2026-11-28, before any run: the instruction- or chat-tuned generators of wp_extra (tiers 3 and 4 of
# wp_kinds.STRENGTH_TIERS). claude-instant is held out entirely: the only generator of its family here, so its
# rows test whether what is learned carries to a model family never trained on.
MODERN_GENERATORS = ("gpt-4", "gpt-3.5-turbo", "chatgpt", "claude-instant", "google-palm", "llama-2-70b", "mistral-7b",
                     "beluga-13b", "orcaplatypus-13b", "llamainstruct-30b", "platypus2-70b")
HELD_OUT_GENERATOR = "claude-instant"
# DetectRL's back-translated and DIPPER-paraphrased rows went through a non-LLM rewriter: not intact LLM text
EXCLUDED_VARIANTS = ("paraphrase_back_translation_llm", "paraphrase_dipper_llm")
WP_MAX_WORDS = 260
ROC_WINDOW = (5, 7)
VALIDATION_PERCENT = 20
STORY_FEATURES = datasets.Features({
    "id": datasets.Value("string"), "unit": datasets.Value("string"), "group": datasets.Value("string"),
    "generator": datasets.Value("string"), "origin": datasets.Value("string"), "view": datasets.Value("string"),
    "kind": datasets.Value("string"), "text": datasets.Value("string"), "sentences": datasets.List(datasets.Value("string")),
    "break_at": datasets.Value("int32"), "words": datasets.Value("int32"),
})
AS_WRITTEN = {"tokenize": False, "delexicalize": False, "max_words": 0}


def _selection_split(group: str, seed: int) -> str:
    """validation for VALIDATION_PERCENT of the prompts (a seeded hash, so a prompt's stories stay together), else train."""
    digest = hashlib.blake2b(f"{seed}:modern-validation:{group}".encode(), digest_size=8).digest()
    return "validation" if int.from_bytes(digest, "big") % 100 < VALIDATION_PERCENT else "train"


def modern_split(builder_split: str, generator: str, group: str, seed: int) -> str:
    """test: the held-out generator and the builders' held-out splits; else validation or train by the prompt's hash."""
    if generator == HELD_OUT_GENERATOR or builder_split != "train":
        return "test"
    return _selection_split(group, seed)


def human_split(builder_split: str, group: str, seed: int) -> str | None:
    """Human stories teach, never test: the builders' training split only, by the same prompt hash."""
    return _selection_split(group, seed) if builder_split == "train" else None


def words(sentences: list[str]) -> int:
    return sum(len(s.split()) for s in sentences)


def views(sentences: list[str], rng: random.Random) -> dict[str, tuple[list[str], bool]]:
    """The story's ``wp`` view (leading whole sentences up to 260 words) and ``roc`` view (a 5-7 sentence window),
    each with whether it reaches the story's end (only then can it carry a ``cut``)."""
    wp = textlib.truncate_sentences(sentences, WP_MAX_WORDS)
    size = min(rng.randint(*ROC_WINDOW), len(sentences))
    start = rng.randrange(0, len(sentences) - size + 1)
    return {"wp": (wp, len(wp) == len(sentences)), "roc": (sentences[start:start + size], start + size == len(sentences))}


class Units:
    """Intact stories (units) and their broken copies, as rows of :data:`STORY_FEATURES`, with the counts."""

    def __init__(self, antonyms: dict[str, list[str]], seed: int, judged_keys: frozenset[str] = frozenset()):
        self.antonyms, self.seed, self.judged_keys = antonyms, seed, judged_keys
        self.rows = {split: defaultdict(list) for split in SPLITS}
        self.counts = Counter()
        self.foreign = defaultdict(list)  # (split, generator) -> sentences of that generator's stories, for `insert`

    def collect_foreign(self, split: str, generator: str, group: str, sentences: list[str]) -> None:
        self.foreign[(split, generator)].extend((group, s) for s in sentences[1:])

    def add(self, split: str, unit: str, group: str, generator: str, origin: str, view: str, sentences: list[str],
            reaches_end: bool) -> None:
        """``reaches_end``: the text ends where its story does; one that stops mid-story carries no ending kind."""
        if len(sentences) < breaks.MIN_SENTENCES:
            self.counts[f"skipped_too_short/{origin}/{view}"] += 1
            return
        if self.opens_like_judged(sentences[0]):  # a window can open with a sentence a judged story opens with
            self.counts[f"leakage_dropped_units/{origin}/{view}"] += 1
            return
        self._row(split, unit, "intact", group, generator, origin, view, sentences, -1)
        rng = random.Random(f"{self.seed}:{unit}")
        for kind in breaks.KINDS:
            if kind in breaks.ENDING_KINDS and not reaches_end:  # no ending to lose; no randomness drawn, so the other kinds stay as they were
                self.counts[f"view_before_story_end/{origin}/{view}/{kind}"] += 1
                continue
            broken = self._break(kind, split, generator, group, sentences, rng)
            if broken is None:
                self.counts[f"break_not_applicable/{origin}/{view}/{kind}"] += 1
                continue
            if broken[0][0] != sentences[0] and self.opens_like_judged(broken[0][0]):  # a shuffle moves the opening
                self.counts[f"leakage_dropped_breaks/{origin}/{view}/{kind}"] += 1
                continue
            self._row(split, unit, kind, group, generator, origin, view, *broken)

    def opens_like_judged(self, sentence: str) -> bool:
        """Whether a text opening with ``sentence`` opens like a human-judged item (the leakage rule's one test)."""
        return textlib.leakage_key(sentence) in self.judged_keys

    def _break(self, kind, split, generator, group, sentences, rng):
        if kind == "insert":
            pool = self.foreign[(split, generator)]
            if not pool:
                return None
            for _ in range(20):  # a sentence of another prompt's story
                other_group, sentence = rng.choice(pool)
                if other_group != group:
                    return breaks.insert(sentences, rng, sentence)
            return None
        if kind == "contradiction":
            return breaks.contradiction(sentences, rng, self.antonyms)
        return getattr(breaks, kind)(sentences, rng)

    def _row(self, split, unit, kind, group, generator, origin, view, sentences, break_at) -> None:
        rows = self.rows[split]
        for name, value in (("id", f"{unit}/{kind}"), ("unit", unit), ("group", group), ("generator", generator),
                            ("origin", origin), ("view", view), ("kind", kind), ("text", " ".join(sentences)),
                            ("sentences", list(sentences)), ("break_at", break_at), ("words", words(sentences))):
            rows[name].append(value)

    def dataset(self) -> datasets.DatasetDict:
        return datasets.DatasetDict({split: datasets.Dataset.from_dict(dict(rows) or {n: [] for n in STORY_FEATURES},
                                                                       features=STORY_FEATURES)
                                     for split, rows in self.rows.items()})


def machine_stories(cache_dir, counts: Counter) -> list[dict]:
    builder = WritingPromptsMachine(cache_dir=cache_dir, data_dir=str(paths.data_dir() / "wp_extra"), **AS_WRITTEN)
    prepare(builder)
    counts["leakage_dropped/machine"] = sum(builder.leakage_dropped().values())
    out = []
    for split in SPLITS:
        for row in builder.as_dataset(split=split):
            if row["generator"] not in MODERN_GENERATORS:
                continue
            if row["variant"] in EXCLUDED_VARIANTS:
                counts[f"excluded_variant/{row['variant']}"] += 1
                continue
            group = row["human_id"] or row["id"]
            out.append({"id": row["id"], "group": group, "generator": row["generator"], "sentences": row["sentences"],
                        "builder_split": split})
    return out


def human_stories(cache_dir, counts: Counter, max_stories: int, seed: int, test_groups: set[str],
                  max_test_stories: int = 0) -> list[dict]:
    """Human WP and ROC stories of the builders' training split (at most ``max_stories`` of each corpus), but
    none whose prompt a test story shares (a machine story's group is its human story's id); and, as the check's
    human views, at most ``max_test_stories`` of each corpus's test split, which no checkpoint trained on."""
    root = paths.data_dir()
    out = []
    for corpus, builder in (("wp", WritingPrompts(cache_dir=cache_dir, data_dir=str(root / "wp"), config_name="extra", **AS_WRITTEN)),
                            ("roc", ROCStories(cache_dir=cache_dir, data_dir=str(root / "roc"), **AS_WRITTEN))):
        prepare(builder)
        counts[f"leakage_dropped/human-{corpus}"] = sum(builder.leakage_dropped().values())
        rows = builder.as_dataset(split="train").shuffle(seed=seed)
        shares_test_prompt = set(rows["id"]) & test_groups
        counts[f"human_dropped_test_prompt/{corpus}"] = len(shares_test_prompt)
        rows = rows.filter(lambda row: row["id"] not in shares_test_prompt)
        for row in rows.select(range(min(max_stories, len(rows)))):
            split = human_split("train", row["id"], seed)
            out.append({"id": row["id"], "group": row["id"], "generator": f"human-{corpus}", "sentences": row["sentences"],
                        "split": split, "corpus": corpus})
        if max_test_stories:
            rows = builder.as_dataset(split="test").shuffle(seed=seed)
            for row in rows.select(range(min(max_test_stories, len(rows)))):
                out.append({"id": row["id"], "group": row["id"], "generator": f"human-{corpus}", "sentences": row["sentences"],
                            "split": "test", "corpus": corpus})
    return out


def build(cache_dir=None, seed: int = 42, max_human_stories: int = 2000,
          max_human_test_stories: int = 300) -> tuple[datasets.DatasetDict, dict[str, datasets.DatasetDict], dict]:
    from storyeval_training.data.negatives.substitution import read_antonyms

    counts = Counter()
    antonyms = read_antonyms(paths.data_dir() / "lexicon" / "conceptnet_antonym.txt")
    machine = machine_stories(cache_dir, counts)
    for story in machine:
        story["split"] = modern_split(story["builder_split"], story["generator"], story["group"], seed)
    test_groups = {story["group"] for story in machine if story["split"] == "test"}
    human = (human_stories(cache_dir, counts, max_human_stories, seed, test_groups, max_human_test_stories)
             if max_human_stories or max_human_test_stories else [])
    units = Units(antonyms, seed, human_judged_keys(str(paths.data_dir() / "human")))
    for story in (*machine, *human):
        units.collect_foreign(story["split"], story["generator"], story["group"], story["sentences"])
    for story in machine:
        counts[f"stories/{story['split']}/{story['generator']}"] += 1
        for view, (sentences, reaches_end) in views(story["sentences"], random.Random(f"{seed}:view:{story['id']}")).items():
            units.add(story["split"], f"{story['id']}/{view}", story["group"], story["generator"], "machine", view, sentences, reaches_end)
    for story in human:
        counts[f"stories/{story['split']}/{story['generator']}"] += 1
        if story["corpus"] == "roc":  # a ROC story is one window already
            chosen = {"roc": (story["sentences"], True)}
        elif story["split"] == "test":  # a human view of the check: WP stories at WP length only
            chosen = {"wp": views(story["sentences"], random.Random(f"{seed}:view:{story['id']}"))["wp"]}
        else:
            chosen = views(story["sentences"], random.Random(f"{seed}:view:{story['id']}"))
        for view, (sentences, reaches_end) in chosen.items():
            units.add(story["split"], f"{story['id']}/{view}", story["group"], story["generator"], "human", view, sentences, reaches_end)
    stories = units.dataset()
    check_leakage(stories)
    counts.update(units.counts)
    return stories, pairs(stories), summarise(stories, counts)


def check_leakage(stories: datasets.DatasetDict) -> None:
    """Refuse an output in which a story opens like a human-judged item (the builders should have dropped it)."""
    keys = human_judged_keys(str(paths.data_dir() / "human"))
    leaked = sum(textlib.leakage_key(text) in keys for split in stories.values() for text in split["text"])
    if leaked:
        raise ValueError(f"{leaked} stories open like a human-judged item: refusing to write a check that overlaps a test set")


def pairs(stories: datasets.DatasetDict) -> dict[str, datasets.DatasetDict]:
    """(intact, broken) pairs per view and kind (``wp-insert``, ...), normalised as the checkpoints were trained."""
    normalised = {}  # text -> its normalised form: an intact story is the higher side of six pairs

    def normal(text: str) -> str:
        if text not in normalised:
            normalised[text] = textlib.normalize_story(text)
        return normalised[text]

    columns = defaultdict(lambda: {split: {name: [] for name in PAIR_FEATURES} for split in stories})
    for split, rows in stories.items():
        intact = {r["unit"]: r["text"] for r in rows if r["kind"] == "intact"}
        for r in rows:
            if r["kind"] == "intact":
                continue
            human = normal(intact[r["unit"]])
            for name, value in (("id", r["id"]), ("context", ""), ("human", human), ("negative", normal(r["text"])),
                                ("original", human), ("techniques", [r["kind"], r["origin"], r["generator"], r["view"]])):
                columns[f"{r['view']}-{r['kind']}"][split][name].append(value)
    # a split with no pairs is left out: `datasets` cannot read an empty saved split back
    return {name: datasets.DatasetDict({split: datasets.Dataset.from_dict(c, features=PAIR_FEATURES) for split, c in per_split.items() if c["id"]})
            for name, per_split in sorted(columns.items())}


def summarise(stories: datasets.DatasetDict, counts: Counter) -> dict:
    table = {}
    for split, rows in stories.items():
        table[split] = Counter(f"{o}/{v}/{k}" for o, v, k in zip(rows["origin"], rows["view"], rows["kind"]))
        table[f"{split}_generators"] = Counter(f"{g}/{v}" for g, v, k in zip(rows["generator"], rows["view"], rows["kind"]) if k == "intact")
    return {"rows": {name: dict(sorted(c.items())) for name, c in table.items()}, "counts": dict(sorted(counts.items()))}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output-dir", required=True, help="a new folder")
    p.add_argument("--seed", type=int, default=42, help="the breaks', windows' and validation split's seed")
    p.add_argument("--max-human-stories", type=int, default=2000,
                   help="human stories of each corpus (WP, ROC) broken for training (0: modern stories only)")
    p.add_argument("--max-human-test-stories", type=int, default=300,
                   help="human stories of each corpus's test split broken as the check's human views (human-roc, human-wp)")
    p.add_argument("--cache-dir", default=None, help="`datasets` cache")
    args = p.parse_args(argv)
    refuse_existing(p, args.output_dir)
    for option in ("max_human_stories", "max_human_test_stories"):
        if getattr(args, option) < 0:
            p.error(f"--{option.replace('_', '-')} must not be negative")
    return args


def main(argv=None) -> None:
    from storyeval_training.export.provenance import environment

    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    run_environment = environment()
    stories, kind_pairs, summary = build(args.cache_dir, args.seed, args.max_human_stories, args.max_human_test_stories)
    record = {"args": {**vars(args), "output_dir": Path(args.output_dir).name}, "modern_generators": MODERN_GENERATORS,
              "held_out_generator": HELD_OUT_GENERATOR, "excluded_variants": EXCLUDED_VARIANTS, **summary,
              "environment": run_environment}
    with written_whole(args.output_dir) as output:
        stories.save_to_disk(str(output / "stories"))
        for name, rows in kind_pairs.items():
            rows.save_to_disk(str(output / "pairs" / name))
        (output / "modern_breaks.json").write_text(json.dumps(record, indent=2) + "\n")
    for split in SPLITS:
        print(split, {key: value for key, value in summary["rows"][split].items() if key.endswith("/intact")})


if __name__ == "__main__":
    main()
