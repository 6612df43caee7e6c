"""mix_pairs: several pair folders into one, without a story on both sides of the train/selection line."""
import json

import datasets
import pytest

from storyeval_training.data import mix_pairs
from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.recipes.train_union import selection_key


def pair(prompt: str, technique: str) -> dict:
    human = f"{prompt} . the story goes on ."
    return {"id": f"{prompt}-{technique}", "context": prompt, "human": human, "negative": human + " again",
            "original": human, "techniques": [technique]}


def save(folder, splits: dict) -> str:
    datasets.DatasetDict({split: datasets.Dataset.from_list(rows, features=PAIR_FEATURES) for split, rows in splits.items()}
                         ).save_to_disk(str(folder))
    return str(folder)


@pytest.fixture
def folders(tmp_path):
    perturbed = save(tmp_path / "perturbed", {
        "train": [pair(f"prompt {i}", "negation") for i in range(6)] + [pair("moved prompt", "reordering")],
        "validation": [pair("valid prompt", "negation")],
    })
    machine = save(tmp_path / "machine", {
        "train": [pair(f"prompt {i}", g) for i in range(3) for g in ("gpt2-xl", "gpt-4")],
        # a story that the other set trains on, moved into validation here
        "validation": [pair("moved prompt", "gpt2-xl"), pair("valid prompt", "gpt-4")],
    })
    return perturbed, machine


def test_mix_keeps_techniques_samples_and_drops_held_out_stories(folders, tmp_path):
    perturbed, machine = folders
    out = tmp_path / "mixed"
    mix_pairs.main(["--output-dir", str(out), "--pairs", f"perturbations={perturbed}", "--pairs", f"machine={machine}",
                    "--techniques", "machine=gpt2-xl", "--max-train-pairs", "perturbations=4"])
    mixed = datasets.load_from_disk(str(out))
    assert set(mixed) == {"train", "validation"}
    techniques = [t for ts in mixed["train"]["techniques"] for t in ts]
    assert techniques.count("gpt2-xl") == 3 and "gpt-4" not in techniques and len(techniques) == 7
    assert not any("moved prompt" in story for story in mixed["train"]["human"])
    assert sorted(mixed["validation"]["id"]) == ["moved prompt-gpt2-xl", "valid prompt-negation"]
    record = json.loads((out / mix_pairs.RECORD).read_text())
    assert record["train_pairs_dropped_for_held_out_stories"] == {"perturbations": 1, "machine": 0}
    assert record["pairs"] == {"train": 7, "validation": 2}


def test_bad_input_is_refused_before_anything_is_written(folders, tmp_path, capsys):
    perturbed, machine = folders
    out = tmp_path / "mixed"
    for argv, message in [
        (["--pairs", f"a={perturbed}", "--pairs", f"a={machine}"], "names repeat"),
        (["--pairs", f"a={perturbed}", "--techniques", "b=gpt2-xl"], "no --pairs set is named 'b'"),
        (["--pairs", f"a={perturbed}", "--max-train-pairs", "a=0"], "positive whole number"),
        (["--pairs", f"a={tmp_path / 'missing'}"], "no saved DatasetDict there"),
        (["--pairs", f"a={tmp_path}"], "no saved DatasetDict there"),  # a folder, but not of pairs
        (["--pairs", str(perturbed)], "expected NAME=FOLDER"),
        (["--pairs", f"a={perturbed}", "--techniques", "a"], "--techniques 'a': expected NAME=T1,T2"),
        (["--pairs", f"a={perturbed}", "--output-dir", str(perturbed)], "exists"),
    ]:
        with pytest.raises(SystemExit):
            mix_pairs.parse_args(["--output-dir", str(out), *argv])
        assert message in capsys.readouterr().err, argv
    with pytest.raises(ValueError, match="no pair"):
        mix_pairs.load_set("a", tmp_path / "machine", ["opt-2.7b"])
    other = datasets.DatasetDict({"train": datasets.Dataset.from_list([{"story": "a", "label": 1}])})
    with pytest.raises(ValueError, match="columns differ"):
        mix_pairs.mix({"a": mix_pairs.load_set("a", tmp_path / "machine", None), "b": other}, {}, seed=0)
    machine_pairs = mix_pairs.load_set("a", tmp_path / "machine", None)
    with pytest.raises(ValueError, match="unknown split 'extra'"):
        mix_pairs.mix({"a": datasets.DatasetDict({"extra": machine_pairs["train"]})}, {}, seed=0)
    out.mkdir()
    with pytest.raises(SystemExit):
        mix_pairs.parse_args(["--output-dir", str(out), "--pairs", f"a={perturbed}"])
    assert not any(out.iterdir())


def test_selection_key_keeps_the_old_defaults():
    from argparse import Namespace
    assert selection_key(Namespace(selection_pairs_dir=None, select_by=None)) == "accuracy"
    assert selection_key(Namespace(selection_pairs_dir="sel", select_by=None)) == "selection_pair_accuracy"
    assert selection_key(Namespace(selection_pairs_dir=None, select_by="pair_accuracy")) == "pair_accuracy"
    assert selection_key(Namespace(selection_pairs_dir="sel")) == "selection_pair_accuracy"  # a plot-coherence run's args


def test_a_pairs_folders_test_split_is_never_read_for_training(tmp_path):
    """The modern-text check saves its pairs with a test split, its report: training from such a folder loads only
    the training and validation splits."""
    import datasets

    from storyeval_training.recipes import train_union

    row = {"id": ["a"], "context": [""], "human": ["He ran. He won."], "negative": ["He won. He ran."],
           "original": ["He ran. He won."], "techniques": [["shuffle"]]}
    datasets.DatasetDict({split: datasets.Dataset.from_dict(row) for split in ("train", "validation", "test")}).save_to_disk(tmp_path / "pairs")
    args = train_union.parse_args(["--pairs-dir", str(tmp_path / "pairs"), "--output-dir", str(tmp_path / "run")])
    assert sorted(train_union.load_pairs(args)) == ["train", "validation"]
