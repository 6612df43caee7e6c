"""``storyeval score``: score a file of stories with a metric checkpoint.

    storyeval score stories.txt                       # one story per line -> one score per line
    storyeval score stories.jsonl --field story -o scored.jsonl
    storyeval score stories.csv --column text --metric union --config wp
    storyeval score stories.txt --metric plot_coherence --config roc

Input is read and scored in chunks, so files larger than memory stream
through. The output has the input's format: a score per line for ``.txt``;
each record with a ``score`` field added for ``.jsonl``; a ``score`` column
added for ``.csv`` (``--score-field`` names it). A one-line summary goes to stderr.
"""
from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Iterator

from tqdm.auto import tqdm

from storyeval import checkpoints
from storyeval.inputs import DTYPE_NAMES, has_words, not_unicode_text

FORMATS = (".txt", ".jsonl", ".csv")
STORY_METRICS = ["union", "plot_coherence"]  # metrics that score a story on its own
CHUNK = 1024  # stories read, scored and written at a time


class InputError(ValueError):
    pass


ALREADY_SCORED = "already has a {kind} {name!r}; choose another name for the scores with --score-field"


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


def read_stories(path: Path, fmt: str, field: str, score_field: str | None = None) -> Iterator[tuple[object, str]]:
    """(record, story) pairs; the record is what the writer extends with the score.

    With ``score_field``, an input that already has that field or column is refused.
    """
    if fmt == ".txt":
        for lineno, line in text_lines(path):
            story = line.removesuffix("\n").removesuffix("\r")
            if not has_words(story):
                raise InputError(f"{path}:{lineno}: empty line or no letters or digits (one story per line): {story!r}")
            yield None, story
    elif fmt == ".jsonl":
        for lineno, line in text_lines(path):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"{path}:{lineno}: not JSON ({error.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get(field), str):
                raise InputError(f"{path}:{lineno}: expected an object with a string field {field!r}")
            if not has_words(record[field]):
                raise InputError(f"{path}:{lineno}: {field!r} is empty or has no letters or digits: {record[field]!r}")
            if problem := not_unicode_text(record[field]):
                raise InputError(f"{path}:{lineno}: {field!r} {problem}")
            if score_field is not None and score_field in record:
                raise InputError(f"{path}:{lineno}: {ALREADY_SCORED.format(kind='field', name=score_field)}")
            yield record, record[field]
    else:
        # rows as lists, not dicts: a header may repeat a name (spreadsheets leave blank ones), and every
        # column must come back out as it went in
        rows = csv_rows(path)
        _, header = next(rows, (0, None))
        if header is None:
            return  # an empty file: no header, no stories
        if header.count(field) != 1:
            problem = "no column" if field not in header else "more than one column named"
            raise InputError(f"{path}: {problem} {field!r}; columns are {header}")
        if score_field is not None and score_field in header:
            raise InputError(f"{path}: {ALREADY_SCORED.format(kind='column', name=score_field)}")
        column = header.index(field)
        for lineno, row in rows:
            if not row:
                continue  # a blank line holds no record
            if len(row) > len(header):
                raise InputError(f"{path}:{lineno}: {len(row)} fields, but the header has {len(header)}")
            row += [""] * (len(header) - len(row))
            if not has_words(row[column]):
                raise InputError(f"{path}:{lineno}: {field!r} is empty or has no letters or digits: {row[column]!r}")
            yield row, row[column]


class Writer:
    def __init__(self, handle, fmt: str, fieldnames=None, score_field: str = "score"):
        self.handle, self.fmt, self.csv, self.score_field = handle, fmt, None, score_field
        if fmt == ".csv" and fieldnames:  # an empty input (no header) gives an empty output
            self.csv = csv.writer(handle)
            self.csv.writerow(list(fieldnames) + [score_field])

    def write(self, record, score: float) -> None:
        if self.fmt == ".txt":
            self.handle.write(f"{score:.6f}\n")
        elif self.fmt == ".jsonl":
            line = json.dumps({**record, self.score_field: score}, ensure_ascii=False)
            if not_unicode_text(line):
                # a lone surrogate in another field (a valid JSON escape) goes back out escaped, as it came in
                line = json.dumps({**record, self.score_field: score})
            self.handle.write(line + "\n")
        else:
            self.csv.writerow(record + [f"{score:.6f}"])


def count_records(path: Path, fmt: str) -> int | None:
    """Cheap total for the progress bar (a line count)."""
    with path.open("rb") as handle:
        lines = sum(1 for _ in handle)
    return max(lines - 1, 0) if fmt == ".csv" else lines


def load_scorer(metric: str, config: str, device):
    from storyeval import scoring

    return scoring.load_scorer(metric, checkpoints.resolve_checkpoint(metric, config), device=device)


