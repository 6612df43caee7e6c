"""``story_quality``: every bundled metric in one call, each score also as a percentile of human stories.

    from storyeval.analysis.suite import StoryQuality
    suite = StoryQuality("roc")                       # loads each checkpoint once
    result = suite.score(stories)                     # or suite.score(continuations, contexts=prompts)
    result["combined"]                                # one number per story, 0-100

Components per config (the checkpoint's corpus is the config's):

* ``roc``: UNION (union-roc), plot coherence (plot-coherence-roc) and, with
  ``contexts``, continuation quality (its ``overall`` criterion);
* ``wp``: UNION (union-wp) and, with ``contexts``, continuation quality (the
  MiniLM plot-coherence checkpoint for WP did not ship, so it is not part of ``wp``);
* ``roc-base``: ``roc`` with the base tier's UNION and plot coherence
  (union-roc-base, plot-coherence-roc-base);
* ``wp-base``: the base tier's UNION and plot coherence for WritingPrompts
  (union-wp-base, plot-coherence-wp-base) and, with ``contexts``, continuation
  quality; its default combination is ``"learned"``.

Each score is turned into a percentile with the checkpoint's reference
distribution for the config's corpus (``storyeval.analysis.percentiles``): the share, in
percent, of human-written test stories of that corpus that score lower.
``combined`` comes from one of two rules, ``combination``:

* ``"mean"``: the plain mean of the components' percentiles, one per story: a
  fixed rule, with no weight fitted on anything;
* ``"learned"``: a weighted mean of the same percentiles, with non-negative
  weights that sum to one, fitted on held-out auto-constructed and
  model-generated pairs (``python -m storyeval_training.recipes.fit_suite``; never on a
  human-judged set) and stored in ``suite_weights.json`` beside this module, one
  set for calls without contexts and one for calls with them.

Both stay on the 0-100 percentile scale. Each config names its default rule in
that file (``"mean"`` for a config without learned weights).

``contexts`` are the prompts or openings the ``predictions`` continue. With
them, the story metrics score ``context + " " + prediction`` (the story as a
reader sees it, its opening first, as the checkpoints were trained) and
continuation quality scores each prediction given its context. Without them,
the story metrics score each prediction alone and continuation quality is left
out (no keys, and not in ``combined``): it only judges a continuation against
its context, and guessing a context from the story would score something it was
not trained on. ``combined`` therefore means different things with and without
contexts: compare it only between calls made the same way.

Every result also carries ``settings``, one string naming what produced it, as
each metric's does: the checkpoints that took part, joined by ``+``, their
precision and the library versions, then the reference the percentiles come from
(corpus, split and the commit that built it), e.g.
``union-roc+plot-coherence-roc_fp32_storyeval-0.1.0.dev0_transformers-5.24_torch-2.13_percentiles-roc-test-5cc910f``;
and ``percentile_references``: per part, its checkpoint and its reference's
provenance (builder, split, number of stories, commit, command).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from storyeval.inputs import check_batch_size, check_progress_bar, check_same_length, check_texts


class SuitePart(NamedTuple):
    """One part of a config. ``name`` keys its columns in a result and its weight in ``combined``; ``metric`` is the
    scorer that loads ``config`` (the metric's config name, or a checkpoint folder). A part is named after its metric
    unless a config has two parts of one metric."""

    name: str
    metric: str
    config: str


def suite_part(metric: str, config: str, name: str | None = None) -> SuitePart:
    """A part named ``name`` (default: its metric). Continuation quality keeps its metric's name: only it needs
    contexts, and its columns are one per criterion; no other part may take that name."""
    name = name or metric
    if (metric == "continuation_quality") != (name == "continuation_quality"):
        raise ValueError(f"part {name!r} of metric {metric!r}: only continuation_quality's part is named continuation_quality")
    return SuitePart(name, metric, config)


# config -> its ordered parts; continuation quality needs contexts. The base configs keep `deltascore`: the suite
# combines its `overall` criterion, where `deltascore-base` is not clearly better (BENCHMARKS.md), at about a
# hundredth of the speed
SUITE_CONFIGS: dict[str, tuple[SuitePart, ...]] = {
    "roc": (suite_part("union", "roc"), suite_part("plot_coherence", "roc"), suite_part("continuation_quality", "deltascore")),
    "wp": (suite_part("union", "wp"), suite_part("continuation_quality", "deltascore")),
    "roc-base": (suite_part("union", "roc-base"), suite_part("plot_coherence", "roc-base"),
                 suite_part("continuation_quality", "deltascore")),
    "wp-base": (suite_part("union", "wp-base"), suite_part("plot_coherence", "wp-base"),
                suite_part("continuation_quality", "deltascore")),
}
# the config that passed the first checks best on the check's validation split (issue 86; first_checks.md), and the
# MiniLM suite a load of it names, one argument away
DEFAULT_SUITE_CONFIG = "roc-base"
FAST_SUITE_CONFIG = "roc"
# continuation quality's criterion that enters ``combined``: the overall rating, which the other two refine
CONTINUATION_CRITERION = "overall"


# what every result carries besides the per-story keys and mean_combined: what produced it
PROVENANCE_KEYS = ["settings", "percentile_references", "combination"]


def percentile_key(name: str) -> str:
    """The result key of the percentile the part ``name`` enters ``combined`` with."""
    return f"{name}_{CONTINUATION_CRITERION}_percentile" if name == "continuation_quality" else f"{name}_percentile"


def output_keys(config: str, with_contexts: bool, parts: Sequence[SuitePart] | None = None) -> list[str]:
    """The per-story keys :meth:`StoryQuality.score` returns for ``config`` (or for ``parts``), in order."""
    from storyeval.models.continuation.model import CRITERIA

    keys = []
    for part in SUITE_CONFIGS[config] if parts is None else parts:
        if part.name == "continuation_quality":
            if with_contexts:
                keys += [f"{part.name}_{criterion}{suffix}" for criterion in CRITERIA for suffix in ("", "_percentile")]
        else:
            keys += [part.name, f"{part.name}_percentile"]
    return keys + ["combined"]


def check_dtype(dtype) -> None:
    """Where the suite scores in float32 only (comparisons, datasets, rewards): None or float32 itself (the precision
    it uses anyway) pass, any other precision is refused."""
    if dtype is not None and str(dtype) not in ("float32", "torch.float32"):
        raise ValueError(f"story_quality scores in float32 only, not {dtype!r}: pass dtype='float32' or leave it out")


def score_dtype(dtype) -> str:
    """The precision a :meth:`StoryQuality.score` call scores in: ``"float32"`` (None, or named), or ``"int8"``: the story
    metrics (UNION, plot coherence) with their int8 copies, continuation quality in float32 (it has none); any other is
    refused."""
    if dtype is None or str(dtype) in ("float32", "torch.float32"):
        return "float32"
    if str(dtype) in ("int8", "torch.int8"):
        return "int8"
    raise ValueError(f"story_quality scores in float32, or in int8 through its story metrics, not {dtype!r}")


@dataclasses.dataclass(frozen=True)
class SuiteInt8Fidelity:
    """What a config measured with its story metrics in int8 keeps (its parts each hold the rule on their own,
    :data:`storyeval.scoring.int8.runtime.MEASURED_FIDELITY`): the rule's human-set and modern-text parts on the
    suite's own figures (``python -m benchmarks.agreement.story_quality_correlation --dtype int8``,
    ``python -m benchmarks.agreement.modern_breaks --int8-suite``)."""

    human_move: float | None  # the largest move of a story_quality coefficient BENCHMARKS.md reports, float32 to int8
    human_results: str | None
    modern_outside: int | None = None  # modern-text figures whose paired interval of int8 less float32 misses 0
    modern_figures: int | None = None
    modern_results: str | None = None

    def problem(self) -> str | None:
        from storyeval.scoring.int8.runtime import rule_misses, rule_problem

        return rule_problem("its combined score in int8", rule_misses(self.human_move, self.modern_outside, self.modern_figures))


# per config: the suite's own int8 record; a config without one is not offered int8 (tests/test_int8_fidelity.py checks
# each against its results files)
INT8_FIDELITY: dict[str, SuiteInt8Fidelity] = {
    # its parts hold the rule, but its combined score moves the WP contradictions' AUC by -0.0044, interval [-0.0093, -0.0002]
    "roc-base": SuiteInt8Fidelity(0.0020, "story_quality_correlation_roc_base_int8.json", 1, 48, "modern_breaks_r2_int8_roc_base.json"),
}


def suite_int8_problem(config: str, folders: dict[str, str]) -> str | None:
    """Why ``dtype="int8"`` is refused for ``config`` whose story parts are in ``folders`` (part name -> checkpoint folder),
    read from files before any model loads, or None: a part the int8 fidelity rule refuses, named with its own figures,
    or the config's own record (:data:`INT8_FIDELITY`)."""
    from storyeval.scoring.int8.runtime import checkpoint_int8_problem

    for folder in folders.values():
        if (problem := checkpoint_int8_problem(folder)) is not None:
            why = problem.removeprefix("dtype='int8' ").removesuffix("; score it in float32 or bfloat16")
            return f"story_quality {config} scores in int8 through its story metrics, and {why}; score it in float32"
    record = INT8_FIDELITY.get(config)
    if record is None:
        return f"dtype='int8' is not offered for story_quality {config}: its combined score in int8 was not measured; score it in float32"
    problem = record.problem()
    return None if problem is None else f"dtype='int8' is not offered for story_quality {config}: {problem}; score it in float32"


