"""ROCStories (Mostafazadeh et al., 2016) as a `datasets` builder.

Two input formats:

* the official release CSV (``storyid, storytitle, sentence1..sentence5``), the
  file users download: pass it with ``data_files``;
* the plot-guided release (Ghazarian et al., 2021) in ``data_dir``: one story a
  line, ``title <EOT> storyline <EOL> </s> s1 </s> ... </s> s5 @``, where the
  storyline has tab-separated keywords and ``#`` between sentences, plus the
  paper's manipulated storylines line-aligned in ``manplts_*.txt``.

The same release's adversarially filtered stories (``af_manplts_*.tsv``: each human
story followed by its implausible ones) are read by :func:`read_af_tsv`, for the
plot-coherence classifier and continuation quality's encoder.

Example::

    from storyeval_training.data.builders import ROCStories, load_split
    train = load_split(ROCStories, "train")                       # ../shared/data/roc
    train = load_split(ROCStories, "train", data_files=["ROCStories_winter2017.csv"])
"""
from __future__ import annotations

import csv
from pathlib import Path

from storyeval_training.data.builders.common import InputFormatError, StoryBuilder, content_id, open_lines, require_file

# story file -> its line-aligned manipulated-plot file (None: the paper released none)
PLOT_GUIDED_FILES = {
    "rocstories_train.txt": "manplts_train.txt",
    "rocstories_dev.txt": "manplts_valid.txt",
    "rocstories_test.txt": "manplts_test.txt",
    "rocstories_lm_dev.txt": None,
}
CSV_COLUMNS = ["storyid", "storytitle"] + [f"sentence{i}" for i in range(1, 6)]


def parse_storyline(storyline: str) -> list[list[str]]:
    """``kw1\\tkw2\\t#\\tkw3`` -> [["kw1", "kw2"], ["kw3"]]."""
    return [[kw.strip() for kw in part.split("\t") if kw.strip()] for part in storyline.split("#")]


def parse_plot_guided_line(line: str, path, lineno: int) -> dict:
    try:
        head, body = line.split("<EOL>", 1)
        title, storyline = head.split("<EOT>", 1)
    except ValueError:
        raise InputFormatError(path, lineno, "expected 'title <EOT> storyline <EOL> </s> sentence ...'") from None
    body = body.strip()
    if body.endswith("@"):
        body = body[:-1]
    sentences = [s.strip() for s in body.split("</s>") if s.strip()]
    if not sentences:
        raise InputFormatError(path, lineno, "empty story")
    return {
        "id": content_id("roc", *sentences),
        "title": title.strip(),
        "context": sentences[0],
        "context_is_first_sentence": True,
        "sentences": sentences,
        "plot": parse_storyline(storyline.strip()),
    }


def read_plot_guided(story_path, manplts_path=None):
    manplts = None
    if manplts_path is not None:
        manplts = [line for _, line in open_lines(manplts_path)]
    for lineno, line in open_lines(story_path):
        if not line.strip():
            continue
        raw = parse_plot_guided_line(line, story_path, lineno)
        if manplts is not None:
            if lineno > len(manplts):
                raise InputFormatError(manplts_path, len(manplts), f"has fewer lines than {story_path}")
            raw["manipulated_plot"] = parse_storyline(manplts[lineno - 1])
        yield raw


def read_official_csv(path):
    path = require_file(path)
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputFormatError(path, 1, f"missing columns {missing}; expected {CSV_COLUMNS}")
        for row in reader:
            lineno = reader.line_num
            sentences = [(row[f"sentence{i}"] or "").strip() for i in range(1, 6)]
            if not all(sentences):
                raise InputFormatError(path, lineno, "empty sentence in story " + repr(row["storyid"]))
            yield {
                "id": row["storyid"].strip(),
                "title": (row["storytitle"] or "").strip(),
                "context": sentences[0],
                "context_is_first_sentence": True,
                "sentences": sentences,
            }


def read_af_tsv(path) -> list[tuple[str, list[str]]]:
    """(human story, its negatives) groups from an ``index \\t label \\t group \\t story`` file.

    Each human story (label 1) is followed by its negatives (label 0).
    """
    groups: list[tuple[str, list[str]]] = []
    for lineno, line in open_lines(path):
        fields = line.split("\t")
        if len(fields) != 4 or fields[1] not in ("0", "1"):
            raise InputFormatError(path, lineno, "expected 'index \\t label(0/1) \\t group \\t story'")
        story = " ".join(fields[3].replace("</s>", " ").split())
        if fields[1] == "1":
            groups.append((story, []))
        elif not groups:
            raise InputFormatError(path, lineno, "a negative before any human story")
        else:
            groups[-1][1].append(story)
    return groups


class ROCStories(StoryBuilder):
    """ROCStories five-sentence stories; context = the first sentence."""

    def _sources(self, dl_manager):
        if self.config.data_files:
            files = [f for split_files in self.config.data_files.values() for f in split_files]
            for path in files:
                require_file(path)
            return {"csv": dl_manager.download(files)}
        data_dir = Path(self.config.data_dir) if self.config.data_dir else _default_dir()
        pairs = []
        for story_file, manplts_file in PLOT_GUIDED_FILES.items():
            if (data_dir / story_file).exists():
                pairs.append((str(data_dir / story_file), str(data_dir / manplts_file) if manplts_file else None))
        if not pairs:
            raise FileNotFoundError(f"no ROCStories files ({', '.join(PLOT_GUIDED_FILES)}) in {data_dir}")
        return {"plot_guided": pairs}

    def _read_raw(self, sources):
        for path in sources.get("csv", []):
            yield from read_official_csv(path)
        for story_path, manplts_path in sources.get("plot_guided", []):
            yield from read_plot_guided(story_path, manplts_path)


def _default_dir() -> Path:
    from storyeval_training import paths

    return paths.data_dir() / "roc"
