"""The extra WritingPrompts stories of ``wp_extra/`` (its README gives sources, licences and counts).

* ``human.jsonl``: human-written WP stories. :class:`~storyeval_training.data.builders.WritingPrompts`
  adds them to the plot-guided release with its ``extra`` config.
* ``machine.jsonl``: machine-written WP stories, each naming its ``generator`` and, for most, the human
  story (``human_id``) written for the same prompt or continuing the same opening.
  :class:`WritingPromptsMachine` loads them with their generator and pairing.

Both go through the WP builder's preprocessing (the 200-word cut at a sentence boundary, tokenising,
names replaced) and the leakage rule, so a machine story and its human story read alike.

Splits keep related stories on one side: stories under one prompt share a split; a story whose prompt
is also a ``wp_valid`` prompt (the README's ``shares_wp_valid_prompt``) joins that story's split; a
machine story joins its human story's split, and one without a pairing is split by its own id.
"""
from __future__ import annotations

import functools
import json
import logging
import re
from pathlib import Path
from typing import Iterator

import datasets

from storyeval import text as textlib
from storyeval.files import json_problem
from storyeval_training.data.builders.common import FEATURES, InputFormatError, StoryBuilder, StoryConfig, assign_split, open_lines, require_file

logger = logging.getLogger(__name__)

HUMAN_FILE, MACHINE_FILE = "human.jsonl", "machine.jsonl"
MACHINE_FEATURES = datasets.Features(
    {
        **FEATURES,
        "generator": datasets.Value("string"),
        "source": datasets.Value("string"),
        "variant": datasets.Value("string"),
        "human_id": datasets.Value("string"),  # "" when the source gives no pairing
        "preamble_stripped": datasets.Value("bool"),
    }
)

# The README's prompt key: the first 60 letters, lower-cased, of the prompt (or of the story's opening)
_PROMPT_KEY_LETTERS = 60
# A chat model's answer opens with a line about the answer, not the story ("Sure, here is...",
# "Here is a 5 sentence story...", "Title: ..."); such a line is cut so origin is not read off it.
_PREAMBLE = re.compile(
    r"^\s*(title\s*:|sure\b|certainly\b|of course\b|great\b|okay\b|ok\b|absolutely\b|here is\b|here's\b|here are\b)",
    re.IGNORECASE,
)
_PREAMBLE_MAX_WORDS = 60


def prompt_key(text: str) -> str:
    """The first 60 letters (a-z) of a prompt or opening, lower-cased: how wp_extra matches prompts."""
    return "".join(ch for ch in text.lower() if "a" <= ch <= "z")[:_PROMPT_KEY_LETTERS]


def strip_preamble(story: str) -> tuple[str, bool]:
    """The story without a chat model's opening line about its answer, and whether one was cut.

    Only a short first line is cut, or, where the story runs on in the same line, the part up to
    its first colon: a story that happens to begin with "Sure" in a longer line keeps it.
    """
    lines = story.strip().split("\n")
    first = lines[0]
    if not _PREAMBLE.match(first):
        return story, False
    if len(lines) > 1 and len(first.split()) <= _PREAMBLE_MAX_WORDS:
        return "\n".join(lines[1:]).strip(), True
    head, colon, rest = first.partition(":")
    if colon and len(head.split()) <= _PREAMBLE_MAX_WORDS and rest.strip():
        return "\n".join([rest.strip(), *lines[1:]]).strip(), True
    return story, False


def _json_rows(path: Path) -> Iterator[tuple[int, dict]]:
    for lineno, line in open_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputFormatError(path, lineno, json_problem(error)) from None
        if not isinstance(row, dict):
            raise InputFormatError(path, lineno, "expected a JSON object")
        yield lineno, row


def _require_text(row: dict, field: str, path: Path, lineno: int, allow_empty: bool = False) -> str:
    value = row.get(field)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise InputFormatError(path, lineno, f"row {row.get('id', '?')!r} has no {field!r} string")
    return value


def _sentences(story: str) -> list[str]:
    return [s for s in textlib.split_sentences(story.replace("\n", " ")) if s.strip()]


@functools.lru_cache(maxsize=4)
def wp_valid_splits(wp_dir: str, seed: int) -> dict[str, str]:
    """Prompt key -> split of the plot-guided WP stories, so a story with the same prompt joins it."""
    from storyeval_training.data.builders.wp import read_plot_guided

    return {prompt_key(raw["context"]): str(assign_split(raw["id"], seed)) for raw in read_plot_guided(Path(wp_dir))}


