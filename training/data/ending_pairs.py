"""Pairs of a story's last sentences against the sentences before a cut in the same story: what teaches a scorer to
tell a story's end from a point part-way through it, with the text it reads of the same size on both sides.

    python -m storyeval_training.data.ending_pairs --stories runs/modern-r2/stories --output-dir runs/ending/pairs

The input is the ``stories`` folder of :mod:`storyeval_training.data.modern_breaks`; only its intact stories are read,
of the training and validation splits (the test split is the check's report). Each story is normalised as the
checkpoints were trained, split into sentences, and gives one pair: ``human`` its last ``--sentences`` sentences,
``negative`` the same number of sentences ending at a cut drawn (seeded) inside the story: at its half, where the
first checks cut it, in half the stories, anywhere after its first ``--sentences`` sentences in the rest. Both sides
are as many sentences long, so the number of sentences cannot tell them apart, and neither side says how long its
story is. Left out and counted: a story of fewer than four sentences (the checks' own bound), and one whose last
sentence has no closing punctuation (a model's story stopped mid-sentence by its token limit has no end to learn).

``--reaching-end`` takes as endings only texts that end where their story ends (those the check gave a ``half``):
a window of an LLM story read at ROC length mostly stops mid-story, and its last sentences are no end to learn.
``--match-length R`` keeps each pair's two sides within a ratio R of each other in words: the half when it matches,
otherwise the matching cut nearest in words (a tie: seeded); a story with none is left out and counted. Without it,
an LLM story's last sentences are longer than those before a cut, and a scorer learns length (first_checks.md, E7).

``--cuts-per-story K`` pairs each story's ending with up to K distinct cuts instead of one (the half among them where
it qualifies): more pairs from the few LLM stories whose text reaches its end (first_checks.md, E13).

``--with-opening`` puts the story's first sentence before both sides (an ending scorer that reads where the story
began, ``ending_reads: "opening_ending"``; first_checks.md, E6): a half lacks an end to what its opening began. The cut
then falls after the first ``--sentences`` + 1 sentences at the earliest, so that the opening is never one of the
sentences before it, and both sides stay as many sentences long.

The pairs train a UNION-architecture classifier (``storyeval-train-union --pairs-dir``) whose score of a story's last
sentences is mixed with a story scorer's (``benchmarks.agreement.modern_breaks --ending``).
"""
from __future__ import annotations

import argparse
import random
from collections import Counter

import datasets

from storyeval import text as textlib
from storyeval_training.data import story_pairs
from storyeval_training.data.breaks import MIN_SENTENCES  # the first checks' bound: a shorter story carries no break

RECORD = "ending_pairs.json"
CLOSING = (".", "!", "?", '"', "'", "”", "’")


def tail(sentences: list[str], count: int) -> str:
    """The last ``count`` sentences, as one text: what the ending scorer reads of a story. Not
    ``storyeval.text.last_sentences``, which skips back past sentences of punctuation alone where the last ones have no
    words: the shipped ending scorer was trained on these pairs, 6 of whose 17,798 sides are such sentences."""
    return " ".join(sentences[-count:])


def opening_and_tail(sentences: list[str], count: int) -> str:
    """The first sentence and the last ``count``, as one text (``--with-opening``), from more than ``count`` sentences."""
    return " ".join(sentences[:1] + sentences[-count:])


def length_ratio(a: str, b: str) -> float:
    """How many times longer, in words, the longer of two texts is than the shorter."""
    x, y = len(a.split()), len(b.split())
    return max(x, y) / max(min(x, y), 1)


