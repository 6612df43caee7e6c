"""Pieces shared by the ROCStories and WritingPrompts builders."""
from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import logging
from collections import Counter
from pathlib import Path
from typing import Iterator

import datasets
from datasets.exceptions import DatasetGenerationError

from storyeval import text as textlib
from storyeval_training.export import provenance

logger = logging.getLogger(__name__)

SPLITS = (datasets.Split.TRAIN, datasets.Split.VALIDATION, datasets.Split.TEST)
# cumulative upper bounds, in percent, of the 90/5/5 split
_SPLIT_BOUNDS = ((90, datasets.Split.TRAIN), (95, datasets.Split.VALIDATION), (100, datasets.Split.TEST))

FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "title": datasets.Value("string"),
        # the leading sentence (ROC) or the prompt (WP): never perturbed
        "context": datasets.Value("string"),
        "story": datasets.Value("string"),
        "sentences": datasets.List(datasets.Value("string")),
        # one list of keywords / verb-argument phrases per story sentence; empty if the source has none
        "plot": datasets.List(datasets.List(datasets.Value("string"))),
        "manipulated_plot": datasets.List(datasets.List(datasets.Value("string"))),
    }
)


# the code that reads, screens, splits and preprocesses the stories
BUILDERS_CODE = provenance.source_hash([*(provenance.TRAINING / "data" / "builders").glob("*.py"), *provenance.TEXT_PIPELINE])


@dataclasses.dataclass
class StoryConfig(datasets.BuilderConfig):
    """Preprocessing switches, as in the UNION paper. Every one is part of the cache key."""

    tokenize: bool = True  # lower-case and Penn-Treebank tokenise
    delexicalize: bool = True  # person names -> [MALE] / [FEMALE] / [NEUTRAL]
    max_words: int = 0  # truncate stories at a sentence boundary; 0 keeps them whole
    drop_human_judged: bool = True  # the leakage filter
    human_dir: str | None = None  # the human-judged sets it screens against (default: beside data_dir, else the shared data)
    seed: int = 42  # seeds the 90/5/5 split


class InputFormatError(ValueError):
    """A data file line that cannot be parsed; the message names file and line."""

    def __init__(self, path, lineno: int, problem: str):
        super().__init__(f"{path}:{lineno}: {problem}")


def assign_split(story_id: str, seed: int) -> str:
    """Deterministic 90/5/5 split from a hash of (seed, id).

    Hashing rather than shuffling keeps a story in the same split when other
    stories are added or removed.
    """
    digest = hashlib.blake2b(f"{seed}:{story_id}".encode(), digest_size=8).digest()
    bucket = int.from_bytes(digest, "big") % 100
    return next(split for bound, split in _SPLIT_BOUNDS if bucket < bound)


def content_id(prefix: str, *parts: str) -> str:
    """A stable id for sources that have none: a hash of the raw text."""
    return f"{prefix}-" + hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


