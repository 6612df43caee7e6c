"""story_quality: UNION, plot coherence and continuation quality in one call, on a percentile scale."""
import datasets
import evaluate

# imported as a module: evaluate takes the first Metric class it finds in this namespace
from storyeval import metric_base
from storyeval.analysis import suite
from storyeval.inputs import check_same_length, check_texts
from storyeval.models.citations import CONTINUATION_QUALITY, PLOT_COHERENCE, UNION

_CITATION = "\n".join([UNION, PLOT_COHERENCE, CONTINUATION_QUALITY])  # the suite runs all three metrics

_DESCRIPTION = """\
Runs the bundled story metrics together and reports each score also as a
percentile of human-written stories: the share of the corpus's held-out
human-written test stories that the same checkpoint scores lower. `combined`
is one number per story (0-100, higher is better): the plain mean of the
percentiles (`combination="mean"`), or, for configs that have them, a weighted
mean with weights fitted on held-out auto-constructed and model-generated pairs
(`combination="learned"`), never on a human-judged set.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): the generated stories (or continuations, with `contexts`); an empty list
        with nothing queued raises ValueError.
    contexts (`list` of `str`, optional): the prompt or opening each prediction continues.
        With them the story metrics score context + prediction and continuation quality
        joins `combined`; without them continuation quality is left out.
    batch_size (`int`, defaults to 16), device (`str`, optional), progress_bar (`bool`).
    dtype (`str`, optional): "float32" (default), or "int8" (CPU): the story metrics' int8 copies, where the
        config holds the int8 fidelity rule (refused in one line otherwise); continuation quality stays float32.
    combination (`str`, optional): "mean" or "learned"; defaults to the config's own (see the
        metric card).
Returns:
    union, plot_coherence (roc, roc-base, wp-base) (`list` of `float`): each metric's scores.
    union_percentile, plot_coherence_percentile (`list` of `float`): the same as percentiles (0-100).
    continuation_quality_overall, _relevance, _interestingness and their `_percentile`s:
        with `contexts` only.
    combined (`list` of `float`): the (weighted) mean of the percentiles (continuation quality
        by its overall criterion), per story.
    mean_combined (`float`): their mean.
    settings (`str`): what produced the result: the checkpoints that took part, joined by "+",
        their precision, the library versions and the percentiles' reference (corpus, split,
        commit). Compare results only when it matches.
    percentile_references (`dict`): per metric, its checkpoint and its reference's provenance
        (builder, split, number of stories, commit, command).
    combination (`dict`): the rule behind `combined` ("mean" or "learned"), each metric's
        weight, and for "learned" where the weights were fitted.
Examples:
    >>> story_quality = evaluate.load("story_quality", "roc")
    >>> results = story_quality.compute(predictions=["Ken was at the bar. He noticed a phone on the floor."])
    >>> sorted(results)[:4]
    ['combination', 'combined', 'mean_combined', 'percentile_references']
"""


# what a story queued without a context stores in the contexts column (evaluate refuses None in a
# string column, and an empty string is bad input that must stay an error)
NO_CONTEXT = "\x00no context"


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class StoryQuality(metric_base.CheckpointMetric):
    METRIC = "story_quality"
    INPUTS = ("predictions", "contexts")
    DTYPES = ("float32", "int8")

    def _info(self) -> evaluate.MetricInfo:
        if self.config_name == "default":
            metric_base.say_default("story_quality", suite.DEFAULT_SUITE_CONFIG, suite.FAST_SUITE_CONFIG)
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # contexts are optional: a call without them queues NO_CONTEXT
            features=datasets.Features({"predictions": datasets.Value("string"), "contexts": datasets.Value("string")}),
            reference_urls=["https://arxiv.org/abs/2009.07602"],
        )

    def _build_data_dir(self):
        # evaluate makes this folder from the config name: refuse any name but the suite's first, so a path-like one
        # ("/some/folder") is not created before the ValueError
        suite.check_config(self.config_name)
        return evaluate.Metric._build_data_dir(self)

    def _download_and_prepare(self, dl_manager):
        local_only = True if getattr(dl_manager.download_config, "local_files_only", False) else None
        self.suite = suite.StoryQuality(self.config_name, local_files_only=local_only)  # an unknown config: ValueError

    @staticmethod
    def check_inputs(predictions, contexts):
        predictions = check_texts(predictions, "predictions")
        if contexts is None:
            return predictions, [NO_CONTEXT] * len(predictions)
        if isinstance(contexts, list) and contexts and all(c == NO_CONTEXT for c in contexts):
            return predictions, contexts  # compute() queueing a call without contexts
        contexts = check_texts(contexts, "contexts")
        check_same_length(predictions=predictions, contexts=contexts)
        return predictions, contexts

    def add_batch(self, *, predictions=None, contexts=None, references=None, **kwargs):
        """Queue stories (and optionally their contexts) for the next ``compute()``."""
        self.check_reference_free(references)
        predictions, contexts = self.check_inputs(predictions, contexts)
        super().add_batch(predictions=predictions, contexts=contexts, **kwargs)

    def add(self, *, prediction=None, context=None, reference=None, **kwargs):
        """Queue one story (and optionally its context) for the next ``compute()``."""
        self.check_reference_free(reference)
        (prediction,), (context,) = self.check_inputs([prediction], None if context is None else [context])
        super().add(prediction=prediction, contexts=context, **kwargs)

    def compute(self, *, predictions=None, contexts=None, references=None, **kwargs):
        """Score ``predictions`` (with optional ``contexts``) and anything queued by ``add``/``add_batch``."""
        self.check_reference_free(references)
        self.check_runtime_options(kwargs)
        self.suite.combination(kwargs.get("combination"))  # a bad combination fails before evaluate consumes the queue
        if predictions is None and contexts is None and self.has_queued_inputs():
            return super().compute(**kwargs)
        predictions, contexts = self.check_inputs(predictions, contexts)
        if not predictions and not self.has_queued_inputs():
            raise metric_base.nothing_to_score("stories")
        return super().compute(predictions=predictions, contexts=contexts, **kwargs)

    def _compute(self, predictions, contexts, batch_size: int = 16, device=None, progress_bar: bool = False,
                 combination: str | None = None, dtype=None):  # dtype: float32 or int8, named or not (check_runtime_options)
        given = [c != NO_CONTEXT for c in contexts]
        if any(given) and not all(given):
            raise ValueError("give a context for every story or for none (some queued batches had contexts, some not)")
        if not predictions:  # only empty batches were queued
            raise metric_base.nothing_to_score("stories")
        return self.suite.score(predictions, contexts if all(given) else None, batch_size=batch_size, device=device,
                                progress_bar=progress_bar, combination=combination, dtype=dtype)
