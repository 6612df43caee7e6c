"""How well a sentence embedder's statistics of a story's sentences tell the story from its broken copy, alone (no mix).

    python -m benchmarks.agreement.topic_probe --breaks-dir <modern_breaks folder> --kinds insert half triple \
        --max-units-per-view 120 --length-baseline-stories 1500 --output first_checks/topic_probe

For each view of the check's validation split and each kind: the share of stories whose statistic is above their
broken copy's (a tie counts a half), and the Spearman of the statistic with length over the intact stories, for eight
statistics of the similarities of a story's distinct sentences (each sentence's cosine to the mean of the others: its
minimum, lowest tenth, lowest quarter, mean; each sentence's highest cosine to another: minimum, lowest quarter; every
two sentences' cosines: lowest quarter, mean) embedded as :mod:`storyeval.scoring.topic` embeds them. With
``--length-baseline-stories N``: also the mean of every two minus what two sentences of those lengths from different
training stories share (a least-squares fit on 20,000 such pairs from N training stories). It chose the topic part's
statistic (first_checks.md, E17); it reads only the validation split and the training split.
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np

from ..common import command_line, machine, results_name, write_results

BASELINE_PAIRS = 20_000


def lowest_share_mean(values: np.ndarray, share: float) -> float:
    from storyeval.scoring.ending import lowest_mean

    return lowest_mean(list(values), share)


def statistics(vectors: np.ndarray) -> dict[str, float]:
    """The eight statistics of unit-length sentence vectors (two at least)."""
    count = len(vectors)
    total = vectors.sum(axis=0)
    others = total[None, :] - vectors
    to_others = (vectors * others).sum(axis=1) / np.linalg.norm(others, axis=1)
    similarity = vectors @ vectors.T
    pairs = similarity[np.triu_indices(count, 1)]
    np.fill_diagonal(similarity, -np.inf)
    nearest = similarity.max(axis=1)
    return {"to_others_min": to_others.min(), "to_others_lowest_tenth": lowest_share_mean(to_others, 0.1),
            "to_others_lowest_quarter": lowest_share_mean(to_others, 0.25), "to_others_mean": to_others.mean(),
            "nearest_min": nearest.min(), "nearest_lowest_quarter": lowest_share_mean(nearest, 0.25),
            "pairs_lowest_quarter": lowest_share_mean(pairs, 0.25), "pairs_mean": pairs.mean()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--breaks-dir", type=Path, required=True)
    parser.add_argument("--kinds", nargs="+", default=["insert", "half", "triple"])
    parser.add_argument("--max-units-per-view", type=int, default=120)
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2", help="a backbone name or folder (default: the fast tier's)")
    parser.add_argument("--length-baseline-stories", type=int, default=0,
                        help="fit what two sentences of given lengths from different training stories share on this many "
                             "training stories (0: no such row)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", type=results_name, default="first_checks/topic_probe")
    args = parser.parse_args(argv)
    if args.max_units_per_view < 1 or args.length_baseline_stories < 0:
        parser.error("--max-units-per-view must be positive and --length-baseline-stories not negative")
    from scipy.stats import spearmanr

    from storyeval.checkpoints.backbones import resolve_backbone
    from storyeval.scoring.topic import load_topic_scorer
    from storyeval.text import count_words, distinct_sentences

    def words_of(sentence: str) -> int:
        return max(1, count_words(sentence))  # a length whose log is defined

    from .modern_breaks import KINDS, read_stories

    if unknown := sorted(set(args.kinds) - set(KINDS)):
        parser.error(f"--kinds {unknown}: not kinds of the check ({', '.join(KINDS)})")
    try:
        rows = read_stories(args.breaks_dir, "validation", ["wp", "roc", "human-roc", "human-wp"], args.max_units_per_view,
                            args.seed, tuple(args.kinds))
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    embedder = load_topic_scorer(resolve_backbone(args.embedder))
    vector_of = {}

    def vectors(sentences: list[str]) -> np.ndarray:
        new = [s for s in dict.fromkeys(sentences) if s not in vector_of]
        if new:
            vector_of.update(zip(new, embedder.embed(new, batch_size=64)))
        return np.stack([vector_of[s] for s in sentences])

    coefficients = None
    if args.length_baseline_stories:
        import datasets

        train = [r["text"] for r in datasets.load_from_disk(str(args.breaks_dir / "stories"))["train"] if r["kind"] == "intact"]
        rng = random.Random(args.seed)
        rng.shuffle(train)
        sentences = [(k, s) for k, text in enumerate(train[:args.length_baseline_stories]) for s in distinct_sentences(text)]
        pairs = []
        while len(pairs) < BASELINE_PAIRS:
            (a, first), (b, second) = rng.choice(sentences), rng.choice(sentences)
            if a != b:
                pairs.append((first, second))
        embedded = vectors([s for pair in pairs for s in pair])
        cosines = (embedded[0::2] * embedded[1::2]).sum(axis=1)
        logs = np.log([[words_of(x), words_of(y)] for x, y in pairs])
        design = np.column_stack([np.ones(len(logs)), logs.sum(axis=1), logs[:, 0] * logs[:, 1]])
        coefficients = np.linalg.lstsq(design, cosines, rcond=None)[0]

    def story_statistics(text: str) -> dict[str, float]:
        sentences = distinct_sentences(text)
        found = vectors(sentences)
        result = statistics(found)
        if coefficients is not None:
            logs = np.log([words_of(s) for s in sentences])
            expected = coefficients[0] + coefficients[1] * (logs[:, None] + logs[None, :]) + coefficients[2] * logs[:, None] * logs[None, :]
            upper = np.triu_indices(len(sentences), 1)
            result["pairs_mean_above_length_baseline"] = float(((found @ found.T) - expected)[upper].mean())
        return result

    by_unit = {}
    for r in rows:
        by_unit.setdefault(r["unit"], {})[r["kind"]] = r
    views = {}
    for unit, kinds in sorted(by_unit.items()):
        intact = kinds.get("intact")
        if intact is None or len(distinct_sentences(intact["text"])) < 2:
            continue
        view = views.setdefault(intact["view"], {"intact": [], "kinds": {}})
        own = story_statistics(intact["text"])
        if intact.get("sides"):
            view["intact"].append((intact["words"], own))
        for kind in args.kinds:
            if kind in kinds and kind in intact.get("sides", []) and len(distinct_sentences(kinds[kind]["text"])) > 1:
                broken = story_statistics(kinds[kind]["text"])
                view["kinds"].setdefault(kind, []).append({name: float(own[name] > broken[name]) + 0.5 * float(own[name] == broken[name])
                                                           for name in own})
    payload = {"machine": machine(), "command": command_line(__name__, argv), "split": "validation", "views": {}}
    for name, view in sorted(views.items()):
        lengths = [words for words, _ in view["intact"]]
        names = list(view["intact"][0][1])
        payload["views"][name] = {
            "length_spearman_intact": {s: float(spearmanr(lengths, [own[s] for _, own in view["intact"]])[0]) for s in names},
            "above_broken_copy": {kind: {"pairs": len(results), **{s: float(np.mean([r[s] for r in results])) for s in names}}
                                  for kind, results in view["kinds"].items()}}
        for kind, results in payload["views"][name]["above_broken_copy"].items():
            print(f"{name} {kind} ({results['pairs']}): " + " ".join(f"{s}={results[s]:.2f}" for s in names))
        print(f"{name} length rho: " + " ".join(f"{s}={v:+.2f}" for s, v in payload["views"][name]["length_spearman_intact"].items()))
    if coefficients is not None:
        payload["length_baseline"] = {"training_stories": args.length_baseline_stories, "pairs": BASELINE_PAIRS,
                                      "coefficients": [float(c) for c in coefficients]}
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
