"""WP pair kinds (their order, split and equal-length cut), the ranking recipe selected on its worst kind, and its benchmark."""
import json
from collections import Counter

import datasets
import pytest
import torch
from conftest import save_tiny_checkpoint

from storyeval.scoring.sequence import load_story_classifier
from storyeval_training.data import wp_kinds
from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.recipes import train_ranker


def test_a_generator_missing_from_the_declared_order_is_refused_by_name():
    wp_kinds.check_strength_order({"gpt2-xl", "gpt-4"})
    with pytest.raises(ValueError, match="missing from the declared strength order: gpt-5, mystery-lm"):
        wp_kinds.check_strength_order({"gpt-4", "gpt-5", "mystery-lm"})


def test_the_declared_order_covers_every_generator_in_the_data(shared_data):
    generators = {json.loads(line)["generator"] for line in (shared_data / "wp_extra" / "machine.jsonl").open()}
    wp_kinds.check_strength_order(generators)
    assert wp_kinds.STRENGTH_TIERS["gpt-4"] > wp_kinds.STRENGTH_TIERS["gpt-3.5-turbo"] > wp_kinds.STRENGTH_TIERS["davinci"] > wp_kinds.STRENGTH_TIERS["gpt2-xl"]


def test_pairs_are_cut_to_equal_length_and_dropped_when_nothing_tells_them_apart():
    rows, dropped = {name: [] for name in PAIR_FEATURES}, Counter()
    wp_kinds._pair(rows, "a", "one two three four", "four three two one zero", ["gpt-4>gpt2-xl"], dropped)
    wp_kinds._pair(rows, "b", "one two three extra", "one two three", ["human", "repetition"], dropped)
    assert rows["human"] == ["one two three four"] and rows["negative"] == ["four three two one"]
    assert rows["id"] == ["a"] and dropped == {"equal_after_cut": 1}


def test_a_story_follows_its_human_story_into_validation():
    moved = next(f"wph{i:05d}" for i in range(1000) if wp_kinds.wp_machine_pairs.moved_to_validation(f"wph{i:05d}", 15))
    kept = next(f"wph{i:05d}" for i in range(1000) if not wp_kinds.wp_machine_pairs.moved_to_validation(f"wph{i:05d}", 15))
    assert wp_kinds.story_split("train", moved, 15) == "validation"
    assert wp_kinds.story_split("train", kept, 15) == "train"
    assert wp_kinds.story_split("test", moved, 15) == "test" and wp_kinds.story_split("train", "", 15) == "train"


WORDS = "the keeper of the old lighthouse watched the grey sea for ships that never came home".split()


def kind_folder(folder, train=6, validation=3):
    def pairs(n, offset):
        return [{"id": f"{offset + i}", "context": "", "human": " ".join(WORDS[i:i + 8]), "negative": " ".join(reversed(WORDS[i:i + 8])),
                 "original": "", "techniques": ["x"]} for i in range(n)]
    splits = {"train": pairs(train, 0), "validation": pairs(validation, 100)}
    splits = {split: rows for split, rows in splits.items() if rows}  # datasets cannot read back an empty saved split
    datasets.DatasetDict({s: datasets.Dataset.from_dict({name: [row[name] for row in r] for name in PAIR_FEATURES}, features=PAIR_FEATURES)
                          for s, r in splits.items()}).save_to_disk(str(folder))
    return folder


def test_the_bradley_terry_loss_and_the_worst_kind(tiny_checkpoint):
    ranker = train_ranker.PairwiseRanker(load_story_classifier(tiny_checkpoint).model)
    ids = torch.tensor([[101, 2000, 102], [101, 2001, 102], [101, 2002, 102], [101, 2003, 102]])
    out = ranker(ids, torch.ones_like(ids))
    logits = ranker.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert out.margins.tolist() == pytest.approx((logits[:2] - logits[2:]).tolist())
    assert out.loss.item() == pytest.approx(torch.nn.functional.softplus(-(logits[:2] - logits[2:])).mean().item())


