"""Adversarial filtering (Zellers et al., 2018, SWAG) of generated implausible stories.

    storyeval-adversarial-filter --candidates-dir data/candidates-roc --output-dir data/af-roc --keep 3

Every human story comes with N candidate negatives sampled from its manipulated
plot (``storyeval-generate-negatives``). Many are easy to spot from surface
cues (length, repetition, odd words), and a classifier trained on them would
learn those cues rather than plausibility. Filtering keeps, per story, the
``keep`` candidates that a committee of cheap classifiers finds hardest to tell
from human writing:

1. start from a random selection of ``keep`` candidates per story;
2. split the stories in two halves; train the committee on one half (human = 1,
   selected negatives = 0) and score every candidate of the other half;
3. there, swap the selected negatives the committee rejects most confidently for
   unselected candidates it finds more human-like (its verdicts averaged over
   the rounds so far); then swap the halves' roles;
4. repeat with a new random split for ``rounds`` rounds or until nothing changes.

The committee's error (the share of held-out selected negatives it scores at
least as human-like as their own human story) is logged each round and rises
as the selection hardens.

The output pairs the human story (label 1) with its kept negatives (label 0)
under a shared ``group``, like the paper's ``af_manplts_*.tsv``.
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import zlib
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import datasets
import numpy as np
from scipy import optimize, sparse
from tqdm.auto import tqdm

from storyeval_training.export.provenance import environment

logger = logging.getLogger("storyeval_training.data.plots.adversarial_filter")

PAIR_FEATURES = datasets.Features(
    {
        "group": datasets.Value("int32"),
        "id": datasets.Value("string"),
        "story": datasets.Value("string"),
        "label": datasets.Value("int8"),
    }
)
HASH_BUCKETS = 2**18

# Human stories are Treebank-tokenised ("did n't", "[MALE]") and generated ones
# come out of a WordPiece decoder, which may differ in rare spacing ("8 : 00").
# Splitting every word and punctuation mark makes both read alike, so the
# committee cannot pick negatives by tokenisation artefacts.
_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = frozenset(".!?")


def normalise_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


# ---------------------------------------------------------------- features
# numpy/scipy rather than scikit-learn: scikit-learn is installed here only as a
# dependency of sentence-transformers, not of storyeval, and a hashed n-gram
# vectoriser plus a Newton-CG logistic regression take a few dozen lines.

def hashed_ngrams(token_lists: list[list[str]], n: int, buckets: int = HASH_BUCKETS) -> sparse.csr_matrix:
    """Rows of log(1 + count) over hashed n-grams, L2-normalised.

    crc32 rather than ``hash()``: Python salts string hashes per process,
    which would make the features (and the selection) differ between runs.
    """
    bucket_of: dict[str, int] = {}
    indptr, indices, values = [0], [], []
    for tokens in token_lists:
        grams = Counter(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
        row = Counter()
        for gram, count in grams.items():
            bucket = bucket_of.get(gram)
            if bucket is None:
                bucket = bucket_of[gram] = zlib.crc32(gram.encode()) % buckets
            row[bucket] += count
        weights = np.log1p(np.fromiter(row.values(), dtype=np.float64, count=len(row)))
        norm = np.linalg.norm(weights)
        indices.extend(row)
        values.extend(weights / norm if norm else weights)
        indptr.append(len(indices))
    matrix = sparse.csr_matrix((values, indices, indptr), shape=(len(token_lists), buckets))
    # only buckets that occur can get a weight: dropping the rest keeps the optimisation small
    return matrix[:, np.unique(matrix.indices)].tocsr()


def style_features(token_lists: list[list[str]]) -> np.ndarray:
    """Length and repetition statistics: the cues sampled text most often gives away."""
    rows = []
    for tokens in token_lists:
        words = [t for t in tokens if t[0].isalnum()]
        sentences = max(1, sum(t in _SENTENCE_END for t in tokens))
        bigrams = list(pairwise(tokens))
        trigrams = list(zip(tokens, tokens[1:], tokens[2:]))
        rows.append(
            [
                np.log1p(len(tokens)),
                np.log1p(sentences),
                len(tokens) / sentences,
                np.mean([len(w) for w in words]) if words else 0.0,
                len(set(words)) / len(words) if words else 0.0,
                1 - len(set(bigrams)) / len(bigrams) if bigrams else 0.0,
                1 - len(set(trigrams)) / len(trigrams) if trigrams else 0.0,
                (len(tokens) - len(words)) / len(tokens) if tokens else 0.0,
            ]
        )
    return np.asarray(rows, dtype=np.float64)


# ---------------------------------------------------------------- classifier

@dataclass
class LogisticRegression:
    """Class-balanced, L2-regularised logistic regression (Newton-CG)."""

    l2: float = 1e-3
    max_iter: int = 50
    standardise: bool = False

    def fit(self, features, labels: np.ndarray) -> LogisticRegression:
        if self.standardise:
            self.mean_ = features.mean(axis=0)
            self.scale_ = features.std(axis=0) + 1e-6
        x = self._prepare(features)
        y = labels.astype(np.float64)
        # balanced weights: each story has one human and several negatives,
        # and 0.5 should mean "could be either"
        weights = np.where(y == 1, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1))

        def loss_and_gradient(params):
            w, b = params[:-1], params[-1]
            z = x @ w + b
            loss = weights @ (np.logaddexp(0, z) - y * z) + 0.5 * self.l2 * w @ w
            residual = weights * (_sigmoid(z) - y)
            return loss, np.append(x.T @ residual + self.l2 * w, residual.sum())

        def hessian_times(params, vector):
            p = _sigmoid(x @ params[:-1] + params[-1])
            curvature = weights * p * (1 - p) * (x @ vector[:-1] + vector[-1])
            return np.append(x.T @ curvature + self.l2 * vector[:-1], curvature.sum())

        # Newton-CG rather than L-BFGS-B: scipy's L-BFGS-B makes many tiny
        # threaded BLAS calls that crawl on a busy machine; logistic loss is
        # smooth and convex, so a few Newton steps converge
        start = np.zeros(x.shape[1] + 1)
        solution = optimize.minimize(loss_and_gradient, start, jac=True, hessp=hessian_times, method="Newton-CG", options={"maxiter": self.max_iter})
        self.coef_, self.intercept_ = solution.x[:-1], solution.x[-1]
        return self

    def predict_proba(self, features) -> np.ndarray:
        """P(human) per row."""
        return _sigmoid(self._prepare(features) @ self.coef_ + self.intercept_)

    def _prepare(self, features):
        return (features - self.mean_) / self.scale_ if self.standardise else features


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0, -z))


class Committee:
    """One logistic regression per feature view (unigrams, bigrams, style); P(human) is their mean."""

    def __init__(self, texts: list[str], l2: float = 1e-3):
        tokens = [normalise_tokens(t) for t in texts]
        # computed once for every text; rounds only pick rows
        self.views = [
            (hashed_ngrams(tokens, 1), LogisticRegression(l2=l2)),
            (hashed_ngrams(tokens, 2), LogisticRegression(l2=l2)),
            (style_features(tokens), LogisticRegression(l2=l2, standardise=True)),
        ]

    def fit(self, rows: np.ndarray, labels: np.ndarray) -> Committee:
        for features, model in self.views:
            model.fit(features[rows], labels)
        return self

    def predict_proba(self, rows: np.ndarray) -> np.ndarray:
        return np.mean([model.predict_proba(features[rows]) for features, model in self.views], axis=0)


# ---------------------------------------------------------------- filtering

def adversarial_filter(
    humans: list[str],
    candidates: list[list[str]],
    keep: int = 3,
    rounds: int = 10,
    seed: int = 42,
    l2: float = 1e-3,
) -> tuple[list[list[int]], list[dict]]:
    """Per story, the indices (into its candidates, ascending) of the ``keep``
    hardest negatives, and one record per round.

    Each record has ``error``, the share of held-out selected negatives the
    committee scores at least as human-like as their own human story (a
    threshold at 0.5 would say little: a committee fitted to one half is not
    calibrated on the other); ``choice_error``, SWAG's multiple-choice error
    (the human story is not the committee's first choice in its group); and
    ``swaps``. Stories with at most ``keep`` candidates keep them all.
    """
    if len(humans) != len(candidates):
        raise ValueError(f"{len(humans)} human stories but {len(candidates)} candidate lists")
    if len(humans) < 2:
        raise ValueError("adversarial filtering needs at least two stories (one half trains, the other is scored)")
    if keep < 1:
        raise ValueError("keep must be positive")
    rng = np.random.default_rng(seed)
    # text layout: humans first, then every candidate; first_candidate[s] is story s's first
    sizes = np.array([len(c) for c in candidates])
    first_candidate = len(humans) + np.concatenate([[0], np.cumsum(sizes)[:-1]])
    committee = Committee(list(humans) + [c for row in candidates for c in row], l2=l2)
    selected = [sorted(rng.choice(n, size=min(keep, n), replace=False).tolist()) for n in sizes]
    # Swaps follow each candidate's held-out P(human) averaged over the rounds so
    # far. With one round's verdict alone the selection oscillates: once the easy
    # candidates are out, a committee trained on the selection no longer sees
    # their cue and swaps them back in at random.
    verdict_sums = [np.zeros(n) for n in sizes]

    history = []
    progress = tqdm(range(1, rounds + 1), desc="adversarial filtering", unit="round")
    for round_number in progress:
        order = rng.permutation(len(humans))
        halves = (order[: len(order) // 2], order[len(order) // 2 :])
        outranked = negatives = wrong_choices = swaps = 0
        for train_rows, test_rows in (halves, halves[::-1]):
            negative_texts = np.array([first_candidate[s] + i for s in train_rows for i in selected[s]], dtype=np.int64)
            labels = np.concatenate([np.ones(len(train_rows)), np.zeros(len(negative_texts))])
            committee.fit(np.concatenate([train_rows, negative_texts]), labels)
            human_scores = committee.predict_proba(test_rows)
            scored = np.concatenate([first_candidate[s] + np.arange(sizes[s]) for s in test_rows]).astype(np.int64)
            candidate_scores = np.split(committee.predict_proba(scored), np.cumsum(sizes[test_rows])[:-1])
            for story, human_score, scores in zip(test_rows, human_scores, candidate_scores):
                fooling = int((scores[selected[story]] >= human_score).sum())
                outranked += fooling
                wrong_choices += fooling > 0
                negatives += len(selected[story])
                verdict_sums[story] += scores
                selected[story], swapped = _swap_easiest(selected[story], verdict_sums[story] / round_number)
                swaps += swapped
        record = {
            "round": round_number,
            "error": outranked / max(negatives, 1),
            "choice_error": wrong_choices / len(humans),
            "swaps": swaps,
        }
        history.append(record)
        progress.set_postfix(error=f"{record['error']:.3f}", swaps=swaps)
        logger.info("round %d: committee error %.3f (multiple choice %.3f), %d swaps", round_number, record["error"], record["choice_error"], swaps)
        if swaps == 0:
            break
    progress.close()
    return selected, history


def _swap_easiest(selected: list[int], p_human: np.ndarray) -> tuple[list[int], int]:
    """Swap the most confidently rejected selected negatives for more human-like
    unselected candidates, pairing easiest with hardest while that helps."""
    chosen = set(selected)
    easiest_first = sorted(selected, key=lambda i: (p_human[i], i))
    hardest_first = sorted((i for i in range(len(p_human)) if i not in chosen), key=lambda i: (-p_human[i], i))
    swaps = 0
    for easy, hard in zip(easiest_first, hardest_first):
        if p_human[hard] <= p_human[easy]:
            break
        chosen.remove(easy)
        chosen.add(hard)
        swaps += 1
    return sorted(chosen), swaps


# ---------------------------------------------------------------- command

def usable_candidates(human: str, candidates: list[str]) -> list[str]:
    """Drop empty candidates and copies of the human story: a copy labelled
    implausible is label noise, and the filter would prefer it above all."""
    reference = normalise_tokens(human)
    seen, kept = set(), []
    for candidate in candidates:
        tokens = tuple(normalise_tokens(candidate))
        if tokens and list(tokens) != reference and tokens not in seen:
            seen.add(tokens)
            kept.append(candidate.strip())
    return kept


def filter_split(rows: datasets.Dataset, keep: int, rounds: int, seed: int) -> tuple[datasets.Dataset, dict]:
    """Classifier pairs for one split, and what happened to it."""
    ids, humans, candidates = list(rows["id"]), list(rows["story"]), []
    dropped_candidates = 0
    for human, row in zip(humans, rows["candidates"]):
        kept = usable_candidates(human, row)
        dropped_candidates += len(row) - len(kept)
        candidates.append(kept)
    # every group has one human and exactly `keep` negatives, as in the paper's data
    complete = [i for i, c in enumerate(candidates) if len(c) >= keep]
    if len(complete) < 2:
        raise ValueError(f"only {len(complete)} stories have {keep} usable candidates; need at least two")
    selected, history = adversarial_filter([humans[i] for i in complete], [candidates[i] for i in complete], keep=keep, rounds=rounds, seed=seed)
    pairs = {name: [] for name in PAIR_FEATURES}
    for group, (story, chosen) in enumerate(zip(complete, selected)):
        for text, label in [(humans[story], 1)] + [(candidates[story][i], 0) for i in chosen]:
            pairs["group"].append(group)
            pairs["id"].append(ids[story])
            pairs["story"].append(text)
            pairs["label"].append(label)
    report = {
        "stories": len(complete),
        "dropped_stories_with_too_few_candidates": len(humans) - len(complete),
        "dropped_empty_or_copied_candidates": dropped_candidates,
        "history": history,
    }
    return datasets.Dataset.from_dict(pairs, features=PAIR_FEATURES), report


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Keep the hardest generated negatives per story (adversarial filtering).")
    p.add_argument("--candidates-dir", required=True, help="output of storyeval-generate-negatives (id, story, candidates)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--keep", type=int, default=3, help="negatives kept per human story")
    p.add_argument("--rounds", type=int, default=10, help="0 keeps a random selection: the baseline without filtering")
    p.add_argument("--splits", nargs="*", default=None, help="splits of a DatasetDict to filter (default: all)")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    if args.keep < 1 or args.rounds < 0:
        p.error("--keep must be positive and --rounds not negative")
    return args


def main(argv=None) -> None:
    run(parse_args(argv))


def run(args) -> dict:
    """Filter every split; returns the summary also written as JSON."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    run_environment = environment()  # taken at the start: the code the run ran, not what the checkout holds when it ends
    loaded = datasets.load_from_disk(args.candidates_dir)
    single = isinstance(loaded, datasets.Dataset)
    splits = {"train": loaded} if single else {name: loaded[name] for name in (args.splits or loaded)}
    outputs, reports = {}, {}
    for name, rows in splits.items():
        outputs[name], reports[name] = filter_split(rows, args.keep, args.rounds, args.seed)
        errors = [r["error"] for r in reports[name]["history"]]
        if errors:
            logger.info("%s: %d groups; committee error %.3f -> %.3f over %d rounds", name, reports[name]["stories"], errors[0], errors[-1], len(errors))
        else:
            logger.info("%s: %d groups; %d random candidates each, not filtered", name, reports[name]["stories"], args.keep)
    output_dir = Path(args.output_dir)
    (outputs["train"] if single else datasets.DatasetDict(outputs)).save_to_disk(str(output_dir))
    summary = {"args": vars(args), "splits": reports, "environment": run_environment}
    (output_dir / "adversarial_filter_history.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    main()
