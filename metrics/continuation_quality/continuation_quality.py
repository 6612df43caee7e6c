"""Continuation quality: overall, relevance and interestingness of a next sentence (Sagarkar et al., 2018)."""
import evaluate

# imported as a module: evaluate takes the first Metric class it finds in this namespace
from storyeval import metric_base
from storyeval.models.citations import CONTINUATION_QUALITY as _CITATION
from storyeval.models.continuation.model import CRITERIA

_DESCRIPTION = """\
Scores a story continuation given its context on three criteria, overall quality,
relevance and interestingness, with a small network over character n-gram
encodings of both texts and hand-built features (length, n-gram LM score, IDF,
(P)PMI between context and continuation words, entity mentions).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): the continuations to score, as written; an empty list with
        nothing queued raises ValueError.
    contexts (`list` of `str`): the preceding text of each continuation.
""" + metric_base.runtime_options_doc(256, "pairs", int8=False) + """Returns:
    overall, relevance, interestingness (`list` of `float`): one score per pair,
        on the 1-5 scale of the training ratings; higher is better.
    mean_overall, mean_relevance, mean_interestingness (`float`): their means.
    settings (`str`): checkpoint, precision and versions the scores were computed with.
Examples:
    >>> metric = evaluate.load("continuation_quality")
    >>> results = metric.compute(predictions=["He gave the phone back."], contexts=["Ken found a phone at the bar."])
    >>> sorted(results)[:3]
    ['interestingness', 'mean_interestingness', 'mean_overall']
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ContinuationQuality(metric_base.ContinuationMetric):
    METRIC = "continuation_quality"
    CRITERIA = CRITERIA
    CITATION = _CITATION
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION
    REFERENCE_URLS = ["https://aclanthology.org/S18-2024/"]
