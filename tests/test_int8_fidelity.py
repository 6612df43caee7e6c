"""The base tier's int8 fidelity records: each figure is its results file's, and each refusal names its own checkpoint."""
import json
from pathlib import Path

import pytest

from storyeval.scoring.int8 import runtime as int8_runtime

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
BUNDLED = Path(__file__).resolve().parent.parent / "hub_cards"


def measured_scheme(payload: dict) -> str:
    """The scheme a results file measured: its --scheme, else what the checkpoint's record named then (the default)."""
    return payload.get("scheme") or int8_runtime.DEFAULT_SCHEME


@pytest.mark.parametrize("name", sorted(int8_runtime.MEASURED_FIDELITY))
def test_each_record_is_its_results_file_and_its_bundled_weights(name):
    from benchmarks.report import CURRENT

    record = int8_runtime.MEASURED_FIDELITY[name]
    measured = json.loads((RESULTS / record.results).read_text())
    assert Path(measured["checkpoint"]).name == name and measured["stories"] == record.stories
    assert round(measured["agreement_with_float32"]["int8_openvino"]["spearman_with_float32"], 4) == record.spearman
    assert measured_scheme(measured) == record.scheme
    assert int8_runtime._safetensors_sha256(BUNDLED / name) == record.safetensors_sha256
    if record.human_results is not None:
        payload = json.loads((RESULTS / record.human_results).read_text())
        human = payload["human_agreement"][name]
        moves = [abs(move) for rows in human.values() for row in rows.values() for move in row.get("moved", {}).values()]
        assert round(max(moves), 4) == record.human_move and measured_scheme(payload) == record.scheme
        # every human set BENCHMARKS.md reports the checkpoint on, no fewer
        assert {row.human_set for row in CURRENT if getattr(row, "checkpoint", None) == name} <= set(human)
    if record.modern_results is not None:
        row = next(row for row in json.loads((RESULTS / record.modern_results).read_text())["checkpoints"].values()
                   if row.get("dtype") == "int8" and Path(row.get("path", "")).name == name)
        assert row["scheme"] == record.scheme
        assert (len(row["every_interval"]["outside_interval"]), row["every_interval"]["figures"]) == (record.modern_outside, record.modern_figures)


@pytest.mark.parametrize("name", ["union-roc-base", "union-wp-base", "plot-coherence-roc-base", "plot-coherence-wp-base"])
def test_every_base_checkpoint_is_refused_under_its_own_name_with_its_own_figure(name):
    problem = int8_runtime.checkpoint_int8_problem(BUNDLED / name)
    record = int8_runtime.MEASURED_FIDELITY.get(name)
    if record is not None and record.problem() is None:
        assert problem is None
        return
    assert problem is not None and name in problem and "score it in float32 or bfloat16" in problem
    others = {"union-roc-base", "union-wp-base", "plot-coherence-roc-base", "plot-coherence-wp-base"} - {name}
    assert not any(f"{other}:" in problem or f"{other} was" in problem for other in others)
    if record is not None:  # its own figures, as its record holds them
        assert record.problem() in problem and "\n" not in problem


def test_other_weights_under_a_measured_name_are_not_the_measured_checkpoint(tmp_path):
    folder = tmp_path / "union-roc-base"
    folder.mkdir()
    (folder / "config.json").write_text((BUNDLED / "union-roc-base" / "config.json").read_text())
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert "union-roc-base was not measured" in int8_runtime.checkpoint_int8_problem(folder)


def test_the_minilm_checkpoints_are_offered_int8_as_an_architecture():
    for name in ("union-roc", "union-wp", "plot-coherence-roc"):
        assert int8_runtime.checkpoint_int8_problem(BUNDLED / name) is None


def test_the_rule_names_each_part_a_copy_misses_with_its_own_figure_in_one_line():
    def record(**changes):
        base = dict(safetensors_sha256="0" * 64, scheme="weights_int8", corpus="ROC", stories=1000, spearman=0.9951, results="r.json", human_move=0.005,
                    human_results="h.json", modern_outside=0, modern_figures=48, modern_results="m.json")
        return int8_runtime.Int8Fidelity(**{**base, **changes})

    assert int8_runtime.FIDELITY_SPEARMAN == 0.995 and int8_runtime.FIDELITY_HUMAN_MOVE == 0.005
    assert record().problem() is None  # each bound is inclusive
    assert "keeps Spearman 0.9949" in record(spearman=0.9949).problem()
    assert "on 999 ROC test stories" in record(stories=999).problem()
    assert "moves a human-set coefficient by 0.0066" in record(human_move=0.0066).problem()
    assert "moves 2 of 48 modern-text figures outside their paired intervals" in record(modern_outside=2).problem()
    missing = record(human_move=None, modern_outside=None, spearman=0.99).problem()
    assert missing == ("its int8 copy keeps Spearman 0.9900 with float32 on 1,000 ROC test stories (the bound: 0.995 on 1,000), "
                       "was not measured on the human-judged sets and was not measured on the modern-text check")
    assert "\n" not in missing


@pytest.mark.parametrize("config", sorted(__import__("storyeval.analysis.suite", fromlist=["x"]).INT8_FIDELITY))
def test_each_suite_record_is_its_results_files(config):
    from benchmarks.report import CURRENT
    from storyeval.analysis import suite

    record = suite.INT8_FIDELITY[config]
    sets = json.loads((RESULTS / record.human_results).read_text())["sets"]
    moves = [abs(move) for row in sets.values() if row["config"] == config for moved in row["moved"].values() for move in moved.values()]
    assert round(max(moves), 4) == record.human_move
    # every set BENCHMARKS.md reports the config on
    assert {row.human_set for row in CURRENT if row.checkpoint == f"{config} (suite)"} <= {name for name, row in sets.items() if row["config"] == config}
    row = next(row for row in json.loads((RESULTS / record.modern_results).read_text())["checkpoints"].values()
               if row.get("dtype") == "int8" and row.get("config") == config)
    assert (len(row["every_interval"]["outside_interval"]), row["every_interval"]["figures"]) == (record.modern_outside, record.modern_figures)