def story_part_folders(config: str, local_files_only: bool | None = None) -> dict[str, str]:
    """Part name -> checkpoint folder of ``config``'s story metrics (every part but continuation quality), no model loaded."""
    from storyeval.checkpoints import resolution as checkpoints

    return {part.name: str(checkpoints.resolve_checkpoint(part.metric, part.config, local_files_only=local_files_only))
            for part in SUITE_CONFIGS[check_config(config)] if part.name != "continuation_quality"}


def check_config(config: str) -> str:
    if config == "default":
        return DEFAULT_SUITE_CONFIG
    if config not in SUITE_CONFIGS:
        raise ValueError(f"unknown story_quality config {config!r}: choose one of {sorted(SUITE_CONFIGS) + ['default']}")
    return config


COMBINATIONS = ("mean", "learned")
# per config: its default combination and the learned weights (written by storyeval_training.recipes.fit_suite)
WEIGHTS_FILE = Path(__file__).with_name("suite_weights.json")


@functools.lru_cache(maxsize=1)
def learned_weights() -> dict[str, dict]:
    """config -> {"default", "without_contexts", "with_contexts", "fitted"}; configs without learned weights are absent."""
    return json.loads(WEIGHTS_FILE.read_text(encoding="utf-8")) if WEIGHTS_FILE.is_file() else {}


