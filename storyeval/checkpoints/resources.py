"""Access to offline NLTK resources, with errors that name what is missing.

NLTK's own ``LookupError`` is long and suggests ``nltk.download``, which cannot
work on an offline machine; we raise a short error naming the resource and the
``NLTK_DATA`` variable instead.
"""
from __future__ import annotations

import functools
import os

import nltk

# resource name -> path inside an NLTK data folder
NLTK_RESOURCES = {
    "punkt_tab": "tokenizers/punkt_tab/english/",
    "averaged_perceptron_tagger_eng": "taggers/averaged_perceptron_tagger_eng/",
    "stopwords": "corpora/stopwords",
    "names": "corpora/names",
}


class MissingResourceError(LookupError):
    """An offline resource (NLTK data, a lexicon file) cannot be found."""


# (resource, NLTK search path) pairs already found. nltk.data.find stats every
# data folder on each call, and the scorers ask once per story.
_found: set[tuple[str, tuple[str, ...]]] = set()


def require_nltk(resource: str) -> None:
    """Raise :class:`MissingResourceError` naming ``resource`` if NLTK cannot find it."""
    key = (resource, tuple(nltk.data.path))
    if key in _found:
        return
    try:
        nltk.data.find(NLTK_RESOURCES[resource])
    except LookupError:
        searched = os.environ.get("NLTK_DATA", "<unset>")
        raise MissingResourceError(
            f"NLTK resource '{resource}' not found (NLTK_DATA={searched}). "
            f"Point NLTK_DATA at a folder holding '{NLTK_RESOURCES[resource]}', "
            f"or run `python -m nltk.downloader {resource}` on a machine with internet."
        ) from None
    _found.add(key)


def download_missing_nltk() -> list[str]:
    """Fetch the NLTK resources NLTK cannot find, into its default folder, for an online host
    such as a Hugging Face Space (offline, point NLTK_DATA at a copy instead); returns their names."""
    missing = []
    for resource in NLTK_RESOURCES:
        try:
            require_nltk(resource)
        except MissingResourceError:
            missing.append(resource)
    if missing and not nltk.download(missing, quiet=True):
        raise MissingResourceError(f"could not download the NLTK resources {missing}; set NLTK_DATA to a folder holding them")
    return missing


@functools.lru_cache(maxsize=None)
def stopwords() -> frozenset[str]:
    require_nltk("stopwords")
    from nltk.corpus import stopwords as sw

    return frozenset(sw.words("english"))


@functools.lru_cache(maxsize=None)
def first_names() -> tuple[frozenset[str], frozenset[str]]:
    """Lower-cased (male, female) first names from NLTK's ``names`` corpus."""
    require_nltk("names")
    from nltk.corpus import names

    male = frozenset(n.lower() for n in names.words("male.txt"))
    female = frozenset(n.lower() for n in names.words("female.txt"))
    return male, female


@functools.lru_cache(maxsize=1)
def pos_tagger():
    """The English averaged-perceptron tagger, loaded once, predicting with :class:`_ArrayPerceptron`."""
    require_nltk("averaged_perceptron_tagger_eng")
    from nltk.tag import PerceptronTagger

    tagger = PerceptronTagger()
    tagger.model.predict = _ArrayPerceptron(tagger.model).predict  # the instance's own: NLTK's class is left alone
    return tagger


class _ArrayPerceptron:
    """NLTK's ``AveragedPerceptron.predict`` with the weights held as one NumPy array (feature x label).

    NLTK adds the weights up one label at a time in Python dicts, which made tagging the largest cost of
    scoring continuations. This does the same float additions in the same order (per label: each feature
    in turn, ``value * weight``, summed down the rows of the gathered weights; a label a feature has no weight
    for gets ``+ 0.0``, which changes no sum) and breaks ties as NLTK does, by the larger label, so the tags
    are identical. The array is about 27 MB and takes a twentieth of a second to build.
    """

    def __init__(self, model):
        import numpy as np

        self._np = np
        self.classes = sorted(model.classes)
        label_index = {label: i for i, label in enumerate(self.classes)}
        self._row = {feature: i for i, feature in enumerate(model.weights)}
        entries = sum(len(weights) for weights in model.weights.values())
        rows = np.fromiter((i for i, weights in enumerate(model.weights.values()) for _ in weights), dtype=np.intp, count=entries)
        labels = np.fromiter((label_index[label] for weights in model.weights.values() for label in weights), dtype=np.intp, count=entries)
        values = np.fromiter((value for weights in model.weights.values() for value in weights.values()), dtype=float, count=entries)
        self._weights = np.zeros((len(self._row), len(self.classes)))
        self._weights[rows, labels] = values

    def predict(self, features, return_conf=False):
        if return_conf:
            raise NotImplementedError("storyeval's tagger does not compute confidences")
        np = self._np
        rows, values = [], []
        for feature, value in features.items():
            row = self._row.get(feature)
            if value != 0 and row is not None:
                rows.append(row)
                values.append(value)
        if rows:
            picked = self._weights[rows]
            if any(value != 1 for value in values):  # NLTK's feature values are counts, nearly always 1
                picked *= np.array(values, dtype=float)[:, None]
            scores = picked.sum(axis=0)  # down the rows, one feature after another, as NLTK adds them
        else:
            scores = np.zeros(len(self.classes))
        # NLTK: max over labels of (score, label); the classes are sorted, so the last of the best is the larger label
        best = np.flatnonzero(scores == scores.max())[-1]
        return self.classes[best], None


def pos_tag(tokens: list[str]) -> list[tuple[str, str]]:
    return pos_tagger().tag(tokens)
