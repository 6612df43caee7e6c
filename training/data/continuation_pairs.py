"""Self-supervised (context, candidate next sentence) pairs for the continuation encoder.

For each story, a context length k is drawn from 1..n-1; the context is the first k
sentences and the true next sentence is sentence k+1 (label 1). Its negatives (label 0):

* ``other_story``: the sentence at the same position in another story of the split;
* ``later_sentence``: a sentence of the same story after the true one (none when the
  true one is the last);
* ``perturbed``: the true sentence with a negation added or removed, else keywords
  swapped for ConceptNet antonyms (UNION's perturbations); none when neither applies.

And, for the stories the plot paper released implausible versions of (``roc/af_manplts_*.tsv``:
BART stories written from manipulated plots, kept by adversarial filtering), one more group:

* ``generated``: each implausible story shares the human story's first sentences and then
  departs from it; its first departing sentence is a negative for that shared context, with
  the human story's sentence there as the true one. These are fluent, on-topic sentences that
  do not follow, the kind of wrong ending the other negatives are not.

Rows of one group come true sentence first, so held-out pairs can be scored as pair accuracy
(the true sentence above each of its negatives). A story's own group is its id; its generated
group is ``<id>/generated``.
"""
from __future__ import annotations

import random
from pathlib import Path

import datasets

from storyeval import text as textlib
from storyeval.checkpoints import resources
from storyeval_training.data.negatives.negation import alter_negation
from storyeval_training.data.negatives.substitution import substitute_keywords

KINDS = ("true", "other_story", "later_sentence", "perturbed", "generated")
GENERATED_GROUP_SUFFIX = "/generated"
AF_FILES = ("af_manplts_valid.tsv", "af_manplts_test.tsv")
PAIR_FEATURES = datasets.Features(
    {"group": datasets.Value("string"), "context": datasets.Value("string"), "candidate": datasets.Value("string"),
     "label": datasets.Value("int8"), "kind": datasets.Value("string")}
)


def story_cloze_keys(path) -> frozenset[str]:
    """Leakage keys (normalised first sentences) of the Story Cloze items."""
    from storyeval_training.data.continuation_data import read_story_cloze

    return frozenset(textlib.leakage_key(context) for context in read_story_cloze(path)["context"]) - {""}


def drop_leaked(stories: datasets.Dataset, keys: frozenset[str]) -> tuple[datasets.Dataset, int]:
    """The stories whose first sentence is not a key of ``keys``, and how many were dropped."""
    kept = stories.filter(lambda row: textlib.leakage_key(row["sentences"][0]) not in keys, desc="leakage check")
    return kept, len(stories) - len(kept)


def _perturb(sentence: str, rng: random.Random, lexicon) -> str | None:
    tokens = sentence.split()
    changed = alter_negation(tokens, rng)
    if changed is None and lexicon is not None:
        substituted = substitute_keywords([tokens], 0, rng, lexicon)
        changed = substituted[0] if substituted else None
    return " ".join(changed) if changed and changed != tokens else None


def build_pairs(stories: datasets.Dataset, seed: int = 42, lexicon=None) -> datasets.Dataset:
    """Pairs from ``stories`` (builder rows with ``id`` and ``sentences``); stories of one sentence give none."""
    usable = [(story_id, sentences) for story_id, sentences in zip(stories["id"], stories["sentences"]) if len(sentences) >= 2]
    if len(usable) < 2:
        raise ValueError(f"{len(usable)} stories of two sentences or more: need at least 2 (negatives come from another story)")
    rows = {name: [] for name in PAIR_FEATURES}

    def add(group, context, candidate, label, kind):
        for name, value in zip(PAIR_FEATURES, (group, context, candidate, label, kind)):
            rows[name].append(value)

    for index, (story_id, sentences) in enumerate(usable):
        rng = random.Random(f"{seed}:{story_id}")  # per story: the same pairs whatever the order
        k = rng.randrange(1, len(sentences))
        context, true = " ".join(sentences[:k]), sentences[k]
        add(story_id, context, true, 1, "true")
        for _ in range(10):  # another story whose sentence differs from the true one (duplicates are rare)
            other = rng.randrange(len(usable) - 1)
            other += other >= index  # never the story itself
            other_sentences = usable[other][1]
            candidate = other_sentences[min(k, len(other_sentences) - 1)]
            if candidate != true:
                add(story_id, context, candidate, 0, "other_story")
                break
        later = [s for s in sentences[k + 1 :] if s != true]
        if later:
            add(story_id, context, rng.choice(later), 0, "later_sentence")
        perturbed = _perturb(true, rng, lexicon)
        if perturbed is not None:
            add(story_id, context, perturbed, 0, "perturbed")
    return datasets.Dataset.from_dict(rows, features=PAIR_FEATURES)


def story_key(sentences: list[str]) -> str:
    """A tokenised story's words, lower-cased with names and placeholders folded into one symbol (as in
    :func:`storyeval.text.leakage_key`), to find one story in two corpora."""
    male, female = resources.first_names()
    words = (t.lower() for sentence in sentences for t in sentence.split() if any(c.isalnum() for c in t))
    return " ".join("<name>" if t in male or t in female or t.upper() in textlib.NAME_PLACEHOLDERS else t for t in words)