def check_combination(config: str, combination: str | None) -> str:
    """The combination a call uses: ``combination``, or the config's default when it is None."""
    config = check_config(config)
    entry = learned_weights().get(config)
    if combination is None:
        return entry["default"] if entry else "mean"
    if combination not in COMBINATIONS:
        raise ValueError(f"unknown combination {combination!r}: choose one of {list(COMBINATIONS)}")
    if combination == "learned" and entry is None:
        raise ValueError(f"story_quality config {config!r} has no learned weights; configs with them: "
                         f"{sorted(learned_weights())}, or use combination='mean'")
    return combination


class StoryQuality:
    """Loads the config's checkpoints and reference distributions once; :meth:`score` scores many times."""

    def __init__(self, config: str = DEFAULT_SUITE_CONFIG, device=None, local_files_only: bool | None = None,
                 parts: Sequence[SuitePart] | None = None):
        """``parts``: parts (:func:`suite_part`) to load instead of the config's, for weighing candidate parts
        (``storyeval_training.recipes.fit_suite``); a suite built with them has no learned combination."""
        from storyeval.analysis.percentiles import load_reference
        from storyeval.checkpoints import resolution as checkpoints
        from storyeval.scoring.sequence import load_scorer

        self.config = check_config(config)
        self.custom_parts = parts is not None
        self.suite_parts = tuple(SUITE_CONFIGS[self.config] if parts is None else parts)
        names = [part.name for part in self.suite_parts]
        if len(set(names)) < len(names):
            raise ValueError(f"two parts share a name in {names}: name one of them (suite_part(..., name=...))")
        self.corpus = self.config.removesuffix("-base")  # the corpus of the config's checkpoints and references
        self.components = []  # (part name, checkpoint folder, scorer, reference)
        for part in self.suite_parts:
            folder = checkpoints.resolve_checkpoint(part.metric, part.config, local_files_only=local_files_only)
            # the reference first: a checkpoint without one fails before any model loads
            reference = load_reference(folder, self.corpus)
            self.components.append((part.name, folder, load_scorer(part.metric, folder, device=device), reference))

    def parts(self, with_contexts: bool) -> list[tuple]:
        """The components that score a call made with or without contexts (continuation quality needs them)."""
        return [part for part in self.components if with_contexts or part[0] != "continuation_quality"]

    def combination(self, combination: str | None) -> str:
        """The combination a call uses (see :func:`check_combination`)."""
        if self.custom_parts:
            if combination not in (None, "mean"):
                raise ValueError(f"a suite loaded with its own parts combines by the plain mean only, not {combination!r}")
            return "mean"
        return check_combination(self.config, combination)

    def weights(self, combination: str, with_contexts: bool) -> dict[str, float]:
        """part name -> its weight in ``combined``."""
        names = [name for name, *_ in self.parts(with_contexts)]
        if combination == "mean":
            return {name: 1 / len(names) for name in names}
        weights = learned_weights()[self.config]["with_contexts" if with_contexts else "without_contexts"]
        if sorted(weights) != sorted(names):
            raise ValueError(f"suite_weights.json's {self.config} weights are for {sorted(weights)}, not this suite's "
                             f"{sorted(names)}: refit them with python -m storyeval_training.recipes.fit_suite")
        return weights

    def combine(self, result: dict, combination: str, with_contexts: bool) -> list[float]:
        """``combined`` per story: the weighted mean of a result's part percentiles (continuation quality's by
        :data:`CONTINUATION_CRITERION`), for a result of :meth:`score` made with or without contexts."""
        weights = self.weights(combination, with_contexts)
        columns = {name: result[percentile_key(name)] for name in weights}
        return [sum(weights[name] * values[i] for name, values in columns.items()) for i in range(len(next(iter(columns.values()))))]

    def settings(self, with_contexts: bool = False, combination: str | None = None, dtype=None) -> str:
        """The settings string of a result (see the module docstring): its scores compare with another's only when it
        matches. ``dtype="int8"``: the story metrics' int8 copies (continuation quality stays float32)."""
        from storyeval.scoring.signature import settings_string

        combination = self.combination(combination)
        parts = self.parts(with_contexts)
        checkpoints = "+".join(scorer.name for _, _, scorer, _ in parts)
        weights = "+".join(scorer.weights or "unknown" for _, _, scorer, _ in parts)
        if score_dtype(dtype) == "int8" and self._int8_falls_back():
            dtype = "float32"  # a CPU without int8 instructions: the story metrics score in float32
        return self._settings(checkpoints, parts, combination, settings_string(checkpoints, score_dtype(dtype), weights))

    def _int8_falls_back(self) -> bool:
        return any(scorer._int8_falls_back() for name, _, scorer, _ in self.components if name != "continuation_quality")

    def _settings(self, checkpoints: str, parts, combination: str, settings: str) -> str:
        splits = sorted({f"{reference.corpus}-{reference.provenance.get('split', 'unknown')}" for *_, reference in parts})
        commits = sorted({str(reference.provenance["provenance"].get("commit", "unknown")) for *_, reference in parts})
        learned = f"_combined-learned-{learned_weights()[self.config]['fitted']['commit']}" if combination == "learned" else ""
        return f"{settings}_percentiles-{'+'.join(splits)}-{'+'.join(commits)}{learned}"

    def percentile_references(self, with_contexts: bool = False) -> dict[str, dict]:
        """Per part of a result: its checkpoint and where its percentiles' reference came from."""
        return {name: {"checkpoint": scorer.name, "corpus": reference.corpus, **reference.provenance}
                for name, _, scorer, reference in self.parts(with_contexts)}

    def provenance(self, with_contexts: bool, combination: str, dtype=None) -> dict:
        rule = {"rule": combination, "weights": self.weights(combination, with_contexts)}
        if combination == "learned":
            rule["fitted"] = learned_weights()[self.config]["fitted"]
        return {"settings": self.settings(with_contexts, combination, dtype),
                "percentile_references": self.percentile_references(with_contexts), "combination": rule}

    def empty_result(self, with_contexts: bool, combination: str | None = None, dtype=None) -> dict:
        return {**{key: [] for key in output_keys(self.config, with_contexts, self.suite_parts)}, "mean_combined": math.nan,
                **self.provenance(with_contexts, self.combination(combination), dtype)}

    def int8_problem(self) -> str | None:
        """Why ``dtype="int8"`` is refused for this suite (:func:`suite_int8_problem`), or None; a suite loaded with its
        own parts was never measured."""
        if self.custom_parts:
            return "dtype='int8' is not offered for a story_quality suite loaded with its own parts: score it in float32"
        return suite_int8_problem(self.config, {name: str(folder) for name, folder, _, _ in self.components if name != "continuation_quality"})

    def score(self, predictions: Sequence[str], contexts: Sequence[str] | None = None, batch_size: int = 16,
              device=None, progress_bar: bool = False, combination: str | None = None, dtype=None) -> dict:
        """Each component's scores and percentiles, and ``combined`` (by ``combination``: None is the config's
        default), per story. ``dtype="int8"`` scores the story metrics with their int8 copies, where the config holds
        the int8 fidelity rule (:meth:`int8_problem`; refused otherwise); continuation quality stays float32."""
        combination = self.combination(combination)
        dtype = score_dtype(dtype)
        if dtype == "int8" and (problem := self.int8_problem()) is not None:
            raise ValueError(problem)
        predictions = check_texts(predictions, "predictions")
        if contexts is not None:
            contexts = check_texts(contexts, "contexts")
            check_same_length(predictions=predictions, contexts=contexts)
        batch_size = check_batch_size(batch_size)
        check_progress_bar(progress_bar)
        if not predictions:
            return self.empty_result(contexts is not None, combination, dtype)
        stories = predictions if contexts is None else [f"{c} {p}" for c, p in zip(contexts, predictions)]
        result = {}
        for name, _, scorer, reference in self.components:
            if name == "continuation_quality":
                if contexts is None:
                    continue
                by_criterion = scorer.score(contexts, predictions, batch_size=batch_size, device=device, progress_bar=progress_bar)
                for criterion, values in by_criterion.items():
                    result[f"{name}_{criterion}"] = values
                    result[f"{name}_{criterion}_percentile"] = reference.percentile(values, criterion)
            else:
                values = scorer.score(stories, batch_size=batch_size, device=device, progress_bar=progress_bar, dtype=dtype)
                result[name] = values
                result[f"{name}_percentile"] = reference.percentile(values)
        result["combined"] = self.combine(result, combination, contexts is not None)
        result["mean_combined"] = sum(result["combined"]) / len(result["combined"])
        return {**result, **self.provenance(contexts is not None, combination, dtype)}
