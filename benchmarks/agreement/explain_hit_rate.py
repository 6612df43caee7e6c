"""How often the leave-one-out blame (storyeval.analysis.explain) ranks a planted flaw's sentence first.

    python -m benchmarks.agreement.explain_hit_rate                     # bundled union-roc and plot-coherence-roc
    python -m benchmarks.agreement.explain_hit_rate --checkpoint union:ours=outputs/union-roc/best --per-kind 100

Cases come from the ROC builder's held-out test split (``load_split(ROCStories, "test")``):
each story gets one flaw planted in one sentence after its first, with UNION's own
perturbations (``storyeval_training.data.negatives``), the kinds taken in turn:

* ``negation``: a negation added or removed (a contradiction of the story as written);
* ``antonym``: UNION's keyword substitution applied to one sentence, which swaps
  keywords for ConceptNet antonyms (a contradiction);
* ``repeat_ngram``: an n-gram of one sentence repeated in place;
* ``repeat_sentence``: one sentence copied over the next.

A case is a hit when the most blamed sentence is the planted one. For a copied
sentence the two copies are the same text, so leaving out either gives the same
story: blaming either copy counts as a hit, and its chance level counts both.
Two ways to call it are measured: on the whole story (``explain(story)``, the first
sentence blamable too) and with the first sentence passed as the context (never
blamed, as the demo does with its context box). The chance level is the hit rate of
a blame drawn uniformly at random; ``last_sentence`` that of always blaming the last one.
Results go to ``benchmarks/results/explain_hit_rate.json``.

``--breaks-dir`` takes the cases from the modern-text check instead
(``python -m storyeval_training.data.modern_breaks``): the broken copies of its test
split (``--view``, ROC-length windows by default), ``--per-kind`` of each kind of break,
the target being the sentence the break shows in (both sentences of a swap, both copies
of a repeated sentence), into ``explain_hit_rate_modern.json``.
"""
from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.checkpoints.reference_scores import test_stories
from benchmarks.common import CHECKOUT, command_line, machine, metric_checkpoint_spec, results_name, write_results
from storyeval_training.paths import data_dir

KINDS = ("negation", "antonym", "repeat_ngram", "repeat_sentence")
DEFAULT_CHECKPOINTS = [
    ("union", "union-roc", str(CHECKOUT / "hub_cards" / "union-roc")),
    ("plot_coherence", "plot-coherence-roc", str(CHECKOUT / "hub_cards" / "plot-coherence-roc")),
]


def plant(kind: str, units: list[list[str]], rng: random.Random, lexicon) -> list[list[str]] | None:
    """``units`` (token lists, the first the context) with one sentence after the first changed, or None."""
    from storyeval_training.data.negatives.repetition import repeat_ngram, repeat_sentence
    from storyeval_training.data.negatives.sampler import alter_negation_in_story
    from storyeval_training.data.negatives.substitution import substitute_keywords

    if kind == "negation":
        return alter_negation_in_story(units, 1, rng)
    if kind == "repeat_ngram":
        return repeat_ngram(units, 1, rng)
    if kind == "repeat_sentence":
        return repeat_sentence(units, 1, rng)
    if kind == "antonym":
        order = list(range(1, len(units)))
        rng.shuffle(order)
        for index in order:  # the keyword substitution, confined to one sentence
            changed = substitute_keywords([units[index]], 0, rng, lexicon)
            if changed is not None:
                return units[:index] + changed + units[index + 1:]
        return None
    raise KeyError(kind)


def build_cases(per_kind: int, seed: int) -> list[dict]:
    """``per_kind`` cases of each kind, from the test stories in order, one kind per story in turn."""
    from storyeval_training.data.negatives.substitution import KeywordLexicon

    lexicon = KeywordLexicon.from_data_dir(data_dir())
    counts = dict.fromkeys(KINDS, 0)
    cases = []
    for number, story in enumerate(test_stories("roc")):
        if min(counts.values()) >= per_kind:
            break
        kind = KINDS[number % len(KINDS)]
        if counts[kind] >= per_kind:
            kind = min(counts, key=counts.get)
        units = [sentence.split() for sentence in story]
        planted = plant(kind, units, random.Random(f"{seed}:{number}"), lexicon)
        if planted is None:
            continue
        changed = [i for i, (old, new) in enumerate(zip(units, planted)) if old != new]
        if len(changed) != 1 or len(planted) != len(units):
            raise AssertionError(f"{kind} changed sentences {changed} of story {number}; expected exactly one")
        counts[kind] += 1
        sentences = [" ".join(s) for s in planted]
        # a copied sentence and its copy are the same text: leaving out either gives the same story
        cases.append({"kind": kind, "sentences": sentences, "targets": [i for i, s in enumerate(sentences) if s == sentences[changed[0]]]})
    if min(counts.values()) < per_kind:
        raise SystemExit(f"the test split gave only {counts} cases")
    return cases


# a shuffled story has no one sentence out of place to blame
UNBLAMABLE_KINDS = ("shuffle",)


