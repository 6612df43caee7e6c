"""Scores of one list of stories by checkpoint folders and ``story_quality`` suites, each checkpoint scored once.

The pair benchmarks (``wp_kinds``, ``modern_breaks``) score the same stories with several checkpoints and with
suites whose parts are some of those checkpoints: a checkpoint's scores are keyed by its files, not its path or
label, so a suite's part that is also a ``--checkpoint`` (or the same files in another folder) is scored once.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

SUITE_HELP = ("LABEL=CONFIG[:COMBINATION]: a story_quality config, by its default combination or the one named "
              "(mean, learned); repeatable")


def parse_suites(values: list[str]) -> dict[str, tuple[str, str | None]]:
    """``--suite LABEL=CONFIG[:COMBINATION]`` values: label -> (config, combination or None for the config's default).
    A malformed value, an unknown config or a combination the config lacks raises ValueError, before any model loads."""
    from storyeval.analysis.suite import check_combination, check_config

    suites = {}
    for value in values:
        label, sep, spec = value.partition("=")
        if not sep or not label or not spec:
            raise ValueError(f"--suite expects label=config[:combination], got {value!r}")
        if label in suites:
            raise ValueError(f"--suite label {label!r} is given twice: each row needs its own label")
        config, _, combination = spec.partition(":")
        config = check_config(config)
        check_combination(config, combination or None)
        suites[label] = (config, combination or None)
    return suites


FITTED_HELP = ("LABEL=REPORT: the suite a fit_suite report fitted, with its added parts (if any) and its fitted weights for "
               "whole stories, as a candidate suite is measured before it ships; repeatable")


def parse_fitted_suites(values: list[str], taken: set[str] = frozenset()) -> dict[str, dict]:
    """``--fitted-suite LABEL=REPORT`` values: label -> the report's config, parts and whole-story weights (of its fit
    with added parts, else of its own). A missing or unreadable report, or a label given twice or already ``taken``
    by another row, raises ValueError, before any model loads."""
    import json

    from storyeval_training.recipes.fit_suite import part_spec

    fitted = {}
    for value in values:
        label, sep, path = value.partition("=")
        if not sep or not label or not path:
            raise ValueError(f"--fitted-suite expects label=report, got {value!r}")
        if label in fitted or label in taken:
            raise ValueError(f"--fitted-suite label {label!r} is given twice: each row needs its own label")
        if not Path(path).is_file():
            raise ValueError(f"--fitted-suite {label}: no report at {path}")
        try:
            report = json.loads(Path(path).read_text(encoding="utf-8"))
            fit = report["fits"].get("with_added") or report["fits"]["own"]
            weights = fit["without_contexts"]["weights"]
            # a part with no whole-story weight (continuation quality) is not loaded
            kept = [(spec, part) for spec, part in ((spec, part_spec(spec)) for spec in fit["parts"]) if part.name in weights]
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(f"--fitted-suite {label}: {path} is not a fit_suite report with a fit of whole stories ({error!r})") from None
        fitted[label] = {"report": path, "config": report["config"], "parts": [part for _, part in kept],
                         "part_labels": [spec for spec, _ in kept], "weights": weights}
    return fitted


def checkpoint_key(folder: str) -> str:
    return hashlib.sha256(b"".join((Path(folder) / name).read_bytes() for name in ("config.json", "model.safetensors"))).hexdigest()


class StoryScores:
    """``stories`` scored by any number of checkpoints and suites (:meth:`checkpoint`, :meth:`suite`)."""

    def __init__(self, stories: list[str], batch_size: int, progress_bar: bool = True):
        self.stories, self.batch_size, self.progress_bar = stories, batch_size, progress_bar
        self._scored: dict[str, dict[str, float]] = {}  # checkpoint files' hash (+ "/shuffled": the copies) -> text -> score
        self._copies: dict[str, list[str]] | None = None  # story -> its shuffled copies, made once

    def _scores(self, folder: str, scorer) -> dict[str, float]:
        key = checkpoint_key(folder)
        if key not in self._scored:
            self._scored[key] = dict(zip(self.stories, scorer.score(self.stories, batch_size=self.batch_size,
                                                                    progress_bar=self.progress_bar)))
        return self._scored[key]

    def _percentiles(self, suite, int8_schemes: dict[str, str] | None = None) -> dict[str, list[float]]:
        """``<part>_percentile`` -> each story's percentile, for every part a suite scores whole stories with (each part
        scored as a checkpoint; with ``int8_schemes``, a dict, as its int8 copy, by :meth:`int8_checkpoint`)."""
        result = {}
        for name, folder, scorer, reference in suite.parts(with_contexts=False):
            scores = self._scores(folder, scorer) if int8_schemes is None else self.int8_checkpoint(str(folder), int8_schemes)[0]
            result[f"{name}_percentile"] = reference.percentile([scores[s] for s in self.stories])
        return result

    def checkpoint(self, folder: str) -> tuple[dict[str, float], dict]:
        """story -> score of a UNION or plot-coherence checkpoint folder, and the fields its results record."""
        from storyeval.scoring.sequence import load_story_classifier
        from storyeval_training.export.provenance import portable_path

        scorer = load_story_classifier(folder, device="cpu")
        return self._scores(folder, scorer), {"path": portable_path(str(folder)), "settings": scorer.settings()}

    def int8_checkpoint(self, folder: str, schemes: dict[str, str] | None = None) -> tuple[dict[str, float], dict]:
        """story -> score of a checkpoint folder's int8 copy (its measured export scheme, or the one ``schemes`` names for
        its checkpoint name), whatever the fidelity rule says of it (this measures it), and the fields its results record."""
        from storyeval.checkpoints.resolution import checkpoint_name
        from storyeval.scoring.int8.runtime import Int8Model
        from storyeval.scoring.int8.scorer import INT8, load_int8_scorer
        from storyeval_training.export.provenance import portable_path

        scorer = load_int8_scorer(folder, scheme=(schemes or {}).get(checkpoint_name(folder)))
        model = scorer.model_in(INT8)
        if not isinstance(model, Int8Model):  # the scorer fell back to float32 (it warned why): no int8 row to measure
            raise RuntimeError(f"{folder}: no int8 copy on this CPU, so no int8 row: measure it on a CPU with int8 instructions")
        scheme = model.scheme
        key = f"{checkpoint_key(folder)}/int8/{scheme}"
        if key not in self._scored:
            self._scored[key] = dict(zip(self.stories, scorer.score(self.stories, batch_size=self.batch_size, progress_bar=self.progress_bar)))
        return self._scored[key], {"path": portable_path(str(folder)), "settings": scorer.settings("int8"), "dtype": "int8", "scheme": scheme}

    def self_contrast(self, folder: str, weight: float) -> tuple[dict[str, float], dict]:
        """story -> its score less ``weight`` times its shuffled copies' (:mod:`.self_contrast`), logits of a
        checkpoint folder's scores, and its fields; the copies are scored once per checkpoint, whatever the weight."""
        from storyeval.scoring.sequence import load_story_classifier
        from storyeval_training.export.provenance import portable_path

        from .self_contrast import COPIES, shuffled_copies

        if self._copies is None:  # before any scoring: a story with no shuffle stops the run here
            self._copies = {story: shuffled_copies(story) for story in self.stories}
        scorer = load_story_classifier(folder, device="cpu")
        self._scores(folder, scorer)
        key = f"{checkpoint_key(folder)}/shuffled"
        if key not in self._scored:
            texts = sorted({copy for story_copies in self._copies.values() for copy in story_copies})
            self._scored[key] = dict(zip(texts, scorer.score(texts, batch_size=self.batch_size, progress_bar=self.progress_bar)))
        return self._contrast(folder, weight), {"path": portable_path(str(folder)), "settings": scorer.settings(),
                                                "self_contrast": {"copies": COPIES, "weight": weight}}

    def _part_scores(self, key: str, parts_of, part_scorer) -> dict[str, list[float]]:
        """story -> ``part_scorer``'s scores of the texts ``parts_of(story)`` (none: an empty list), each text scored once
        and kept under ``key``, so that any weight and share mix them without scoring again."""
        if key not in self._scored:
            parts = {story: parts_of(story) for story in self.stories}
            texts = sorted({text for story_parts in parts.values() for text in story_parts})
            scored = dict(zip(texts, part_scorer.score_checked(texts, batch_size=self.batch_size, progress_bar=self.progress_bar)))
            self._scored[key] = {story: [scored[t] for t in ts] for story, ts in parts.items()}
        return self._scored[key]

    def _part_mix(self, plain: dict[str, float], part_scores: dict[str, list[float]], weight: float, share: float) -> dict[str, float]:
        from storyeval.scoring.ending import lowest_mean, mixed

        return {story: mixed(plain[story], lowest_mean(part_scores[story], share), weight) if part_scores[story] else plain[story]
                for story in self.stories}

    def part_mix(self, kind: str, folder: str, part_folder: str, weight: float, share: float = 1.0,
                 sentences: int | None = None) -> tuple[dict[str, float], dict]:
        """story -> a checkpoint folder's score mixed with a part scorer's, and its fields: the shipped mix
        (:mod:`storyeval.scoring.ending`) of the ``--KIND`` option ``kind`` of :mod:`.ending_mix` (``ending``: the
        story's last sentences; ``neighbours``: every two neighbouring ones, the lowest ``share`` of them;
        ``opening-ending``: its first and last ones; ``runs``: every run of five; ``topic``: the whole story, by a sentence
        embedder), its parts what it reads of each
        story as the shipped scorer prepares them. Its config's ``ending_reads`` is also its field in the results, but
        for ``ending``'s, as it was before that option read parts as the mix does. Each checkpoint scores once,
        whatever the weight and share. ``sentences``: how many its part scorer reads, where not the option's own
        (``--part-sentences``)."""
        from storyeval.scoring.ending import mix_scorer
        from storyeval.scoring.sequence import load_story_classifier
        from storyeval_training.export.provenance import portable_path

        from .ending_mix import MIX_READS, load_part_scorer, part_reading, share_field

        reads, (count, fields) = MIX_READS[kind], part_reading(kind, sentences)
        scorer = load_story_classifier(folder, device="cpu")
        plain = self._scores(folder, scorer)
        mix = mix_scorer(reads, scorer, load_part_scorer(kind, part_folder), weight, count)
        # the count in the key: a part read at two counts is two sets of texts
        part_scores = self._part_scores(f"{checkpoint_key(part_folder)}/{reads} ({count} sentences) of {checkpoint_key(folder)}",
                                        mix.parts, mix.ending_scorer)
        return (self._part_mix(plain, part_scores, weight, share),
                {"path": portable_path(str(folder)), "settings": scorer.settings(),
                 "ending" if kind == "ending" else reads: {
                     "path": portable_path(str(part_folder)), "settings": mix.ending_scorer.settings(), **fields,
                     "weight": weight, **share_field(share)}})

    def shuffle_margins(self, folder: str) -> dict[str, float]:
        """story -> its logit less the mean logit of its shuffled copies, from the scores :meth:`self_contrast` made
        (no model is loaded again)."""
        return self._contrast(folder, 1.0)

    def _contrast(self, folder: str, weight: float) -> dict[str, float]:
        from .self_contrast import contrasted

        key = checkpoint_key(folder)
        plain, copies = self._scored[key], self._scored[f"{key}/shuffled"]
        return {story: contrasted(plain[story], [copies[copy] for copy in self._copies[story]], weight) for story in self.stories}

    def suite(self, config: str, combination: str | None = None, int8_schemes: dict[str, str] | None = None) -> tuple[dict[str, float], dict]:
        """story -> ``combined`` of a ``story_quality`` config by ``combination`` (None: the config's default; its parts
        scored as checkpoints, or with ``int8_schemes`` (a dict, maybe empty) as their int8 copies), and its fields."""
        from storyeval.analysis.suite import StoryQuality, check_config

        suite = StoryQuality(check_config(config))
        combination = suite.combination(combination)
        combined = dict(zip(self.stories, suite.combine(self._percentiles(suite, int8_schemes), combination, False)))
        dtype = {} if int8_schemes is None else {"dtype": "int8"}
        return combined, {"config": config, "settings": suite.settings(False, combination, **dtype), "combination": combination,
                          "weights": suite.weights(combination, False), **dtype}

    def fitted_suite(self, fitted: dict) -> tuple[dict[str, float], dict]:
        """story -> the weighted mean of the part percentiles of a :func:`parse_fitted_suites` entry (its parts scored as
        checkpoints), and its fields."""
        from storyeval.analysis.suite import StoryQuality
        from storyeval_training.export.provenance import portable, portable_path

        suite = StoryQuality(fitted["config"], parts=fitted["parts"])
        percentiles = self._percentiles(suite)
        weights = fitted["weights"]
        combined = {story: sum(weights[name] * percentiles[f"{name}_percentile"][i] for name in weights)
                    for i, story in enumerate(self.stories)}
        return combined, {"config": fitted["config"], "fitted_report": portable_path(fitted["report"]),
                          "parts": portable(fitted["part_labels"]), "settings": suite.settings(False),
                          "combination": "fitted", "weights": fitted["weights"]}
