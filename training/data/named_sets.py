"""The ``NAME=VALUE`` options of the tools that read several named pair folders (``mix_pairs``, ``fit_suite``,
``train_ranker``, ``distill``).

``--pairs NAME=FOLDER`` names a set; ``--techniques NAME=T1,T2`` and ``--max-train-pairs NAME=N`` (and their
kin) refer back to it. One parser for every tool, so they accept and refuse the same spellings.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import datasets


def named_value(value: str, what: str) -> tuple[str, str]:
    """``NAME=<what>`` split in two; an empty side is refused."""
    name, sep, rest = value.partition("=")
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(f"expected NAME={what}, got {value!r}")
    return name, rest


def pair_folder(value: str) -> tuple[str, Path]:
    """The argparse type of ``--pairs NAME=FOLDER``."""
    name, folder = named_value(value, "FOLDER")
    return name, Path(folder)


def set_names(pairs: list[tuple[str, Path]]) -> list[str]:
    """The names of ``--pairs``, in order; a repeated name is refused."""
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise ValueError(f"--pairs names repeat: {names}")
    return names


def checked_pair_folders(pairs: list[tuple[str, Path]], option: str = "--pairs") -> list[str]:
    """The names of ``pairs`` (:func:`set_names`); a folder that holds no saved DatasetDict is refused too."""
    names = set_names(pairs)
    for name, folder in pairs:
        if not (Path(folder) / "dataset_dict.json").is_file():
            raise ValueError(f"{option} {name}={folder}: no saved DatasetDict there (dataset_dict.json)")
    return names


def per_set(option: str, values: list[str], names: list[str], what: str, sets_option: str = "--pairs") -> dict[str, str]:
    """``--<option> NAME=<what>`` values by set name; a NAME that no set of ``sets_option`` has is refused."""
    by_name = {}
    for value in values:
        try:
            name, rest = named_value(value, what)
        except argparse.ArgumentTypeError as error:
            raise ValueError(f"--{option} {value!r}: {error}") from None
        if name not in names:
            raise ValueError(f"--{option} {value!r}: no {sets_option} set is named {name!r} ({names})")
        by_name[name] = rest
    return by_name


def techniques_per_set(values: list[str], names: list[str], option: str = "techniques",
                       sets_option: str = "--pairs") -> dict[str, list[str]]:
    """``--techniques NAME=T1,T2``: the techniques (perturbations, or generators) each named set keeps."""
    return {name: listed.split(",") for name, listed in per_set(option, values, names, "T1,T2", sets_option).items()}


def counts_per_set(option: str, values: list[str], names: list[str]) -> dict[str, int]:
    """``--<option> NAME=N`` values by set name; N must be a positive whole number."""
    counts = per_set(option, values, names, "N")
    for name, number in counts.items():
        if not number.isdigit() or int(number) < 1:
            raise ValueError(f"--{option} {name}={number}: expected a positive whole number")
    return {name: int(number) for name, number in counts.items()}


def with_techniques(rows: datasets.Dataset, techniques: list[str], name: str) -> datasets.Dataset:
    """The pairs of ``rows`` made by any of ``techniques`` (their ``techniques`` column)."""
    wanted = set(techniques)
    return rows.filter(lambda row: bool(wanted & set(row["techniques"])), desc=f"keeping {name}'s techniques")
