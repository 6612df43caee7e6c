"""Each metric module's docstring examples run as doctests, with the scorer mocked at one seam
(storyeval.scoring.sequence.load_scorer), as evaluate's own tests run its modules' examples."""
import doctest
import importlib
import types
from pathlib import Path

import evaluate
import pytest

from storyeval.checkpoints import resolution as checkpoints
from storyeval.checkpoints.registry import metric_spec
from storyeval.models.continuation.model import CRITERIA
from storyeval.scoring import sequence as scoring
from storyeval.scoring.signature import settings_string

METRICS = Path(__file__).resolve().parent.parent / "metrics"


class FakeScorer:
    """Scores as a scorer does, with constants, and names its checkpoint as the real one would."""

    def __init__(self, metric, folder):
        self.contexts, self.name = metric_spec(metric).takes_contexts, checkpoints.checkpoint_name(folder)
        self.weights = checkpoints.scoring_digest(folder)

    def score(self, *texts, **options):
        if self.contexts:
            return {criterion: [3.0] * len(texts[1]) for criterion in CRITERIA}
        return [0.5] * len(texts[0])

    def settings(self, dtype=None):
        return settings_string(self.name, dtype, self.weights)


@pytest.mark.parametrize("name", sorted(p.name for p in METRICS.iterdir() if (p / f"{p.name}.py").is_file()))
def test_docstring_examples(name, monkeypatch):
    monkeypatch.setattr(scoring, "load_scorer", lambda metric, folder, device=None: FakeScorer(metric, folder))
    # by name, as the examples say, without depending on `storyeval register` having run on this machine
    local_evaluate = types.SimpleNamespace(load=lambda path, *args, **kwargs: evaluate.load(str(METRICS / path), *args, **kwargs))
    module = importlib.import_module(type(evaluate.load(str(METRICS / name))).__module__)
    examples = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {"evaluate": local_evaluate}, name, None, 0)
    assert examples.examples, f"{name} has no examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(examples)
    assert runner.failures == 0
