"""Build the list of first names that are names, not words, in lower-cased text.

In lower-cased text a name cannot be told from a word by its capital, so
:func:`storyeval.text.name_gender` leaves alone every first name that is also an
English word in lemminflect's lexicon. That protects "will", "hope" and "saw",
but it also keeps "tom", "jack" and "mike" unmasked in the lower-cased ROC
training stories, while the same names written "Tom" are masked when a user's
cased story is scored, and the UNION human-judged sets mask them too.

This command decides from cased text which of those names are mostly names:
in the WritingPrompts stories and prompts (cased), it counts each such name's
uses inside a sentence (not after sentence-final punctuation, where every word
is capitalised) written capitalised and written lower-case, and keeps the names
written capitalised at least ``--min-capitalised`` times and in at least
``--min-share`` of their uses, and that gender-guesser's name dictionary also
lists as first names (a capital alone also marks surnames, brands and
nationalities: "Smith", "Ford", "Welsh"). Its output is the list the runtime reads.

    python -m storyeval_training.data.lowercase_names
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import gender_guesser.detector
from lemminflect import getAllLemmas

from storyeval import text as textlib
from storyeval.checkpoints import resources
from storyeval_training import paths
from storyeval_training.data.builders.common import open_lines

# cased WritingPrompts text in the shared data: stories, SRL-style plots and prompts
SOURCES = ("wp/wp_valid.target", "wp/wp_valid.source", "wp/wp_lm_valid.source")
SENTENCE_ENDS = frozenset({".", "!", "?", '"', "``", "''", "</s>", "<EOL>", ":"})


def name_word_candidates() -> frozenset[str]:
    """First names that lemminflect also knows as words: the ones lower-cased text leaves unmasked."""
    male, female = resources.first_names()
    return frozenset(w for w in male | female if w not in resources.stopwords() and getAllLemmas(w))


def count_uses(lines, candidates: frozenset[str]) -> tuple[Counter, Counter]:
    """(capitalised, lower-case) counts of each candidate's sentence-internal uses."""
    capitalised, lower = Counter(), Counter()
    for line in lines:
        tokens = line.split()
        for previous, token in zip(["."] + tokens, tokens):
            if previous in SENTENCE_ENDS or not token.isalpha():
                continue
            word = token.lower()
            if word not in candidates:
                continue
            if token[0].isupper() and token[1:].islower():
                capitalised[word] += 1
            elif token.islower():
                lower[word] += 1
    return capitalised, lower


def mostly_names(capitalised: Counter, lower: Counter, min_capitalised: int, min_share: float) -> list[str]:
    first_names = gender_guesser.detector.Detector(case_sensitive=False)
    return sorted(
        w for w, n in capitalised.items()
        if n >= min_capitalised and n >= min_share * (n + lower[w]) and first_names.get_gender(w) != "unknown"
    )


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Build the list of first names that are names in lower-cased text.")
    p.add_argument("--data-dir", default=None, help="the data root (default: STORYEVAL_DATA or ../shared/data)")
    p.add_argument("--output", default=str(textlib.LOWERCASE_NAMES_FILE))
    p.add_argument("--min-capitalised", type=int, default=5)
    p.add_argument("--min-share", type=float, default=0.7)
    args = p.parse_args(argv)
    if args.min_capitalised < 1 or not 0.5 < args.min_share <= 1:
        p.error("--min-capitalised must be at least 1 and --min-share in (0.5, 1]")
    return args


def main(argv=None) -> list[str]:
    args = parse_args(argv)
    root = Path(args.data_dir) if args.data_dir else paths.data_dir()
    lines = (line for source in SOURCES for _, line in open_lines(root / source))
    capitalised, lower = count_uses(lines, name_word_candidates())
    names = mostly_names(capitalised, lower, args.min_capitalised, args.min_share)
    header = [
        "# First names that are also English words but are written capitalised (names) in at least",
        f"# {args.min_share:.0%} of their sentence-internal uses, and at least {args.min_capitalised} times, in the cased",
        f"# WritingPrompts text of the shared data ({', '.join(SOURCES)}), and first names to gender-guesser.",
        "# Lower-cased text masks these as names. Built by: python -m storyeval_training.data.lowercase_names",
    ]
    Path(args.output).write_text("\n".join(header + names) + "\n", encoding="utf-8")
    print(f"{len(names)} names written to {args.output}")
    return names


if __name__ == "__main__":
    main()