def read_human(path: Path, valid_splits: dict[str, str]) -> Iterator[dict]:
    """Raw examples (the builders' fields) of ``human.jsonl``, with their split group."""
    for lineno, row in _json_rows(path):
        story_id = _require_text(row, "id", path, lineno)
        prompt = _require_text(row, "prompt", path, lineno, allow_empty=True).strip()
        sentences = _sentences(_require_text(row, "story", path, lineno))
        if not sentences:
            raise InputFormatError(path, lineno, f"row {story_id!r}: empty story")
        yield {**_grouping(prompt, sentences, story_id, valid_splits), "id": story_id, "title": "", "sentences": sentences}


def _grouping(prompt: str, sentences: list[str], story_id: str, valid_splits: dict[str, str]) -> dict:
    """The context and split fields: the prompt, else the first sentence (the story's opening)."""
    key = prompt_key(prompt or sentences[0])
    fields = {"context": prompt, "context_is_first_sentence": not prompt, "group": f"wpx-{key}" if key else story_id}
    if key in valid_splits:
        fields["split"] = valid_splits[key]
    return fields


class WritingPromptsMachine(StoryBuilder):
    """Machine-written WritingPrompts stories with their generator and paired human story (``wp_extra/``).

    ``data_dir`` is the ``wp_extra`` folder (default: the shared data's); the plot-guided ``wp`` folder
    beside it fixes the splits of stories that share a ``wp_valid`` prompt.
    """

    BUILDER_CONFIGS = [StoryConfig(name="default", max_words=200)]
    DEFAULT_CONFIG_NAME = "default"

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(description=self.__doc__, features=MACHINE_FEATURES)

    def _sources(self, dl_manager):
        extra_dir = Path(self.config.data_dir) if self.config.data_dir else default_extra_dir()
        require_file(extra_dir / HUMAN_FILE)
        require_file(extra_dir / MACHINE_FILE)
        return {"extra_dir": str(extra_dir), "wp_dir": str(extra_dir.parent / "wp")}

    def _read_raw(self, sources):
        extra_dir = Path(sources["extra_dir"])
        valid_splits = wp_valid_splits(sources["wp_dir"], self.config.seed) if Path(sources["wp_dir"]).is_dir() else {}
        humans = {raw["id"]: raw for raw in read_human(extra_dir / HUMAN_FILE, valid_splits)}
        path = extra_dir / MACHINE_FILE
        for lineno, row in _json_rows(path):
            story_id = _require_text(row, "id", path, lineno)
            generator = row.get("generator")
            if not isinstance(generator, str) or not generator.strip():
                raise InputFormatError(path, lineno, f"machine story {story_id!r} names no generator")
            human_id = row.get("human_id") or ""
            if human_id and human_id not in humans:
                raise InputFormatError(path, lineno, f"machine story {story_id!r} is paired with unknown human id {human_id!r}")
            story, stripped = strip_preamble(_require_text(row, "story", path, lineno))
            sentences = _sentences(story)
            if not sentences:
                raise InputFormatError(path, lineno, f"row {story_id!r}: empty story")
            prompt = _require_text(row, "prompt", path, lineno, allow_empty=True).strip()
            grouping = _grouping(prompt, sentences, story_id, valid_splits)
            if human_id:  # a machine story goes wherever its human story goes
                human = humans[human_id]
                grouping.update(group=human["group"], split=human.get("split"))
            yield {
                **grouping,
                "id": story_id,
                "title": "",
                "sentences": sentences,
                "generator": generator.strip(),
                "source": str(row.get("source") or ""),
                "variant": str(row.get("variant") or ""),
                "human_id": human_id,
                "preamble_stripped": stripped,
            }

    def _preprocess(self, raw: dict) -> dict:
        return {**super()._preprocess(raw), **{name: raw[name] for name in ("generator", "source", "variant", "human_id", "preamble_stripped")}}

    def human_stories(self) -> dict[str, str]:
        """Human id -> the paired human story, preprocessed exactly as this config preprocesses the machine stories
        (the same cut, tokenising and names), so that a pair differs in its writer only."""
        extra_dir = Path(self._sources(None)["extra_dir"])
        blank = {"generator": "", "source": "", "variant": "", "human_id": "", "preamble_stripped": False}
        return {raw["id"]: self._preprocess({**raw, **blank})["story"] for raw in read_human(extra_dir / HUMAN_FILE, {})}


def default_extra_dir() -> Path:
    from storyeval_training import paths

    return paths.data_dir() / "wp_extra"