def story_pair(story_id: str, sentences: list[str], count: int, rng: random.Random, origin: str, opening: bool = False,
               match_length: float | None = None) -> dict | None:
    """One pair from a story of at least ``MIN_SENTENCES`` and more than ``count`` sentences (``opening``: more than
    ``count + 1``); with ``match_length``, ``None`` when no cut's side is within that ratio of the ending's words."""
    n, first = len(sentences), count + opening  # the earliest cut: ``count`` sentences, after the opening where it is read
    half = rng.random() < 0.5
    if match_length is None:
        cut = max(n // 2 if half else rng.randint(first, n - 1), first)  # a half shorter than that: the earliest cut
    else:
        matching = matching_cuts(sentences, count, opening, match_length)
        if not matching:
            return None
        nearest = min(matching.values())
        cut = max(n // 2, first)
        if not (half and cut in matching):
            cut = rng.choice(sorted(c for c, r in matching.items() if r == nearest))
    return pair_at(story_id, sentences, count, cut, origin, opening)


def pairs_of_story(story_id: str, sentences: list[str], count: int, cuts: int, rng: random.Random, origin: str,
                   opening: bool = False, match_length: float | None = None) -> list[dict]:
    """A story's pairs: one cut drawn as the shipped ending scorers' pairs were, or up to ``cuts`` distinct ones."""
    if cuts > 1:
        return story_pairs_at_cuts(story_id, sentences, count, cuts, rng, origin, opening, match_length)
    pair = story_pair(story_id, sentences, count, rng, origin, opening, match_length)
    return [pair] if pair else []


def story_pairs_at_cuts(story_id: str, sentences: list[str], count: int, cuts: int, rng: random.Random, origin: str,
                        opening: bool = False, match_length: float | None = None) -> list[dict]:
    """Up to ``cuts`` pairs from one story, one for each of as many distinct cuts (``--cuts-per-story``): the half where
    it qualifies (within ``match_length`` where given), the others drawn (seeded) from the rest that do; none where no
    cut qualifies. The same ending stands against each cut, so a story's pairs share their ``human`` side."""
    n, first = len(sentences), count + opening
    allowed = (sorted(matching_cuts(sentences, count, opening, match_length)) if match_length is not None
               else list(range(first, n)))
    half = max(n // 2, first)
    rest = [c for c in allowed if c != half]
    chosen = ([half] if half in allowed else []) + rng.sample(rest, min(len(rest), cuts - (half in allowed)))
    return [pair_at(story_id, sentences, count, cut, origin, opening) for cut in sorted(chosen)]


def matching_cuts(sentences: list[str], count: int, opening: bool, match_length: float) -> dict[int, float]:
    """Each cut whose side is within ``match_length`` of the ending's words, with its ratio."""
    read = reader(count, opening)
    ending = read(sentences)
    ratios = {c: length_ratio(read(sentences[:c]), ending) for c in range(count + opening, len(sentences))}
    return {c: r for c, r in ratios.items() if r <= match_length}


def reader(count: int, opening: bool):
    """What a side holds of a story's sentences up to a cut (the whole story: the ending)."""
    return (lambda part: opening_and_tail(part, count)) if opening else (lambda part: tail(part, count))


def pair_at(story_id: str, sentences: list[str], count: int, cut: int, origin: str, opening: bool) -> dict:
    """The pair of a story's ending against the sentences before ``cut``."""
    read = reader(count, opening)
    return {"id": f"{story_id}/ending/{cut}", "context": "", "human": read(sentences), "negative": read(sentences[:cut]),
            "original": read(sentences), "techniques": ["ending", origin, f"cut {cut} of {len(sentences)}"]}


def ending_pairs(rows: datasets.Dataset, count: int, seed: int, opening: bool = False, reaching_end: bool = False,
                 match_length: float | None = None, cuts: int = 1) -> tuple[datasets.Dataset, Counter]:
    """One split's pairs (up to ``cuts`` per intact story that qualifies) and what was left out, counted. One cut a
    story draws as the shipped ending scorers' pairs were drawn."""
    rng = random.Random(seed)
    pairs, left = [], Counter()
    ends = {row["unit"] for row in rows if row["kind"] == "half"} if reaching_end else set()
    for row in rows:
        if row["kind"] != "intact":
            continue
        sentences = textlib.split_sentences(textlib.normalize_story(row["text"]))
        if len(sentences) < max(MIN_SENTENCES, count + 1 + opening):
            left["too_short"] += 1
        elif not row["text"].rstrip().endswith(CLOSING):
            left["stopped_mid_sentence"] += 1
        elif reaching_end and row["unit"] not in ends:
            left["stops_before_story_end"] += 1
        elif not (story := pairs_of_story(row["unit"], sentences, count, cuts, rng, row["origin"], opening, match_length)):
            left["no_cut_of_matching_length"] += 1
        else:
            pairs.extend(story)
    return story_pairs.pairs_dataset(pairs), left


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    story_pairs.add_arguments(p)
    p.add_argument("--sentences", type=int, default=2,
                   help=f"how many of a story's last sentences a side holds; above {MIN_SENTENCES - 1} ({MIN_SENTENCES - 2} "
                        "with --with-opening) a cut of the shortest stories keeps fewer, so stories of fewer than that many "
                        "plus one are left out and counted")
    p.add_argument("--with-opening", action="store_true", help="each side begins with the story's first sentence")
    p.add_argument("--reaching-end", action="store_true",
                   help="endings only from texts that end where their story does (those the check gave a half)")
    p.add_argument("--match-length", type=float, default=None, metavar="RATIO",
                   help="keep a pair's sides within this ratio of each other in words (> 1; default: any)")
    p.add_argument("--cuts-per-story", type=int, default=1, metavar="K",
                   help="pairs from up to K distinct cuts of each story, the half among them where it qualifies "
                        "(default 1: one cut, drawn as the shipped ending scorers' pairs were)")
    args = p.parse_args(argv)
    if args.match_length is not None and not args.match_length > 1:
        p.error(f"--match-length must be above 1 (a ratio of the longer side's words to the shorter's), got {args.match_length}")
    if args.cuts_per_story < 1:
        p.error(f"--cuts-per-story must be at least 1, got {args.cuts_per_story}")
    if args.sentences < 1:
        p.error(f"--sentences must be at least 1, got {args.sentences}")
    story_pairs.check_arguments(p, args)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    story_pairs.build("ending_pairs", args, {"unit", "kind", "origin", "text"},
                      lambda rows, seed: ending_pairs(rows, args.sentences, seed, args.with_opening, args.reaching_end,
                                                   args.match_length, args.cuts_per_story), RECORD)


if __name__ == "__main__":
    main()
