"""Input checks shared by every scorer and metric: clear errors, nothing changed."""
from __future__ import annotations

import argparse
import operator
from collections.abc import Sequence

# precisions the scorers accept; names only, so the CLI's --help needs no torch import
FLOAT_DTYPE_NAMES = ("float32", "bfloat16", "float16")
# int8: the story classifiers only, through an int8 runtime on the CPU (storyeval.scoring.int8.runtime)
DTYPE_NAMES = (*FLOAT_DTYPE_NAMES, "int8")


# marks sentence ends in the plot-guided releases; the scorers split on it and drop it
SENTENCE_SEPARATOR = "</s>"
# run through a scorer's text side when it loads, so that missing NLTK data is an error then, not at its first score
PROBE_STORY = "Ken went home. He slept."


def has_words(text: str) -> bool:
    """Whether ``text`` has a letter or digit outside sentence separators: str.strip() keeps
    zero-width and format characters, which the tokenizers drop."""
    return any(character.isalnum() for character in text.replace(SENTENCE_SEPARATOR, " "))


def check_texts(texts, name: str = "predictions") -> list[str]:
    """A list of strings with words in them, or a TypeError / ValueError naming the bad item."""
    texts = check_strings(texts, name)
    for index, text in enumerate(texts):
        if problem := text_problem(text):
            raise ValueError(f"{name}[{index}] {problem}")
    return texts


def check_strings(texts, name: str = "predictions") -> list[str]:
    """A list of strings, which may be unscorable (see :func:`text_problem`), or a TypeError naming the bad item."""
    if texts is None:
        raise TypeError(f"{name} must be a list of strings, got None")
    if hasattr(texts, "tolist") and getattr(texts, "ndim", None) == 1:
        texts = texts.tolist()  # a 1-D numpy array or pandas Series of strings
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__}")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{index}] must be a string, got {type(text).__name__}")
    return list(texts)


def text_problem(text: str) -> str | None:
    """Why a string cannot be scored (no letters or digits, a lone surrogate), or None."""
    if not has_words(text):
        return f"is empty or has no letters or digits: {text!r}"
    return not_unicode_text(text)


ON_INVALID = ("raise", "nan")


def check_on_invalid(on_invalid) -> str:
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {ON_INVALID}, got {on_invalid!r}")
    return on_invalid


def not_unicode_text(text: str) -> str | None:
    """Why ``text`` cannot be encoded as UTF-8 (a lone surrogate, e.g. from a JSON escape of half an emoji), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"holds {text[error.start]!r} at position {error.start}, a lone surrogate rather than a character (text cut inside an emoji?)"
    return None


def positive_int(text: str) -> int:
    """argparse type of counts such as ``--num-threads``: a bad value is a usage error before anything loads."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expects a positive integer, got {value}")
    return value


def check_batch_size(batch_size) -> int:
    """``batch_size`` as an int: any integer type (numpy's too, through operator.index), never a bool,
    which is an int subclass, and True is not a batch size anyone means."""
    try:
        if isinstance(batch_size, bool):
            raise TypeError
        batch_size = operator.index(batch_size)
    except TypeError:
        raise TypeError(f"batch_size must be a positive integer, got {batch_size!r}") from None
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    return batch_size


def check_progress_bar(progress_bar) -> bool:
    # a truthy string such as "no" would turn the bar on
    if not isinstance(progress_bar, bool):
        raise TypeError(f"progress_bar must be True or False, got {progress_bar!r}")
    return progress_bar


def check_same_length(**columns: Sequence) -> None:
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"inputs must have the same length, got {lengths}")
