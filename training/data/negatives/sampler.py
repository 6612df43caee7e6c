"""UNION's negative sampler: compose perturbation techniques on a human story.

The number of techniques is drawn from {1, 2, 3, 4} with probabilities
{.5, .2, .2, .1}; the techniques are drawn without replacement from
{repetition, substitution, reordering, negation} with probabilities
{.1, .3, .4, .2} (Guan & Huang, 2020, Sec. 3.2). A technique that cannot
apply to a story (reordering a one-sentence story, negating a verbless one)
is replaced by another draw. The leading context is never changed, and a
negative never equals its source.

Techniques compose in order on the current story, so a later sentence
substitution or repetition can overwrite a sentence an earlier technique
changed: ``techniques`` lists every technique applied, including one whose
change a later one erased. The bundled checkpoints were trained on negatives
built this way, so it is kept; per-technique counts are counts of techniques
applied, not of changes visible in the negative.
"""
from __future__ import annotations

import dataclasses
import random

from storyeval_training.data.negatives import negation
from storyeval_training.data.negatives.reordering import reorder
from storyeval_training.data.negatives.repetition import Sentences, repetition
from storyeval_training.data.negatives.substitution import KeywordLexicon, substitution
from storyeval_training.export import provenance

NUM_TECHNIQUES = (1, 2, 3, 4)
NUM_TECHNIQUES_WEIGHTS = (0.5, 0.2, 0.2, 0.1)
TECHNIQUE_WEIGHTS = {"repetition": 0.1, "substitution": 0.3, "reordering": 0.4, "negation": 0.2}
MAX_ATTEMPTS = 5
# the code that turns a tagged story into a negative; part of the sampler's state, so that
# `datasets` caches of map(make_pairs) built by older code are not reused
NEGATIVES_CODE = provenance.source_hash(
    [*(provenance.TRAINING / "data" / "negatives").glob("*.py"), provenance.TRAINING / "data" / "build_negatives.py", *provenance.TEXT_PIPELINE]
)


def alter_negation_in_story(sentences: Sentences, start: int, rng: random.Random) -> Sentences | None:
    """Add or remove a negation in one sentence after the context."""
    order = list(range(start, len(sentences)))
    rng.shuffle(order)
    for index in order:
        altered = negation.alter_negation(sentences[index], rng)
        if altered is not None:
            return sentences[:index] + [altered] + sentences[index + 1 :]
    return None


@dataclasses.dataclass
class Negative:
    sentences: Sentences
    techniques: list[str]


class NegativeSampler:
    """Builds UNION negatives. ``pool`` holds sentences of other stories for sentence substitution."""

    def __init__(self, lexicon: KeywordLexicon, pool: list[list[str]], seed: int = 42):
        self.lexicon = lexicon
        self.pool = pool
        self.seed = seed
        self.code_version = NEGATIVES_CODE

    def rng_for(self, story_id: str) -> random.Random:
        # one generator per story: reproducible whatever order or process handles it
        return random.Random(f"{self.seed}:{story_id}")

    def apply(self, technique: str, sentences: Sentences, start: int, rng: random.Random, tags=None) -> Sentences | None:
        if technique == "repetition":
            return repetition(sentences, start, rng)
        if technique == "substitution":
            return substitution(sentences, start, rng, self.lexicon, self.pool, tags)
        if technique == "reordering":
            return reorder(sentences, start, rng)
        if technique == "negation":
            return alter_negation_in_story(sentences, start, rng)
        raise KeyError(f"unknown technique {technique!r}; choose from {sorted(TECHNIQUE_WEIGHTS)}")

    def draw_techniques(self, rng: random.Random) -> list[str]:
        """The techniques to try, in order: the drawn ones first, then the rest as fallbacks."""
        remaining = dict(TECHNIQUE_WEIGHTS)
        order = []
        while remaining:
            names = list(remaining)
            chosen = rng.choices(names, weights=[remaining[n] for n in names])[0]
            order.append(chosen)
            del remaining[chosen]
        return order

    def sample(self, sentences: Sentences, start: int, rng: random.Random, tags=None) -> Negative | None:
        """A negative for ``sentences`` (token lists; ``sentences[:start]`` is the context).

        ``tags`` are the story's Penn tags, if already computed. Returns ``None``
        only if no technique can change the story (e.g. a story with no
        sentence after its context).
        """
        for _ in range(MAX_ATTEMPTS):
            wanted = rng.choices(NUM_TECHNIQUES, weights=NUM_TECHNIQUES_WEIGHTS)[0]
            current, applied = sentences, []
            for technique in self.draw_techniques(rng):
                if len(applied) == wanted:
                    break
                # tags describe the source only; after a change, techniques retag
                result = self.apply(technique, current, start, rng, tags if current is sentences else None)
                if result is not None and result != current:
                    current = result
                    applied.append(technique)
            if applied and current != sentences:
                return Negative(sentences=current, techniques=applied)
        return None
