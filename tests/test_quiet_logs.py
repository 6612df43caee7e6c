"""A normal load and a normal compute are quiet: nothing at WARNING unless something is wrong, and a warning once."""
import logging
import math
from pathlib import Path

import evaluate
import pytest

METRICS = Path(__file__).resolve().parent.parent / "metrics"


def storyeval_records(caplog, level=logging.WARNING):
    return [r for r in caplog.records if r.name.startswith("storyeval") and r.levelno >= level]


def test_a_default_load_names_the_fast_config_in_one_warning(caplog):
    from storyeval.checkpoints.registry import metric_spec

    spec = metric_spec("union")
    with caplog.at_level(logging.INFO):
        evaluate.load(str(METRICS / "union"))  # config 'default': the base tier, one argument from the fast one
    [note] = [r.getMessage() for r in storyeval_records(caplog)]
    assert f"the default config is '{spec.default}'" in note and f"evaluate.load('union', '{spec.fast}')" in note


def test_a_default_load_that_is_the_fast_config_says_which_at_info_only(caplog):
    from storyeval import metric_base

    with caplog.at_level(logging.INFO):
        metric_base.say_default("continuation_quality", "deltascore", "deltascore")
    assert storyeval_records(caplog) == []
    assert any("config 'default' is 'deltascore'" in r.getMessage() for r in storyeval_records(caplog, logging.INFO))


@pytest.mark.parametrize("queued", [False, True])
def test_unscorable_inputs_with_on_invalid_nan_warn_once(tiny_checkpoint, caplog, queued):
    union = evaluate.load(str(METRICS / "union"), str(tiny_checkpoint))
    stories = ["he left .", "", "she smiled ."]
    with caplog.at_level(logging.INFO):
        if queued:
            union.add_batch(predictions=stories, on_invalid="nan")
            result = union.compute(on_invalid="nan")
        else:
            result = union.compute(predictions=stories, on_invalid="nan")
    assert math.isnan(result["scores"][1]) and not math.isnan(result["scores"][0])
    warnings = storyeval_records(caplog)
    assert len(warnings) == 1 and "no letters at row 1" in warnings[0].getMessage(), [r.getMessage() for r in warnings]


def test_continuation_pairs_with_on_invalid_nan_warn_once(caplog):
    metric = evaluate.load(str(METRICS / "continuation_quality"))
    with caplog.at_level(logging.INFO):
        result = metric.compute(predictions=["He slept.", "..."], contexts=["Ken went home.", "Ann ran."], on_invalid="nan")
    assert math.isnan(result["overall"][1])
    assert len(storyeval_records(caplog)) == 1
