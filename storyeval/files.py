"""Story files: the formats ``storyeval score`` and the demo read and write.

``.txt`` holds one story per line; ``.jsonl`` one object per line with the
story in a field; ``.csv`` a header and the story in a column. Reading is
lazy (files larger than memory stream through) and every error names its
file and line. A text that cannot be scored (empty, no letters, a lone
surrogate, clearly not English) is not a format error: readers hand it over with
its problem, and the caller decides whether it stops the run.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from storyeval.inputs import NO_LETTERS, not_unicode_text, preview, unscorable

FORMATS = (".txt", ".jsonl", ".csv")


class InputError(ValueError):
    """A file that cannot be read as the stories it claims to hold; the message names the file and line."""


ALREADY_SCORED = "already has a {kind} {name!r}; choose another name for the scores with --score-field"


@dataclass
class Row:
    """One input record: where it is, what the writer extends, and its texts by field."""

    line: int
    record: object  # None (.txt), a dict (.jsonl) or a list of fields (.csv)
    texts: dict[str, str]
    whole_line: bool = False  # a .txt line, whose text has no field name

    def problem(self) -> str | None:
        """Why a text of this row cannot be scored, naming the field, or None."""
        found = self.unscorable()
        return found[1] if found else None

    def unscorable(self) -> tuple[str, str] | None:
        """(reason, message) for the first text of this row that cannot be scored (storyeval.inputs.unscorable), or None."""
        for field, text in self.texts.items():
            if found := unscorable(text):
                reason, message = found
                if reason == NO_LETTERS and self.whole_line:
                    return reason, f"empty line or no letters (one story per line): {preview(text)}"
                return reason, f"{'the line' if self.whole_line else repr(field)} {message}"
        return None


def file_format(path: str | Path) -> str:
    """The format a path's extension names, or an :class:`InputError` listing the ones there are."""
    fmt = Path(path).suffix.lower()
    if fmt not in FORMATS:
        # Parquet is read by the sharded scorer (Ray Data), which writes Parquet parts; pointing there saves a conversion
        hint = ", or for Parquet put the file in a folder and run `storyeval score-shards <folder> -o <output folder>`" if fmt == ".parquet" else ""
        raise InputError(f"{path}: unsupported input format {fmt or '(no extension)'!r}; use one of {', '.join(FORMATS)}{hint}")
    return fmt


def json_problem(error: json.JSONDecodeError) -> str:
    """A JSON error in full, with where on the line it is: the message alone can stop short
    ("Invalid control character at"), and the line number is the file's, not the decoder's 1."""
    return f"not JSON ({error.msg}: column {error.colno})"


def json_records(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, decoded value) of each line of a JSON Lines file that is not blank; an
    :class:`InputError` names the first line that is not JSON."""
    for lineno, line in text_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{lineno}: {json_problem(error)}") from None
        yield lineno, record


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 file, split at "\n" only.

    Read as bytes and decoded line by line, so an error names its line, and a lone
    carriage return stays inside its story instead of starting a new one (a text file
    handle would split there, while the progress bar counts only "\n").
    """
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, 1):
            try:
                # utf-8-sig drops the byte order mark Excel and Notepad put before the first header or story
                yield lineno, raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise InputError(f"{path}:{lineno}: not UTF-8 text (byte {raw[error.start]:#04x} at position {error.start} of the line)") from None


def csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, row) of a CSV file; a field may hold a story of any length."""
    # the csv module refuses fields over 128 KiB by default; the platform's C long bounds the limit
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    reader = csv.reader(line for _, line in text_lines(path))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise InputError(f"{path}:{reader.line_num}: not valid CSV ({error})") from None
        yield reader.line_num, row


def csv_header(path: Path) -> list[str]:
    """The header of a CSV file ([] for an empty file)."""
    return next(csv_rows(path), (0, []))[1]


def read_rows(path: Path, fmt: str, fields: list[str], reserved: list[str] = ()) -> Iterator[Row]:
    """The rows of a story file, with the text of each of ``fields`` (.jsonl fields, .csv columns).

    A ``.txt`` line is one text under the first field's name. An input that already has one
    of the ``reserved`` names (where the scores will go) is refused.
    """
    if fmt == ".txt":
        if len(fields) > 1:
            raise InputError(f"{path}: a .txt file holds one text per line; {' and '.join(map(repr, fields))} need a .jsonl or .csv file")
        for lineno, line in text_lines(path):
            yield Row(lineno, None, {fields[0]: line.removesuffix("\n").removesuffix("\r")}, whole_line=True)
    elif fmt == ".jsonl":
        for lineno, record in json_records(path):
            for field in fields:
                if not isinstance(record, dict) or not isinstance(record.get(field), str):
                    raise InputError(f"{path}:{lineno}: expected an object with a string field {field!r}")
            for name in reserved:
                if name in record:
                    raise InputError(f"{path}:{lineno}: {ALREADY_SCORED.format(kind='field', name=name)}")
            yield Row(lineno, record, {field: record[field] for field in fields})
    else:
        # rows as lists, not dicts: a header may repeat a name (spreadsheets leave blank ones), and every
        # column must come back out as it went in
        rows = csv_rows(path)
        _, header = next(rows, (0, None))
        if header is None:
            return  # an empty file: no header, no stories
        for field in fields:
            if header.count(field) != 1:
                problem = "no column" if field not in header else "more than one column named"
                raise InputError(f"{path}: {problem} {field!r}; columns are {header}")
        for name in reserved:
            if name in header:
                raise InputError(f"{path}: {ALREADY_SCORED.format(kind='column', name=name)}")
        columns = {field: header.index(field) for field in fields}
        for lineno, row in rows:
            if not row:
                continue  # a blank line holds no record
            if len(row) > len(header):
                raise InputError(f"{path}:{lineno}: {len(row)} fields, but the header has {len(header)}")
            row += [""] * (len(header) - len(row))
            yield Row(lineno, row, {field: row[column] for field, column in columns.items()})


def read_stories(path: Path, fmt: str, field: str, reserved: list[str] = ()) -> Iterator[tuple[object, str]]:
    """(record, story) pairs; a story that cannot be scored is an :class:`InputError`."""
    for row in read_rows(path, fmt, [field], reserved):
        if problem := row.problem():
            raise InputError(f"{path}:{row.line}: {problem}")
        yield row.record, row.texts[field]


def format_score(value: float) -> str:
    """A score as text, the one rule of every format: the shortest text that reads back as the same float
    (what JSON writes), so no format rounds, two runs compare exactly, and NaN reads back as NaN."""
    return repr(float(value))


class Writer:
    """Writes rows in the input's format, extended by the score ``columns``. A row that was not scored (NaN)
    is written as ``nan`` in .txt and .csv, and as ``null`` in .jsonl (JSON has no NaN, and strict parsers refuse it)."""

    def __init__(self, handle, fmt: str, columns: list[str], fieldnames=None, constants: dict[str, str] | None = None):
        self.handle, self.fmt, self.columns, self.csv = handle, fmt, columns, None
        self.constants = constants or {}  # fields every .jsonl record gets (the score settings)
        if fmt == ".txt" and len(columns) != 1:
            raise InputError(f"a .txt output holds one score per line; {columns} need a .jsonl or .csv output")
        if fmt == ".csv" and fieldnames:  # an empty input (no header) gives an empty output
            self.csv = csv.writer(handle)
            self.csv.writerow(list(fieldnames) + columns)

    def write(self, record, scores: list[float]) -> None:
        if self.fmt == ".txt":
            self.handle.write(format_score(scores[0]) + "\n")
        elif self.fmt == ".jsonl":
            # a row that was not scored gets null: json would write NaN, which strict JSON parsers refuse
            scores = [None if math.isnan(score) else score for score in scores]
            fields = {**record, **dict(zip(self.columns, scores)), **self.constants}
            line = json.dumps(fields, ensure_ascii=False)
            if not_unicode_text(line):
                # a lone surrogate in another field (a valid JSON escape) goes back out escaped, as it came in
                line = json.dumps(fields)
            self.handle.write(line + "\n")
        else:
            self.csv.writerow(record + [format_score(score) for score in scores])


@dataclass
class Survey:
    """What a whole story file holds, read before anything is scored: its rows, the unscorable ones and the long ones."""

    rows: int = 0
    invalid: dict[int, str] = dataclasses.field(default_factory=dict)  # line -> why it cannot be scored, in file order
    first_problem: tuple[int, str] | None = None  # the first unscorable row's line and message
    long_lines: list[int] = dataclasses.field(default_factory=list)  # lines with a text of more than LONG_TEXT characters

    def by_reason(self) -> dict[str, list[int]]:
        grouped: dict[str, list[int]] = {}
        for line, reason in self.invalid.items():
            grouped.setdefault(reason, []).append(line)
        return grouped


# a text longer than this (about 1,800 words) might need more windows than a scorer takes, which only its tokenizer
# can tell; the command line checks those texts with the scorer before it scores the file. Below it, even one token per
# character stays under the smallest limit shipped (16,446 tokens: plot-coherence-roc's 128-token windows). A bound on
# the work saved, not on correctness: a story past the limit is refused in any case
LONG_TEXT = 10_000


def survey_rows(path: Path, fmt: str, fields: list[str], reserved: list[str] = ()) -> Survey:
    """Read a whole story file once, as cheaply as reading goes: an :class:`InputError` at the first line that is not
    the format, else what it holds. Parsing takes a small fraction of the time scoring takes, so a broken line at the
    end of a file is found before any story is scored."""
    survey = Survey()
    for row in read_rows(path, fmt, fields, reserved):
        survey.rows += 1
        if found := row.unscorable():
            survey.invalid[row.line] = found[0]
            survey.first_problem = survey.first_problem or (row.line, found[1])
        elif any(len(text) > LONG_TEXT for text in row.texts.values()):
            survey.long_lines.append(row.line)
    return survey


_CSV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")  # a header's column name, as sniffed_format recognises one


def sniffed_format(path: Path, column: str) -> str | None:
    """Whether a file read as .txt (one story per line) looks like another format, by its first line that is not
    blank: ".jsonl" for a JSON object, ".csv" for a header (comma-separated names, one of them ``column``, or
    several names with no space anywhere in the line); None otherwise."""
    for _, line in text_lines(path):
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                return ".jsonl" if isinstance(json.loads(line), dict) else None
            except json.JSONDecodeError:
                return None
        names = next(csv.reader([line]), [])
        if len(names) > 1 and (column in (name.strip() for name in names)
                               or (not any(c.isspace() for c in line) and all(_CSV_NAME.fullmatch(n) for n in names))):
            return ".csv"
        return None
    return None