def generated_negatives(af_groups) -> dict[str, tuple[str, str, list[str]]]:
    """{story key: (context, true sentence, generated negatives)} from (human story, implausible stories) groups.

    Text is normalised as the builders normalise it (Treebank tokens, names delexicalised). The
    context is the sentences an implausible story shares with the human one, which must be at least
    one; the negative is its first sentence after them. Stories whose implausible versions depart at
    different sentences keep those departing where the first one does.
    """
    out = {}
    for human, implausible in af_groups:
        sentences = [textlib.normalize_story(s) for s in textlib.split_sentences(human)]
        found = None  # (shared sentences, negatives)
        for story in implausible:
            other = [textlib.normalize_story(s) for s in textlib.split_sentences(story)]
            shared = next((i for i, (a, b) in enumerate(zip(sentences, other)) if a != b), min(len(sentences), len(other)))
            if not 0 < shared < min(len(sentences), len(other)):
                continue  # nothing shared, or nothing after it
            if found is None:
                found = (shared, [])
            if shared == found[0] and other[shared] not in found[1] and other[shared] != sentences[shared]:
                found[1].append(other[shared])
        if found and found[1]:
            shared, negatives = found
            out[story_key(sentences)] = (" ".join(sentences[:shared]), sentences[shared], negatives)
    return out


def add_generated_groups(pairs: datasets.Dataset, stories: datasets.Dataset, generated: dict) -> datasets.Dataset:
    """``pairs`` with a ``generated`` group for each story of ``stories`` that ``generated`` has negatives for."""
    rows = {name: [] for name in PAIR_FEATURES}
    for story_id, sentences in zip(stories["id"], stories["sentences"]):
        found = generated.get(story_key(sentences))
        if found is None:
            continue
        context, true, negatives = found
        for candidate, label, kind in [(true, 1, "true")] + [(n, 0, "generated") for n in negatives]:
            for name, value in zip(PAIR_FEATURES, (story_id + GENERATED_GROUP_SUFFIX, context, candidate, label, kind)):
                rows[name].append(value)
    return datasets.concatenate_datasets([pairs, datasets.Dataset.from_dict(rows, features=PAIR_FEATURES)])


def pair_accuracy_by_kind(groups: list[str], kinds: list[str], scores: list[float]) -> dict[str, float]:
    """Share of (true, negative) pairs of a group where the true sentence scores higher (a tie counts half),
    per negative kind and over all pairs."""
    true_score: dict[str, float] = {}
    for group, kind, score in zip(groups, kinds, scores):
        if kind == "true":
            true_score[group] = score
    wins: dict[str, list[float]] = {}
    for group, kind, score in zip(groups, kinds, scores):
        if kind != "true" and group in true_score:
            gap = true_score[group] - score
            win = 1.0 if gap > 0 else 0.5 if gap == 0 else 0.0
            wins.setdefault(kind, []).append(win)
            wins.setdefault("all", []).append(win)
    if not wins:
        raise ValueError("no (true, negative) pairs to score")
    return {kind: sum(values) / len(values) for kind, values in wins.items()}


def build_splits(seed: int = 42, cache_dir: str | None = None, data_dir: Path | None = None, splits=("train", "validation"),
                 generated: bool = True):
    """Pairs of the ROC builder's ``splits``, Story Cloze stories dropped, with the ``generated`` groups of the
    stories the plot paper's released files cover (``generated=False``: without them); and the drop count per split.

    The builder splits stories by a hash of their text, so a released story's generated group lands in the
    split its story is in: none crosses from training into validation or the test split.
    """
    from storyeval_training import paths
    from storyeval_training.data.builders import ROCStories, load_split
    from storyeval_training.data.builders.roc import read_af_tsv
    from storyeval_training.data.negatives.substitution import KeywordLexicon

    root = Path(data_dir) if data_dir else paths.data_dir()
    keys = story_cloze_keys(root / "continuation" / "story_cloze_test_spring2016.tsv")
    lexicon = KeywordLexicon.from_data_dir(root)
    negatives = {}
    if generated:
        missing = [str(root / "roc" / name) for name in AF_FILES if not (root / "roc" / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{missing}: the plot paper's released implausible stories, which the generated negatives come from")
        for name in AF_FILES:
            negatives.update(generated_negatives(read_af_tsv(root / "roc" / name)))
    pairs, dropped = {}, {}
    for split in splits:
        # the default data folder keeps the builder's cache key (and its prepared copy)
        stories = load_split(ROCStories, split, cache_dir=cache_dir, **({"data_dir": str(root / "roc")} if data_dir else {}))
        kept, dropped[split] = drop_leaked(stories, keys)
        pairs[split] = build_pairs(kept, seed=seed, lexicon=lexicon)
        if negatives:
            pairs[split] = add_generated_groups(pairs[split], kept, negatives)
    return datasets.DatasetDict(pairs), dropped
