"""UNION: an unreferenced metric for open-ended story generation (Guan & Huang, EMNLP 2020)."""
import evaluate

# imported as a module: evaluate takes the first Metric class it finds in this namespace
from storyeval import metric_base

_CITATION = """\
@inproceedings{guan-huang-2020-union,
  title = {{UNION}: An Unreferenced Metric for Evaluating Open-ended Story Generation},
  author = {Guan, Jian and Huang, Minlie},
  booktitle = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year = {2020},
  pages = {9157--9166}
}
"""

_DESCRIPTION = """\
UNION scores a story without any reference: a BERT-style encoder trained to tell
human-written stories from automatically perturbed ones (repeated plots,
antonym substitutions, shuffled sentences, flipped negations) gives the
probability that the story reads like a human-written one. Higher is better.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): stories to score; the first sentence (ROC) or
        the prompt (WP) should open the story, as in the training data.
    batch_size (`int`, defaults to 16): windows scored per forward pass.
    device (`str`, optional): e.g. "cpu", "cuda:1"; defaults to CUDA when available.
    progress_bar (`bool`, defaults to False): show a progress bar.
    dtype (`str`, optional): "float32" (default), "bfloat16", "float16" or "int8". bfloat16 is
        about 2x faster on CPUs with bfloat16 instructions; "int8" runs an int8 copy on the
        CPU in CTranslate2 (`pip install ctranslate2`, exported once and cached). Scores move
        slightly (int8's more), so compare scores computed in one dtype only.
Returns:
    scores (`list` of `float`): one score in [0, 1] per story, higher is better.
    mean_score (`float`): their mean (NaN for no stories).
Examples:
    >>> union = evaluate.load("metrics/union", "roc")
    >>> results = union.compute(predictions=["[MALE] was at the bar . he noticed a phone on the floor ."])
    >>> len(results["scores"])
    1
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Union(metric_base.StoryScoreMetric):
    METRIC = "union"
    CITATION = _CITATION
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION
    REFERENCE_URLS = ["https://arxiv.org/abs/2009.07602", "https://github.com/thu-coai/UNION"]