def require_file(path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    return path


def open_lines(path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without newline); a clear error for a missing file."""
    path = require_file(path)
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            yield lineno, line.rstrip("\n")


def preprocess_sentences(sentences: list[str], config: StoryConfig) -> list[str]:
    """Apply the config's switches to a story's sentences."""
    if config.tokenize or config.delexicalize:
        processed = []
        for sentence in sentences:
            cased = textlib.is_cased(sentence)
            tokens = textlib.tokenize(sentence, lowercase=False)
            if config.delexicalize:
                tokens = textlib.delexicalize(tokens, cased=cased)
            if config.tokenize:
                tokens = [t if t in textlib.NAME_PLACEHOLDERS else t.lower() for t in tokens]
                processed.append(" ".join(tokens))
            else:
                # only delexicalise: put the names back into the untouched text
                processed.append(_replace_names(sentence, cased))
        sentences = processed
    if config.max_words:
        sentences = textlib.truncate_sentences(sentences, config.max_words)
    return sentences


def _replace_names(sentence: str, cased: bool) -> str:
    words = sentence.split(" ")
    return " ".join(textlib.name_gender(w, cased) or w for w in words)


@functools.lru_cache(maxsize=4)
def human_judged_keys(human_dir: str) -> frozenset[str]:
    """Leakage keys (normalised first sentences) of every human-judged item."""
    root = Path(human_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"human-judgment folder not found: {root}")
    keys = set()
    for path in sorted(root.glob("union_*/ant_data.txt")):
        for lineno, line in open_lines(path):
            fields = line.split("|||")
            if len(fields) < 3:
                raise InputFormatError(path, lineno, "expected 'id ||| story ||| votes'")
            keys.add(textlib.leakage_key(fields[1]))
    # reference*.txt hold UNION's whole test set (ant_data ids index into it);
    # only the judged items count, and their contexts are the ant_data openings.
    for path in sorted(root.glob("plot_amt_roc/*.csv")):
        with path.open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                for column, value in row.items():
                    if column and column.startswith("Input.text") and value:
                        keys.add(textlib.leakage_key(value))
    keys.discard("")
    return frozenset(keys)


class StoryBuilder(datasets.GeneratorBasedBuilder):
    """Base class: reads raw stories, filters leakage, splits, preprocesses."""

    BUILDER_CONFIG_CLASS = StoryConfig
    VERSION = datasets.Version("1.0.0")

    def __init__(self, *args, **kwargs):
        # the cache folder is keyed by this code's hash (datasets does so for loading scripts, not
        # for builder classes), so a fix to the preprocessing is never hidden by a prepared copy
        kwargs.setdefault("hash", BUILDERS_CODE)
        super().__init__(*args, **kwargs)

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(description=self.__doc__, features=FEATURES)

    def _split_generators(self, dl_manager):
        sources = self._sources(dl_manager)
        if self.config.drop_human_judged:
            # read (and cached) here, so a missing folder is its own error, not one datasets wraps during generation
            human_judged_keys(self._human_dir())
        return [datasets.SplitGenerator(name=split, gen_kwargs={"split": split, "sources": sources}) for split in SPLITS]

    def _sources(self, dl_manager):
        raise NotImplementedError

    def _read_raw(self, sources) -> Iterator[dict]:
        """Yield raw examples (fields as in FEATURES, text not yet preprocessed)."""
        raise NotImplementedError

    def _human_dir(self) -> str:
        """The human-judged sets: ``human_dir``, else ``human/`` beside a given ``data_dir`` (the shared
        data's layout: roc/, wp/, human/), else the shared data's."""
        from storyeval_training import paths

        if self.config.human_dir:
            return self.config.human_dir
        if self.config.data_dir and (Path(self.config.data_dir).parent / "human").is_dir():
            return str(Path(self.config.data_dir).parent / "human")
        return str(paths.data_dir() / "human")

    def _screened(self, sources) -> Iterator[tuple[dict, bool]]:
        """Every distinct raw story, and whether the leakage filter drops it."""
        keys = human_judged_keys(self._human_dir()) if self.config.drop_human_judged else frozenset()
        seen = set()
        for raw in self._read_raw(sources):
            if raw["id"] in seen:  # the same story in two source files
                continue
            seen.add(raw["id"])
            # a story with no prompt is matched by its opening sentence
            opening = raw["context"] or next(iter(raw["sentences"]), "")
            yield raw, bool(keys) and textlib.leakage_key(opening) in keys

    def leakage_dropped(self) -> Counter:
        """Stories the leakage filter drops, by the split each would have joined.

        Re-reads the sources (seconds): the prepared dataset does not keep the
        count, and a load from the cache logs nothing.
        """
        dl_manager = getattr(self, "dl_manager", None) or datasets.DownloadManager()
        screened = self._screened(self._sources(dl_manager))
        return Counter(str(self._split_of(raw)) for raw, leaked in screened if leaked)

    def _split_of(self, raw: dict) -> str:
        """A raw story's split: its own ``split`` where the reader fixed one (a story that must follow
        another, e.g. one that shares its prompt), else the hash of its ``group`` (stories under one
        prompt stay together), else of its id."""
        return raw.get("split") or assign_split(raw.get("group") or raw["id"], self.config.seed)

    def _generate_examples(self, split, sources):
        dropped = 0
        for raw, leaked in self._screened(sources):
            if leaked:
                dropped += 1
                continue
            if self._split_of(raw) != split:
                continue
            yield raw["id"], self._preprocess(raw)
        if self.config.drop_human_judged and split == datasets.Split.TRAIN:  # every split sees every story: log once
            logger.warning(
                "%s: leakage filter dropped %d stories whose first sentence opens a human-judged item (all splits)",
                self.name,
                dropped,
            )

    def _preprocess(self, raw: dict) -> dict:
        sentences = preprocess_sentences(raw["sentences"], self.config)
        context = preprocess_sentences([raw["context"]], dataclasses.replace(self.config, max_words=0))[0]
        if raw.get("context_is_first_sentence"):
            context = sentences[0]
        return {
            "id": raw["id"],
            "title": raw.get("title", ""),
            "context": context,
            "story": " ".join(sentences),
            "sentences": sentences,
            "plot": raw.get("plot", []),
            "manipulated_plot": raw.get("manipulated_plot", []),
        }


def prepare(builder: datasets.DatasetBuilder) -> None:
    """``download_and_prepare``, re-raising our own input errors unwrapped.

    `datasets` wraps any error raised while generating in a generic
    ``DatasetGenerationError``; the file-and-line message is the useful part.
    """
    try:
        builder.download_and_prepare()
    except DatasetGenerationError as error:
        cause = error.__cause__ or error.__context__
        if isinstance(cause, (InputFormatError, FileNotFoundError)):
            raise cause from None
        raise


def load_split(builder_cls, split: str = "train", cache_dir: str | None = None, **config_kwargs) -> datasets.Dataset:
    """Prepare (or reuse from the `datasets` cache) and return one split."""
    builder = builder_cls(cache_dir=cache_dir, **config_kwargs)
    prepare(builder)
    return builder.as_dataset(split=split)
