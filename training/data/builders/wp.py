"""WritingPrompts (Fan et al., 2018) as a `datasets` builder.

Two input formats:

* the official release: ``*.wp_source`` (prompts, tagged ``[ WP ]``) and
  ``*.wp_target`` (stories with ``<newline>`` tokens), line-aligned; pass the
  target files with ``data_files`` and the sources are found beside them;
* the plot-guided release in ``data_dir``: ``wp_valid.target`` (``</s>``
  between sentences), ``wp_valid.source`` (SRL-style plots),
  ``manplts_prompt_valid.txt`` (``prompt <EOL> manipulated plot``).

UNION truncates WP stories to about 200 words at a sentence boundary; that is
``max_words=200`` here (the default for this builder).

The ``extra`` config adds the human stories of ``wp_extra/human.jsonl`` (beside ``data_dir``, or
``extra_dir``) to the plot-guided release; the plot-guided stories keep the splits they have in
``default``. Machine-written stories load with :class:`~storyeval_training.data.builders.WritingPromptsMachine`.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from storyeval import text as textlib
from storyeval_training.data.builders import wp_extra
from storyeval_training.data.builders.common import InputFormatError, StoryBuilder, StoryConfig, content_id, open_lines, require_file

_PROMPT_TAG = re.compile(r"^\s*(\[\s*\w+\s*\]\s*)+")


def clean_prompt(prompt: str) -> str:
    """Drop the ``[ WP ]``-style tags that open official prompts."""
    return _PROMPT_TAG.sub("", prompt).strip()


def parse_plot(plot: str) -> list[list[str]]:
    """``v1\\targ1\\t</s>\\tv2`` -> [["v1", "arg1"], ["v2"]] (one list per sentence, may be empty)."""
    return [[p.strip() for p in part.split("\t") if p.strip()] for part in plot.split("</s>")]


def read_official(target_path):
    target_path = Path(target_path)
    source_path = target_path.with_suffix(".wp_source")
    prompts = [line for _, line in open_lines(source_path)]
    for lineno, line in open_lines(target_path):
        if lineno > len(prompts):
            raise InputFormatError(source_path, len(prompts), f"has fewer lines than {target_path}")
        story = line.replace("<newline>", "\n")
        sentences = [s for s in textlib.split_sentences(story.replace("\n", " ")) if s]
        if not sentences:
            raise InputFormatError(target_path, lineno, "empty story")
        prompt = clean_prompt(prompts[lineno - 1])
        if not prompt:
            raise InputFormatError(source_path, lineno, "empty prompt")
        yield {"id": content_id("wp", prompt, line), "context": prompt, "sentences": sentences}


def read_plot_guided(data_dir: Path):
    plots = [line for _, line in open_lines(data_dir / "wp_valid.source")]
    prompted = [line for _, line in open_lines(data_dir / "manplts_prompt_valid.txt")]
    target = data_dir / "wp_valid.target"
    for lineno, line in open_lines(target):
        if lineno > min(len(plots), len(prompted)):
            raise InputFormatError(target, lineno, "has no matching line in wp_valid.source / manplts_prompt_valid.txt")
        sentences = [s.strip() for s in line.split("</s>") if s.strip()]
        if not sentences:
            raise InputFormatError(target, lineno, "empty story")
        if "<EOL>" not in prompted[lineno - 1]:
            raise InputFormatError(data_dir / "manplts_prompt_valid.txt", lineno, "expected 'prompt <EOL> plot'")
        prompt, manipulated = prompted[lineno - 1].split("<EOL>", 1)
        yield {
            "id": content_id("wp", prompt.strip(), line),
            "context": prompt.strip(),
            "sentences": sentences,
            "plot": parse_plot(plots[lineno - 1]),
            "manipulated_plot": parse_plot(manipulated.strip()),
        }


@dataclasses.dataclass
class WritingPromptsConfig(StoryConfig):
    extra_dir: str | None = None  # the ``extra`` config's wp_extra folder (default: beside data_dir)


class WritingPrompts(StoryBuilder):
    """WritingPrompts stories; context = the prompt (a story without one: its first sentence)."""

    BUILDER_CONFIG_CLASS = WritingPromptsConfig
    BUILDER_CONFIGS = [
        WritingPromptsConfig(name="default", max_words=200),
        WritingPromptsConfig(name="extra", max_words=200, description="the plot-guided release and wp_extra/human.jsonl"),
    ]
    DEFAULT_CONFIG_NAME = "default"

    def _sources(self, dl_manager):
        if self.config.data_files:
            files = [f for split_files in self.config.data_files.values() for f in split_files]
            targets = [f for f in files if str(f).endswith(".wp_target")]
            if len(targets) != len(files):
                raise ValueError("WritingPrompts data_files must be *.wp_target files (sources are read beside them)")
            for target in targets:  # fail before generation starts, naming the file
                require_file(Path(target).with_suffix(".wp_source"))
            if self.config.name == "extra":
                raise ValueError("the extra config reads the plot-guided release from data_dir, not data_files")
            return {"official": targets}
        data_dir = Path(self.config.data_dir) if self.config.data_dir else _default_dir()
        for name in ("wp_valid.target", "wp_valid.source", "manplts_prompt_valid.txt"):
            require_file(data_dir / name)
        sources = {"plot_guided": str(data_dir)}
        if self.config.name == "extra":
            extra_dir = Path(self.config.extra_dir) if self.config.extra_dir else data_dir.parent / "wp_extra"
            sources["extra_human"] = str(require_file(extra_dir / wp_extra.HUMAN_FILE))
        return sources

    def _read_raw(self, sources):
        for target in sources.get("official", []):
            yield from read_official(target)
        if "plot_guided" in sources:
            yield from read_plot_guided(Path(sources["plot_guided"]))
        if "extra_human" in sources:
            valid_splits = wp_extra.wp_valid_splits(sources["plot_guided"], self.config.seed)
            yield from wp_extra.read_human(Path(sources["extra_human"]), valid_splits)


def _default_dir() -> Path:
    from storyeval_training import paths

    return paths.data_dir() / "wp"
