"""The shards of ``storyeval score-shards``: which files of a folder are shards, what each holds, checked whole
before Ray starts, and how Ray reads them.

A shard is read here as Ray's reader will read it (the same pyarrow reader and options), after a pass of its own
that names the line of the first problem: a line that is not JSON or CSV, a record that is not an object, a text
field missing or holding something else than text, a field that changes type. So a shard that passes here reads
there, and a broken one is refused in one line before any actor starts, instead of failing the job mid-way.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from storyeval.files import InputError, csv_rows, json_records

READERS = {".parquet": "read_parquet", ".jsonl": "read_json", ".csv": "read_csv"}
PATH_COLUMN = "path"  # the column Ray's readers add with include_paths=True: which shard a row came from


@dataclass
class Shard:
    """What a shard holds, as Ray's reader will make it: its columns, their arrow types and its rows."""

    names: list[str]
    types: list
    rows: int


def list_shards(folder: Path, fmt: str | None) -> tuple[list[Path], str]:
    """The shards (sorted by name) and their format, or an :class:`InputError`."""
    if not folder.is_dir():
        raise InputError(f"input folder not found: {folder}" if not folder.exists() else f"{folder} is not a folder of shards")
    # hidden files and those Spark and Hadoop write beside their parts (_SUCCESS) are no shards
    files = sorted(path for path in folder.iterdir() if path.is_file() and not path.name.startswith((".", "_")))
    found = sorted({path.suffix.lower() for path in files} & set(READERS))
    if fmt is None:
        if len(found) != 1:
            raise InputError(f"{folder} holds {' and '.join(found)} shards: pass --format" if found else
                             f"{folder} holds no shards (.parquet, .jsonl or .csv files)")
        fmt = found[0]
    shards = [path for path in files if path.suffix.lower() == fmt]
    if not shards:
        raise InputError(f"{folder} holds no {fmt} shards")
    return shards, fmt


def shard_identity(shard: Path) -> dict:
    """What a part records of the shard it came from: a shard edited since is told apart by its hash."""
    digest = hashlib.sha256()
    with shard.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return {"name": shard.name, "bytes": shard.stat().st_size, "sha256": digest.hexdigest()}


def reader_options(fmt: str, text_columns: list[str]) -> dict:
    """The pyarrow options Ray's reader and :func:`read_shard` share: a CSV's text columns are read as text, as a
    story of digits ("42") is still a story, where pyarrow would make the column a number."""
    if fmt != ".csv":
        return {}
    import pyarrow as pa
    import pyarrow.csv as pacsv

    return {"convert_options": pacsv.ConvertOptions(column_types={name: pa.string() for name in text_columns})}


def read_shard(shard: Path, fmt: str, text_columns: list[str]) -> Shard:
    """A whole shard, checked: an :class:`InputError` naming the file (and the line, where one is to blame) if Ray's
    reader would fail on it or a text column holds something else than text (a null is a row that gets NaN)."""
    if fmt == ".parquet":
        return _read_parquet(shard, text_columns)
    if fmt == ".jsonl":
        return _read_jsonl(shard, text_columns)
    return _read_csv(shard, text_columns)


def _read_parquet(shard: Path, text_columns: list[str]) -> Shard:
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(shard)
        schema = file.schema_arrow
        # the text columns decoded to the end: a damaged page shows only when it is read
        for _ in file.iter_batches(columns=[name for name in text_columns if name in schema.names]):
            pass
    except Exception as error:  # pyarrow raises ArrowInvalid, OSError and others for a file that is not Parquet
        raise InputError(f"{shard}: not a readable Parquet file ({error})") from None
    return Shard(list(schema.names), list(schema.types), file.metadata.num_rows)


def _json_kind(value) -> str:
    """The kind of a JSON value as pyarrow's JSON reader types a column: a column keeps one (nulls aside)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "text", list: "a list", dict: "an object"}.get(type(value), "null")


def _read_jsonl(shard: Path, text_columns: list[str]) -> Shard:
    first_kind: dict[str, tuple[str, int]] = {}  # field -> the kind of its first value that is not null, and its line
    records = 0
    for line, record in json_records(shard):  # an InputError names a line that is not JSON
        if not isinstance(record, dict):
            raise InputError(f"{shard}:{line}: a JSON object per line is expected, got {_json_kind(record)}")
        for name in text_columns:
            if name not in record:
                raise InputError(f"{shard}:{line}: no field {name!r}; its fields: {list(record)}")
            if not isinstance(record[name], (str, type(None))):
                raise InputError(f"{shard}:{line}: field {name!r} holds {_json_kind(record[name])}, not text (or null)")
        for field, value in record.items():
            kind = _json_kind(value)
            if kind == "null":
                continue
            seen, seen_line = first_kind.setdefault(field, (kind, line))
            if seen != kind:
                raise InputError(f"{shard}:{line}: field {field!r} holds {kind}, but {seen} on line {seen_line}; "
                                 "a field holds one kind of value in a shard (or null)")
        records += 1
    if not records:
        return Shard([], [], 0)
    try:
        table = _arrow_json(shard)
    except Exception as error:  # ArrowInvalid and others: what stops Ray's reader stops the shard here
        raise InputError(f"{shard}: Ray's JSON reader (pyarrow) cannot read it ({error})") from None
    return Shard(table.column_names, list(table.schema.types), table.num_rows)


def _arrow_json(shard: Path):
    """The table Ray's JSON reader makes of a shard. Ray reads with pyarrow's defaults and, where a line is longer than
    pyarrow's block, retries with twice the block up to its block-size target
    (ray/data/_internal/datasource/json_datasource.py); the retry is repeated here, as pyarrow has no option for it."""
    import pyarrow as pa
    import pyarrow.json as pajson
    from ray.data import DataContext

    options = pajson.ReadOptions(use_threads=False)
    limit = DataContext.get_current().target_max_block_size
    while True:
        try:
            return pajson.read_json(shard, read_options=options)
        except pa.ArrowInvalid as error:
            if "straddling object straddles two block boundaries" not in str(error) or (limit and options.block_size >= limit):
                raise
            options.block_size *= 2


def _read_csv(shard: Path, text_columns: list[str]) -> Shard:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rows = csv_rows(shard)  # an InputError names a line that is not CSV or not UTF-8
    _, header = next(rows, (0, None))
    if header is None:
        return Shard([], [], 0)  # an empty file: no header, no rows
    if repeated := sorted({name for name in header if header.count(name) > 1}):
        raise InputError(f"{shard}: more than one column named {repeated[0]!r}; columns are {header}")
    for line, row in rows:
        if row and len(row) != len(header):  # pyarrow's reader skips blank lines and refuses a short row too
            raise InputError(f"{shard}:{line}: {len(row)} fields, but the header has {len(header)}")
    count, schema = 0, None
    try:
        # Ray reads a CSV in batches, with the column types pyarrow infers from the first; a later value that does
        # not fit ("N/A" in a column of numbers) fails there, and here, with pyarrow's "Row #" of it
        with pacsv.open_csv(shard, read_options=pacsv.ReadOptions(use_threads=False),
                            **reader_options(".csv", text_columns)) as reader:
            schema = reader.schema
            for batch in reader:
                count += batch.num_rows
    except pa.ArrowInvalid as error:
        raise InputError(f"{shard}: Ray's CSV reader (pyarrow) cannot read it ({error})") from None
    return Shard(list(schema.names), list(schema.types), count)
