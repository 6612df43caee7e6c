"""A weight mix of two checkpoints of one run's line: the sum, what it refuses, and what its record names."""
import json

import pytest
import torch
from conftest import save_tiny_checkpoint
from safetensors.torch import load_file, save_file

from storyeval.scoring.sequence import load_story_classifier
from storyeval_training.export import weight_mix


@pytest.fixture
def parents(tmp_path):
    start = save_tiny_checkpoint(tmp_path / "start")
    end = save_tiny_checkpoint(tmp_path / "end")  # the same seed: the same weights until moved below
    weights = load_file(end / weight_mix.WEIGHTS)
    moved = {name: tensor + 1 if tensor.is_floating_point() else tensor for name, tensor in weights.items()}
    save_file(moved, end / weight_mix.WEIGHTS, metadata={"format": "pt"})
    tokenizer = json.loads((end / "tokenizer.json").read_text())  # saved while truncating: a runtime setting, one vocabulary
    tokenizer["truncation"] = {"direction": "Right", "max_length": 16, "strategy": "LongestFirst", "stride": 0}
    (end / "tokenizer.json").write_text(json.dumps(tokenizer))
    return start, end


def test_the_mix_is_the_weighted_sum_and_scores_as_a_checkpoint(parents, tmp_path):
    start, end = parents
    weight_mix.main(["--start", str(start), "--end", str(end), "--weight", "0.25", "--export-dir", str(tmp_path / "mix")])
    ours, first, second = (load_file(folder / weight_mix.WEIGHTS) for folder in (tmp_path / "mix", start, end))
    for name, tensor in ours.items():
        assert tensor.dtype == first[name].dtype
        torch.testing.assert_close(tensor, 0.75 * first[name] + 0.25 * second[name])
    scores = load_story_classifier(tmp_path / "mix", device="cpu").score(["he sat down . then he stood up ."])
    assert len(scores) == 1
    record = json.loads((tmp_path / "mix" / "training_results.json").read_text())["weight_mix"]
    assert record["weight"] == 0.25
    assert record["end"]["weights_sha256"] != record["start"]["weights_sha256"]
    assert str(tmp_path) not in json.dumps(record)  # a published record names no path of this machine


@pytest.mark.parametrize("weight", ["0", "1", "1.5"])
def test_a_weight_outside_zero_to_one_is_refused(parents, tmp_path, capsys, weight):
    start, end = parents
    with pytest.raises(SystemExit):
        weight_mix.parse_args(["--start", str(start), "--end", str(end), "--weight", weight, "--export-dir", str(tmp_path / "mix")])
    assert "strictly between 0 and 1" in capsys.readouterr().err
    assert not (tmp_path / "mix").exists()


def test_another_architecture_an_existing_folder_or_no_weights_is_refused(parents, tmp_path, capsys):
    start, end = parents
    other = save_tiny_checkpoint(tmp_path / "other", max_length=32)
    (tmp_path / "taken").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    for folders, message in (((start, other), "different configs (max_length)"), ((start, end, "taken"), "exists"),
                             ((tmp_path / "empty", end), "not a checkpoint folder (no model.safetensors)")):
        export = tmp_path / (folders[2] if len(folders) > 2 else "mix")
        with pytest.raises(SystemExit):
            weight_mix.parse_args(["--start", str(folders[0]), "--end", str(folders[1]), "--weight", "0.5", "--export-dir", str(export)])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "mix").exists() and not any((tmp_path / "taken").iterdir())


def test_tensors_that_do_not_match_end_the_run_in_one_line_and_write_nothing(parents, tmp_path, capsys):
    start, end = parents
    weights = load_file(end / weight_mix.WEIGHTS)
    save_file({name: tensor for name, tensor in weights.items() if name != "classifier.bias"}, end / weight_mix.WEIGHTS)
    with pytest.raises(SystemExit, match="error: the checkpoints hold different tensors"):
        weight_mix.main(["--start", str(start), "--end", str(end), "--weight", "0.5", "--export-dir", str(tmp_path / "mix")])
    assert not (tmp_path / "mix").exists()


def test_top_layer_checkpoints_on_one_backbone_mix_their_layers_and_load_onto_it(tmp_path):
    from test_base_tier import tiny_mpnet

    from storyeval.models import UnionModel

    backbone = tiny_mpnet(tmp_path / "backbone")
    folders = []
    for shift in (0.0, 0.1):
        model = UnionModel.from_encoder(str(backbone), max_length=32, window_stride=16, recon_weight=0.0)
        model.train_top_layers_only(1)
        with torch.no_grad():  # stand-in for training: the end moved from the start
            for parameter in model.parameters():
                if parameter.requires_grad:
                    parameter.fill_(shift)
        model.save_trained_parameters(tmp_path / f"top-{shift}", base_model=str(backbone))
        folders.append(tmp_path / f"top-{shift}")
    for folder, path in zip(folders, (str(backbone), "/elsewhere/backbone")):  # read from two folders: one architecture
        config = json.loads((folder / "config.json").read_text())
        config["encoder"]["_name_or_path"] = path
        (folder / "config.json").write_text(json.dumps(config))
    weight_mix.main(["--start", str(folders[0]), "--end", str(folders[1]), "--weight", "0.5", "--export-dir", str(tmp_path / "mix")])
    mixed = load_file(tmp_path / "mix" / weight_mix.WEIGHTS)
    assert mixed.keys() == load_file(folders[0] / weight_mix.WEIGHTS).keys()
    assert all(torch.allclose(tensor.float(), torch.full_like(tensor.float(), 0.05), atol=1e-3) for tensor in mixed.values())
    # the encoder named without this machine's path (base_model is the fixture's folder; a real export names its backbone)
    assert json.loads((tmp_path / "mix" / "config.json").read_text())["encoder"]["_name_or_path"] == "backbone"
    loaded = UnionModel.from_pretrained(tmp_path / "mix", dtype=torch.float32)  # onto the backbone its config names
    assert loaded(torch.randint(5, 1000, (1, 8))).logits.shape[0] == 1


def test_a_lora_checkpoint_is_refused(parents, tmp_path, capsys):
    start, end = parents
    for folder in (start, end):
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "lora_rank": 4}))
    with pytest.raises(SystemExit):
        weight_mix.parse_args(["--start", str(start), "--end", str(end), "--weight", "0.5", "--export-dir", str(tmp_path / "mix")])
    assert "ships LoRA adapters" in capsys.readouterr().err
