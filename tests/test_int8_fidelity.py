"""The base tier's int8 fidelity records: each figure is its results file's, and each refusal names its own checkpoint."""
import json
from pathlib import Path

import pytest

from storyeval.scoring.int8 import runtime as int8_runtime

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
BUNDLED = Path(__file__).resolve().parent.parent / "hub_cards"


@pytest.mark.parametrize("name", sorted(int8_runtime.MEASURED_FIDELITY))
def test_each_record_is_its_results_file_and_its_bundled_weights(name):
    record = int8_runtime.MEASURED_FIDELITY[name]
    measured = json.loads((RESULTS / record.results).read_text())
    assert Path(measured["checkpoint"]).name == name and measured["stories"] == record.stories
    assert round(measured["agreement_with_float32"]["int8_openvino"]["spearman_with_float32"], 4) == record.spearman
    assert int8_runtime._safetensors_sha256(BUNDLED / name) == record.safetensors_sha256
    if record.human_results is not None:
        human = json.loads((RESULTS / record.human_results).read_text())["human_agreement"][name]
        moves = [abs(move) for rows in human.values() for row in rows.values() for move in row.get("moved", {}).values()]
        assert round(max(moves), 4) == record.human_move


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
    if record is not None:
        assert f"{record.spearman:.4f}" in problem


def test_other_weights_under_a_measured_name_are_not_the_measured_checkpoint(tmp_path):
    folder = tmp_path / "union-roc-base"
    folder.mkdir()
    (folder / "config.json").write_text((BUNDLED / "union-roc-base" / "config.json").read_text())
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert "union-roc-base was not measured" in int8_runtime.checkpoint_int8_problem(folder)


def test_the_minilm_checkpoints_are_offered_int8_as_an_architecture():
    for name in ("union-roc", "union-wp", "plot-coherence-roc"):
        assert int8_runtime.checkpoint_int8_problem(BUNDLED / name) is None
