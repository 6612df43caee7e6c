"""Plot-guided plausibility of a story (Ghazarian et al., NAACL 2021)."""
import evaluate

# imported as a module: evaluate takes the first Metric class it finds in this namespace
from storyeval import metric_base

_CITATION = """\
@inproceedings{ghazarian-etal-2021-plot,
  title = {Plot-guided Adversarial Example Construction for Evaluating Open-domain Story Generation},
  author = {Ghazarian, Sarik and Liu, Zixi and S M, Akash and Weischedel, Ralph and Galstyan, Aram and Peng, Nanyun},
  booktitle = {Proceedings of the 2021 Conference of the North American Chapter of the Association for Computational Linguistics: Human Language Technologies (NAACL-HLT)},
  year = {2021},
  pages = {4334--4344}
}
"""

_DESCRIPTION = """\
Plot coherence scores how plausible a story is, without a reference: a
classifier trained to tell human-written stories from implausible ones that a
language model wrote from manipulated plots (reordered, contradicted, repeated
or substituted storylines), selected by adversarial filtering to be hard. The
score is the probability that the story is plausible. Higher is better.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): stories to score.
    batch_size (`int`, defaults to 16): windows scored per forward pass.
    device (`str`, optional): e.g. "cpu", "cuda:1"; defaults to CUDA when available.
    progress_bar (`bool`, defaults to False): show a progress bar.
    dtype (`str`, optional): "float32" (default), "bfloat16", "float16" or "int8". bfloat16 is
        about 2x faster on CPUs with bfloat16 instructions; "int8" runs an int8 copy on the
        CPU in CTranslate2 (`pip install ctranslate2`, exported once and cached). Scores move
        slightly (int8's more), so compare scores computed in one dtype only.
Returns:
    scores (`list` of `float`): one score in [0, 1] per story, higher is more plausible.
    mean_score (`float`): their mean (NaN for no stories).
Examples:
    >>> plot_coherence = evaluate.load("metrics/plot_coherence", "roc")
    >>> results = plot_coherence.compute(predictions=["bob was trying to fall asleep when the phone rang ."])
    >>> len(results["scores"])
    1
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class PlotCoherence(metric_base.StoryScoreMetric):
    METRIC = "plot_coherence"
    CITATION = _CITATION
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION
    REFERENCE_URLS = ["https://aclanthology.org/2021.naacl-main.343/", "https://github.com/PlusLabNLP/Plot-guided-Coherence-Evaluation"]
