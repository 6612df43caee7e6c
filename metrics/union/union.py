"""UNION: an unreferenced metric for open-ended story generation (Guan & Huang, EMNLP 2020)."""
import evaluate

# imported as a module: evaluate takes the first Metric class it finds in this namespace
from storyeval import metric_base
from storyeval.models.citations import UNION as _CITATION

_DESCRIPTION = """\
UNION scores a story without any reference: a BERT-style encoder trained to tell
human-written stories from automatically perturbed ones (repeated plots,
antonym substitutions, shuffled sentences, flipped negations) gives the
probability that the story reads like a human-written one. Higher is better.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): stories to score, as written (the metric lower-cases,
        tokenises and replaces names itself); the first sentence (ROC) or the prompt (WP)
        should open the story, as in the training data. An empty list with nothing queued
        raises ValueError.
    contexts (`list` of `str`, optional): accepted and ignored, so that
        `evaluate.combine` can pass continuation_quality's inputs to this metric too.
""" + metric_base.runtime_options_doc(16, "windows") + """Returns:
    scores (`list` of `float`): one score in [0, 1] per story, higher is better.
    mean_score (`float`): their mean over the scored stories (NaN when none could be scored).
    settings (`str`): checkpoint, precision and versions the scores were computed with.
Examples:
    >>> union = evaluate.load("union", "roc")
    >>> results = union.compute(predictions=["Ken was at the bar. He noticed a phone on the floor."])
    >>> len(results["scores"]), 0 <= results["scores"][0] <= 1
    (1, True)
    >>> results["settings"].startswith("union-roc_fp32_storyeval-")
    True
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Union(metric_base.StoryScoreMetric):
    METRIC = "union"
    CITATION = _CITATION
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION
    REFERENCE_URLS = ["https://arxiv.org/abs/2009.07602", "https://github.com/thu-coai/UNION"]
