"""Mix two checkpoints of one architecture weight by weight: ``(1 - w) * start + w * end`` (WiSE-FT, Wortsman et al., 2022).

    python -m storyeval_training.export.weight_mix --start hub_cards/union-roc --end runs/d1/export \\
        --weight 0.5 --export-dir runs/w1/mix-050

A run continued from a shipped checkpoint (a student distilled again, a ranker taught new pairs) can gain on what it
was selected for and lose elsewhere; a point on the straight line between the two sets of weights often keeps more of
both than either end. Both must be checkpoints of one run's line (the end continued from the start), with one config
and one tokenizer: full checkpoints, or top-layer ones on one backbone (the base tier: the mix is of the layers they
ship, the backbone they share stays as it is). LoRA checkpoints are refused: a mix of two adapters' factors is not the
mix of the weights they adapt. The mix is written in their dtype beside the start's config and tokenizer; its
``training_results.json`` records the weight and both parents (weights' SHA-256, training commit, and the end's own
training record), so that a card and the distillation recipes can tell where it came from.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from storyeval.checkpoints.backbones import published_backbone_name
from storyeval_training.data.transfer import file_sha256, training_commit
from storyeval_training.export.provenance import environment, published_record

WEIGHTS = "model.safetensors"
# the tokenizer's files a scorer reads, as save_pretrained writes them (the config is written apart, its encoder named)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--start", required=True, help="the checkpoint the end was trained from (weight 1 - w)")
    p.add_argument("--end", required=True, help="the checkpoint trained from --start (weight w)")
    p.add_argument("--weight", required=True, type=float, help="w, strictly between 0 and 1: the end's share of each weight")
    p.add_argument("--export-dir", required=True, help="where the mixed checkpoint goes (must not exist yet)")
    args = p.parse_args(argv)
    if not 0 < args.weight < 1:
        p.error(f"--weight {args.weight}: give a share strictly between 0 and 1 (0 is --start itself, 1 is --end)")
    for option, folder in (("--start", args.start), ("--end", args.end)):
        missing = [name for name in ("config.json", WEIGHTS) if not (Path(folder) / name).is_file()]
        if missing:
            p.error(f"{option} {folder}: not a checkpoint folder (no {', '.join(missing)})")
    if Path(args.export_dir).exists():
        p.error(f"--export-dir {args.export_dir} exists: give a new folder")
    try:
        check_compatible(Path(args.start), Path(args.end))
    except ValueError as error:
        p.error(str(error))
    return args


def check_compatible(start: Path, end: Path) -> None:
    """Raise ValueError unless both folders hold one architecture with one config and one tokenizer."""
    configs = [_architecture(json.loads((folder / "config.json").read_text())) for folder in (start, end)]
    for config, folder in zip(configs, (start, end)):
        if config.get("lora_rank"):
            raise ValueError(f"{folder} ships LoRA adapters: their factors do not mix as the weights they adapt would; "
                             "mix full or top-layer checkpoints")
    # equal configs: the same trained_top_layers and, for a top-layer checkpoint, the same backbone by its weights' hash
    differing = sorted(key for key in configs[0].keys() | configs[1].keys() if configs[0].get(key) != configs[1].get(key))
    if differing:
        raise ValueError(f"{start} and {end} have different configs ({', '.join(differing)}): a mix needs one architecture")
    for name in TOKENIZER_FILES:
        files = [folder / name for folder in (start, end)]
        if any(f.is_file() for f in files) and not (all(f.is_file() for f in files) and _tokenizer_file(files[0]) == _tokenizer_file(files[1])):
            raise ValueError(f"{start} and {end} differ in {name}: a mix needs one tokenizer")


def _architecture(config: dict) -> dict:
    """A checkpoint's config less where its encoder was read from (a folder of the machine that trained it)."""
    encoder = {key: value for key, value in (config.get("encoder") or {}).items() if key != "_name_or_path"}
    return {**config, "encoder": encoder} if "encoder" in config else config


def _tokenizer_file(path: Path):
    """A tokenizer file's content less the truncation and padding a save caught it in (runtime settings, not vocabulary)."""
    if path.suffix != ".json":
        return path.read_bytes()
    content = json.loads(path.read_text())
    return {key: value for key, value in content.items() if key not in ("truncation", "padding")}


def mix_weights(start: dict[str, torch.Tensor], end: dict[str, torch.Tensor], weight: float) -> dict[str, torch.Tensor]:
    """``(1 - weight) * start + weight * end`` tensor by tensor, summed in float32 and stored in the parents' dtype.

    Written out because the merge libraries (mergekit and the like) read a model's layout from the architectures they
    know, this one not among them; two state dicts of one model need only this sum.
    """
    if start.keys() != end.keys():
        raise ValueError(f"the checkpoints hold different tensors: {sorted(start.keys() ^ end.keys())[:5]}")
    mixed = {}
    for name, tensor in start.items():
        other = end[name]
        if tensor.shape != other.shape or tensor.dtype != other.dtype:
            raise ValueError(f"{name}: {tuple(tensor.shape)} {tensor.dtype} against {tuple(other.shape)} {other.dtype}")
        if not tensor.is_floating_point():
            if not torch.equal(tensor, other):
                raise ValueError(f"{name}: an integer tensor (positions, ids) that differs between the checkpoints")
            mixed[name] = tensor.clone()
            continue
        mixed[name] = ((1 - weight) * tensor.float() + weight * other.float()).to(tensor.dtype)
    return mixed


def parent(folder: Path) -> dict:
    """A parent of the mix by what outlives its folder: its weights' hash and the commit it was trained at."""
    return {"checkpoint": str(folder.resolve()), "weights_sha256": file_sha256(folder / WEIGHTS),  # published_record makes it portable
            "trained_at": training_commit(folder)}


def write_mix(start: Path, end: Path, weight: float, export_dir: Path) -> dict:
    """Write the mixed checkpoint into ``export_dir`` (created; must not exist) and return its training record."""
    check_compatible(start, end)
    mixed = mix_weights(load_file(start / WEIGHTS), load_file(end / WEIGHTS), weight)
    export_dir.mkdir(parents=True)
    save_file(mixed, export_dir / WEIGHTS, metadata={"format": "pt"})
    (export_dir / WEIGHTS).chmod(0o644)  # safetensors writes through a private temporary file; the parents' files are 644
    config = json.loads((start / "config.json").read_text())
    if "_name_or_path" in config.get("encoder", {}):  # a folder of the machine that trained the start: published by name
        config["encoder"]["_name_or_path"] = published_backbone_name(config["encoder"]["_name_or_path"])
    (export_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for name in TOKENIZER_FILES:
        if (start / name).is_file():
            shutil.copyfile(start / name, export_dir / name)
    end_results = end / "training_results.json"
    record = {"weight_mix": {"weight": weight, "start": parent(start), "end": parent(end)},
              "end_training_results": json.loads(end_results.read_text()) if end_results.is_file() else None,
              "environment": environment()}
    record = published_record(record)
    (export_dir / "training_results.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv=None) -> None:
    args = parse_args(argv)
    try:  # tensors that do not match, found before anything is written: one line
        record = write_mix(Path(args.start), Path(args.end), args.weight, Path(args.export_dir))
    except ValueError as error:
        sys.exit(f"error: {error}")
    print(json.dumps(record["weight_mix"], indent=2))


if __name__ == "__main__":
    main()