def score_file(args) -> dict:
    path = Path(args.input)
    if not path.is_file():
        raise InputError(f"input file not found: {path}")
    fmt = path.suffix.lower()
    if fmt not in FORMATS:
        raise InputError(f"unsupported input format {fmt!r}; use one of {FORMATS}")
    # checked before scoring: writing onto the input would replace the stories with their scores
    if args.output and os.path.isdir(args.output):
        raise InputError(f"output {args.output} is a directory; give a file path")
    if args.output and os.path.exists(args.output) and os.path.samefile(args.output, path):
        raise InputError(f"output {args.output} is the input file; give another path")
    if args.output and not Path(args.output).resolve().parent.is_dir():
        raise InputError(f"output {args.output}: its folder does not exist")
    if args.quiet:  # transformers draws its own bar while it reads the weights
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    scorer = load_scorer(args.metric, args.config, args.device)
    fieldnames = None
    if fmt == ".csv":
        fieldnames = next(csv_rows(path), (0, []))[1]
    # an output file appears only when scoring succeeds: a bad line never truncates an old result
    partial = Path(str(args.output) + ".partial") if args.output else None
    out_handle = partial.open("w", encoding="utf-8", newline="") if partial else sys.stdout
    # write to a buffer per chunk, so a bad line later on leaves no half-written chunk behind
    total, summed, low, high = 0, 0.0, math.inf, -math.inf
    started = time.perf_counter()
    try:
        writer_buffer = io.StringIO()
        writer = Writer(writer_buffer, fmt, fieldnames, args.score_field)
        records = read_stories(path, fmt, args.column, args.score_field)
        with tqdm(total=count_records(path, fmt), disable=args.quiet, unit="story", desc=f"{args.metric}/{args.config}") as bar:
            while chunk := list(itertools.islice(records, CHUNK)):
                scores = scorer.score([story for _, story in chunk], batch_size=args.batch_size, dtype=args.dtype)
                for (record, _), score in zip(chunk, scores):
                    writer.write(record, score)
                out_handle.write(writer_buffer.getvalue())
                writer_buffer.seek(0)
                writer_buffer.truncate()
                total += len(scores)
                summed += sum(scores)
                low, high = min(low, *scores), max(high, *scores)
                bar.update(len(chunk))
        out_handle.write(writer_buffer.getvalue())  # a CSV header that no row followed
        if partial:  # inside the try, so a failed rename still removes the .partial file
            out_handle.close()
            partial.replace(args.output)
    except BaseException:
        if partial:
            out_handle.close()
            partial.unlink(missing_ok=True)
        raise
    seconds = time.perf_counter() - started
    if not total:
        low = high = math.nan
    summary = {"stories": total, "mean": summed / total if total else math.nan, "min": low, "max": high, "seconds": seconds}
    print(
        f"{args.metric}/{args.config}: {total} {'story' if total == 1 else 'stories'}, mean {summary['mean']:.4f} "
        f"(min {low:.4f}, max {high:.4f}), {total / max(seconds, 1e-9):.1f} stories/s",
        file=sys.stderr,
    )
    return summary


def push(args) -> int:
    from storyeval.hub import PushError, push_folder

    try:
        report = push_folder(args.folder, args.repo_id, dry_run=args.dry_run, private=args.private)
    # ValueError: a checkpoint of another metric; LookupError: missing NLTK data, as in `score`
    except (PushError, KeyError, OSError, ValueError, LookupError) as error:
        print(f"storyeval: error: {error}", file=sys.stderr)
        return 1
    for check in report.checks:
        print(f"ok: {check}", file=sys.stderr)
    action = "would upload" if args.dry_run else "uploaded"
    print(f"{action} {len(report.files)} files to {report.kind} repo {args.repo_id}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="storyeval", description="Reference-free story metrics.")
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score a .txt / .jsonl / .csv file of stories")
    score.add_argument("input", help="stories: .txt (one per line), .jsonl or .csv")
    score.add_argument("-o", "--output", help="output file (default: stdout), same format as the input")
    score.add_argument("--metric", default="union", choices=STORY_METRICS)
    score.add_argument("--config", default="roc", help="checkpoint: a config name, a folder or a Hub repo id")
    score.add_argument("--column", "--field", default="story", help="the story column (.csv) or field (.jsonl)")
    score.add_argument(
        "--score-field", default="score",
        help="the column (.csv) or field (.jsonl) the scores go in; must not already be in the input (default: score)",
    )
    score.add_argument("--batch-size", type=int, default=16)
    score.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1 (default: CUDA if available)")
    score.add_argument(
        "--dtype", default=None, choices=DTYPE_NAMES,
        help="weights' precision (default float32); bfloat16 is faster on CPUs with bf16 instructions; int8 runs an int8 copy "
        "in CTranslate2 (CPU only); scores move slightly, int8's more",
    )
    score.add_argument("--quiet", action="store_true", help="no progress bar")
    demo = commands.add_parser("demo", help="start the Gradio demo (needs the [demo] extra)")
    demo.add_argument("--metric", choices=["all", *STORY_METRICS, "continuation_quality"], default="all")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=7860)
    push = commands.add_parser("push", help="push a checkpoint, metric or dataset folder to the Hugging Face Hub")
    push.add_argument("folder", help="e.g. hub_cards/union-roc, metrics/union, spaces/storyeval")
    push.add_argument("--repo-id", required=True, help="owner/name on the Hub")
    push.add_argument("--dry-run", action="store_true", help="validate offline (card, files, checkpoint load); upload nothing")
    push.add_argument("--private", action="store_true")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from storyeval.demo import launch

        launch(args.metric, args.host, args.port)
        return 0
    if args.command == "push":
        return push(args)
    if args.batch_size < 1:
        print("storyeval: error: --batch-size must be positive", file=sys.stderr)
        return 2
    if not args.score_field.strip():  # a blank name would write a nameless CSV column
        print("storyeval: error: --score-field must be a non-blank name", file=sys.stderr)
        return 2
    if not args.config.strip():  # a blank name would mean the current folder
        print("storyeval: error: --config must be a config name, a folder or a Hub repo id", file=sys.stderr)
        return 2
    try:
        from storyeval.scoring import resolve_device

        resolve_device(args.device)  # a bad --device fails before the model loads or the input is read
        score_file(args)
    except IndexError:
        raise  # a LookupError too, but a bug here, not bad input: keep its traceback
    # ImportError: an optional runtime (dtype int8) is missing; its message says what to install
    except (InputError, LookupError, OSError, ValueError, TypeError, ImportError) as error:  # LookupError: unknown config, missing NLTK data
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"storyeval: error: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