def break_cases(breaks_dir, view: str, per_kind: int, seed: int) -> list[dict]:
    """``per_kind`` broken copies of each kind (a seeded sample) of the check's test split, with their targets."""
    import datasets

    rows = datasets.load_from_disk(str(breaks_dir / "stories"))["test"].filter(lambda r: r["view"] == view and r["origin"] == "machine")
    intact = {r["unit"]: r["sentences"] for r in rows if r["kind"] == "intact"}
    by_kind = defaultdict(list)
    for r in rows:
        if r["kind"] != "intact":
            by_kind[r["kind"]].append(r)
    cases = []
    for kind, broken in sorted(by_kind.items()):
        if kind in UNBLAMABLE_KINDS:
            continue
        for r in random.Random(seed).sample(broken, min(per_kind, len(broken))):
            sentences, original = r["sentences"], intact[r["unit"]]
            if kind == "swap":
                targets = [i for i, (a, b) in enumerate(zip(sentences, original)) if a != b]
            else:  # a repeated sentence's copies are one text, so any may be blamed
                targets = [i for i, s in enumerate(sentences) if s == sentences[r["break_at"]]]
            cases.append({"kind": kind, "sentences": sentences, "targets": targets})
    return cases


def score_cases(cases: list[dict], scorer, batch_size: int) -> dict:
    from storyeval.analysis.explain import explain_sentences

    modes = {
        "whole_story": explain_sentences([c["sentences"] for c in cases], scorer, batch_size=batch_size),
        "first_sentence_as_context": explain_sentences([c["sentences"][1:] for c in cases], scorer,
                                                       [c["sentences"][0] for c in cases], batch_size=batch_size),
    }
    results = {}
    for mode, explanations in modes.items():
        offset = 0 if mode == "whole_story" else 1  # sentence indices of the blame, in the story's numbering
        groups = defaultdict(lambda: {"hits": 0, "cases": 0, "chance": 0.0, "last": 0})
        for case, explanation in zip(cases, explanations):
            sentences = case["sentences"]
            blamed = explanation.ranking()[0] + offset
            targets = [i for i in case["targets"] if i >= offset]
            for key in ("all", case["kind"]):
                group = groups[key]
                group["cases"] += 1
                group["hits"] += blamed in targets
                group["chance"] += len(targets) / (len(sentences) - offset)
                group["last"] += len(sentences) - 1 in targets
        results[mode] = {key: {"hit_rate": g["hits"] / g["cases"], "cases": g["cases"], "chance": g["chance"] / g["cases"],
                               "last_sentence": g["last"] / g["cases"]} for key, g in groups.items()}
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", default=[], type=metric_checkpoint_spec,
                        help="metric:label=folder_or_config (repeatable); default: bundled union-roc and plot-coherence-roc")
    parser.add_argument("--per-kind", type=int, default=100, help="cases per kind of planted flaw")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--breaks-dir", type=Path, default=None, help="the modern-text check's output: its broken copies are the cases")
    parser.add_argument("--view", choices=["roc", "wp"], default="roc", help="with --breaks-dir: which view's copies")
    parser.add_argument("--output", type=results_name, default=None,
                        help="results file name (default: explain_hit_rate_modern with --breaks-dir, else explain_hit_rate)")
    args = parser.parse_args(argv)
    if args.per_kind < 1 or args.batch_size < 1:
        parser.error("--per-kind and --batch-size must be positive")
    if args.breaks_dir and not (args.breaks_dir / "stories" / "dataset_dict.json").is_file():
        parser.error(f"--breaks-dir {args.breaks_dir}: no stories/ (a modern_breaks output folder)")

    from storyeval.checkpoints.resolution import resolve_checkpoint
    from storyeval.scoring.sequence import load_scorer
    from storyeval_training.export.provenance import portable_path

    command = command_line(__name__, argv)
    if args.breaks_dir:
        cases, split, output = break_cases(args.breaks_dir, args.view, args.per_kind, args.seed), f"modern_breaks test ({args.view})", "explain_hit_rate_modern"
    else:
        cases, split, output = build_cases(args.per_kind, args.seed), "roc test", "explain_hit_rate"
    payload = {"machine": machine(), "command": command, "split": split, "seed": args.seed, "cases": len(cases), "checkpoints": {}}
    for metric, label, config in args.checkpoint or DEFAULT_CHECKPOINTS:
        path = resolve_checkpoint(metric, config)
        scorer = load_scorer(metric, path)
        started = time.perf_counter()
        results = score_cases(cases, scorer, args.batch_size)
        payload["checkpoints"][label] = {"metric": metric, "path": portable_path(str(path)), "seconds": round(time.perf_counter() - started, 2), **results}
        for mode, groups in results.items():
            print(f"{label} ({mode}): " + ", ".join(f"{key} {g['hit_rate']:.3f} (chance {g['chance']:.3f}, last {g['last_sentence']:.3f}, "
                                                    f"n={g['cases']})" for key, g in groups.items()))
    print("wrote", write_results(args.output or output, payload))


if __name__ == "__main__":
    main()