def test_a_kind_without_validation_pairs_is_refused_before_training(tmp_path):
    good = kind_folder(tmp_path / "good")
    empty = kind_folder(tmp_path / "empty", validation=0)
    start = save_tiny_checkpoint(tmp_path / "start", max_length=32, window_stride=16)
    args = train_ranker.parse_args(["--pairs", f"a={good}", "--pairs", f"b={empty}", "--model-name-or-path", str(start),
                                    "--max-length", "32", "--output-dir", str(tmp_path / "run")])
    with pytest.raises(ValueError, match=r"no pairs to train on or select on: b \(validation\)"):
        train_ranker.train(args)
    assert not (tmp_path / "run").exists()


def test_repeated_kind_names_are_a_usage_error(tmp_path, capsys):
    good = kind_folder(tmp_path / "good")
    with pytest.raises(SystemExit):
        train_ranker.parse_args(["--pairs", f"a={good}", "--pairs", f"a={good}", "--output-dir", str(tmp_path / "run")])
    assert "names repeat" in capsys.readouterr().err


def test_a_ranker_trains_on_every_kind_and_keeps_its_worst_kinds_best(tmp_path):
    start = save_tiny_checkpoint(tmp_path / "start", max_length=32, window_stride=16, has_reconstruction_head=True)
    kinds = {name: kind_folder(tmp_path / name) for name in ("origin", "damage")}
    results = train_ranker.train(train_ranker.parse_args([
        *[arg for name, folder in kinds.items() for arg in ("--pairs", f"{name}={folder}")], "--model-name-or-path", str(start),
        "--max-length", "32", "--max-train-pairs-per-kind", "4", "--max-train-steps", "4", "--eval-steps", "2",
        "--per-device-train-batch-size", "2", "--output-dir", str(tmp_path / "run"), "--export-dir", str(tmp_path / "export")]))
    history = results["history"]
    assert results["pairs_per_kind"] == {"origin": {"train": 4, "validation": 3}, "damage": {"train": 4, "validation": 3}}
    for metrics in history:
        assert metrics["min_kind_pair_accuracy"] == min(metrics["pair_accuracy_origin"], metrics["pair_accuracy_damage"])
    assert results["best_validation"]["min_kind_pair_accuracy"] == max(m["min_kind_pair_accuracy"] for m in history)
    assert len(load_story_classifier(tmp_path / "export").score(["a story .", "another one ."])) == 2


def test_the_kinds_benchmark_reports_each_kind_and_the_minimum(tmp_path, tiny_checkpoint, monkeypatch):
    from benchmarks import common
    from benchmarks.agreement import wp_kinds as benchmark

    for kind in benchmark.KINDS:
        kind_folder(tmp_path / "kinds" / kind)
        datasets.DatasetDict({"test": datasets.load_from_disk(str(tmp_path / "kinds" / kind))["validation"]}).save_to_disk(str(tmp_path / "k" / kind))
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    benchmark.main(["--kinds-dir", str(tmp_path / "k"), "--checkpoint", f"tiny={tiny_checkpoint}", "--output", "kinds"])
    payload = json.loads((tmp_path / "results" / "kinds.json").read_text())
    result = payload["checkpoints"]["tiny"]
    assert result["min"] == min(v["accuracy"] for v in result["per_kind"].values()) and set(result["per_kind"]) == set(benchmark.KINDS)
    assert payload["length_rule"]["min"] == 0.5  # every pair has two stories of equal length


@pytest.mark.parametrize("argv, message", [
    (["--suite", "s=wp-base"], "no origin/ pairs (a wp_kinds output folder holds"),
    (["--suite", "s=nope"], "unknown story_quality config 'nope'"),
])
def test_the_kinds_benchmark_names_a_folder_that_is_not_the_builders_or_an_unknown_suite(tmp_path, capsys, argv, message):
    from benchmarks.agreement import wp_kinds as benchmark

    with pytest.raises(SystemExit) as stopped:
        benchmark.main(["--kinds-dir", str(tmp_path), *argv])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
