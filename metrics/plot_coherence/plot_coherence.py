"""Plot-guided plausibility of a story (Ghazarian et al., NAACL 2021)."""
import evaluate

# imported as a module: evaluate takes the first Metric class it finds in this namespace
from storyeval import metric_base
from storyeval.models.citations import PLOT_COHERENCE as _CITATION

_DESCRIPTION = """\
Plot coherence scores how plausible a story is, without a reference: a
classifier trained to tell human-written stories from implausible ones that a
language model wrote from manipulated plots (reordered, contradicted, repeated
or substituted storylines), selected by adversarial filtering to be hard. The
score is the probability that the story is plausible. Higher is better.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): stories to score, as written (the metric lower-cases
        and tokenises them itself). An empty list with nothing queued raises ValueError.
    contexts (`list` of `str`, optional): accepted and ignored, so that
        `evaluate.combine` can pass continuation_quality's inputs to this metric too.
""" + metric_base.runtime_options_doc(16, "windows") + """Returns:
    scores (`list` of `float`): one score in [0, 1] per story, higher is more plausible.
    mean_score (`float`): their mean over the scored stories (NaN when none could be scored).
    settings (`str`): checkpoint, precision and versions the scores were computed with.
Examples:
    >>> plot_coherence = evaluate.load("plot_coherence", "roc")
    >>> results = plot_coherence.compute(predictions=["Bob was trying to fall asleep when the phone rang."])
    >>> len(results["scores"]), 0 <= results["scores"][0] <= 1
    (1, True)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class PlotCoherence(metric_base.StoryScoreMetric):
    METRIC = "plot_coherence"
    CITATION = _CITATION
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION
    REFERENCE_URLS = ["https://aclanthology.org/2021.naacl-main.343/", "https://github.com/PlusLabNLP/Plot-guided-Coherence-Evaluation"]
