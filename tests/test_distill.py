"""Distillation: the teacher-score cache (identity, resuming, the leakage rule) and the student recipe on the loop."""
import json
import math

import datasets
import numpy as np
import pytest
import torch
from conftest import save_tiny_checkpoint
from scipy import stats

from storyeval.scoring.sequence import load_story_classifier
from storyeval_training.data import transfer
from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.recipes import distill

STORIES = [f"the {tint} lighthouse keeper counted {count} gulls . then the fog {verb} ." for tint in ("grey", "red", "blue", "pale")
           for count in ("seven", "nine", "twelve") for verb in ("lifted", "thickened")]


def write_transfer(folder, stories=STORIES, heldout=6):
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / transfer.STORIES_FILE).open("w") as handle:
        for i, story in enumerate(stories):
            handle.write(json.dumps({"id": f"s{i}", "story": story, "source": "roc", "label": i % 2,
                                     "split": "heldout" if i < heldout else "train"}) + "\n")
    return folder


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("teacher"), max_length=32, window_stride=16)


@pytest.fixture
def scored(tmp_path, teacher, shared_data):
    folder = write_transfer(tmp_path / "transfer")
    cache = tmp_path / "teacher.jsonl"
    record = transfer.score(folder, teacher, cache, batch_size=4, chunk=8, time_budget_minutes=None)
    return folder, cache, record


def test_the_cache_holds_the_teachers_logits_and_resumes_without_rescoring(scored, teacher):
    folder, cache, record = scored
    assert record["complete"] and record["scored_now"] == len(STORIES)
    lines = cache.read_text().splitlines()
    header, rows = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header["teacher"] == load_story_classifier(teacher).name and header["transfer_sha256"] == transfer.file_sha256(folder / "stories.jsonl")
    probabilities = load_story_classifier(teacher).score(STORIES)
    assert [1 / (1 + math.exp(-row["logit"])) for row in rows] == pytest.approx(probabilities, abs=1e-6)
    again = transfer.score(folder, teacher, cache, batch_size=4, chunk=8, time_budget_minutes=None)
    assert again["scored_now"] == 0 and cache.read_text().splitlines() == lines


def test_max_stories_scores_the_files_first_stories_and_a_later_run_goes_on(tmp_path, teacher, shared_data):
    folder = write_transfer(tmp_path / "transfer")
    cache = tmp_path / "teacher.jsonl"
    first = transfer.score(folder, teacher, cache, batch_size=4, chunk=8, time_budget_minutes=None, max_stories=10)
    assert first["scored_now"] == 10 and not first["complete"] and first["max_stories"] == 10
    assert [json.loads(line)["id"] for line in cache.read_text().splitlines()[1:]] == [f"s{i}" for i in range(10)]
    rest = transfer.score(folder, teacher, cache, batch_size=4, chunk=8, time_budget_minutes=None)
    assert rest["scored_now"] == len(STORIES) - 10 and rest["complete"]


def test_a_line_cut_short_is_dropped_and_rescored(scored, teacher):
    folder, cache, _ = scored
    complete = cache.read_text()
    cache.write_text(complete[:-10])  # a kill in the middle of the last line
    assert len(transfer.read_cache(cache, json.loads(complete.split("\n")[0]))) == len(STORIES) - 1
    record = transfer.score(folder, teacher, cache, batch_size=4, chunk=8, time_budget_minutes=None)
    assert record["scored_now"] == 1 and len(cache.read_text().splitlines()) == len(STORIES) + 1


@pytest.mark.parametrize("field", ["teacher", "weights_sha256", "teacher_commit", "transfer_sha256"])
def test_a_cache_of_another_teacher_checkpoint_commit_or_file_is_refused(scored, teacher, field):
    folder, cache, _ = scored
    lines = cache.read_text().splitlines()
    header = json.loads(lines[0])
    header[field] = "other"
    cache.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    before = cache.read_text()
    with pytest.raises(ValueError, match=f"written with {field} 'other'"):
        transfer.score(folder, teacher, cache, batch_size=4, chunk=8, time_budget_minutes=None)
    assert cache.read_text() == before


def test_a_mix_teacher_gives_the_logit_of_its_mixed_score_and_hashes_every_parts_weights(tmp_path, teacher, shared_data):
    neighbours = save_tiny_checkpoint(tmp_path / "neighbours", ending_of=str(teacher), ending_weight=0.25, ending_sentences=2,
                                      ending_reads="neighbours", window_stride=4)
    folder = write_transfer(tmp_path / "transfer")
    cache = tmp_path / "teacher.jsonl"
    transfer.score(folder, neighbours, cache, batch_size=4, chunk=8, time_budget_minutes=None)
    header, *rows = map(json.loads, cache.read_text().splitlines())
    mix = load_story_classifier(neighbours)
    assert [1 / (1 + math.exp(-row["logit"])) for row in rows] == pytest.approx(mix.score(STORIES), abs=1e-6)
    parts = [transfer.file_sha256(part / "model.safetensors") for part in (neighbours, teacher)]
    assert transfer.checkpoint_chain(neighbours) == [neighbours, teacher]
    assert header["weights_sha256"] not in parts and len(header["weights_sha256"]) == 64
    assert transfer.teacher_weights_sha256(teacher) == parts[1]  # a plain teacher's hash is its file's, as caches have it
    config = json.loads((neighbours / "config.json").read_text())
    (neighbours / "config.json").write_text(json.dumps({**config, "ending_lowest_share": 0.5}))  # same weights, new mix
    assert transfer.teacher_weights_sha256(neighbours) != header["weights_sha256"]


def test_a_transfer_story_that_opens_a_human_judged_item_is_refused_with_the_count(tmp_path, teacher, shared_data):
    judged = (shared_data / "human" / "union_roc" / "ant_data.txt").read_text().splitlines()[0].split("|||")[1].strip()
    folder = write_transfer(tmp_path / "transfer", STORIES + [judged])
    with pytest.raises(ValueError, match=f"1 of {len(STORIES) + 1} stories share a first sentence with a human-judged item"):
        transfer.score(folder, teacher, tmp_path / "cache.jsonl", batch_size=4, chunk=8, time_budget_minutes=None)
    assert not (tmp_path / "cache.jsonl").exists()


@pytest.mark.parametrize("loss", ["mse", "kl"])
def test_the_objective_pulls_the_student_to_the_teacher(loss, teacher):
    student = load_story_classifier(teacher).model
    objective = distill.DistillationObjective(student, loss, hard_label_weight=0.0)
    ids = torch.tensor([[101, 2000, 102], [101, 2001, 102]])
    logits = objective(ids, torch.ones_like(ids)).logits.detach()
    assert objective(ids, torch.ones_like(ids), teacher_logits=logits).loss.item() == pytest.approx(
        0.0 if loss == "mse" else torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.sigmoid(logits)).item(), abs=1e-6)
    # an unknown label (-1) adds nothing to the hard-label term
    with_labels = distill.DistillationObjective(student, loss, hard_label_weight=1.0)
    unknown = with_labels(ids, torch.ones_like(ids), teacher_logits=logits, labels=torch.tensor([-1, -1])).loss.item()
    assert unknown == pytest.approx(objective(ids, torch.ones_like(ids), teacher_logits=logits).loss.item())


def selection_pairs(folder):
    rows = [{"id": str(i), "context": "", "human": STORIES[i], "negative": STORIES[-1 - i], "original": STORIES[i],
             "techniques": ["paper"]} for i in range(4)]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows, features=PAIR_FEATURES),
                          "validation": datasets.Dataset.from_list(rows, features=PAIR_FEATURES)}).save_to_disk(str(folder))
    return folder


def test_a_student_trains_selects_and_exports_in_its_starting_architecture(teacher, tmp_path, shared_data):
    folder = write_transfer(tmp_path / "transfer", [story + " and again ." * (i % 3) for i, story in enumerate(STORIES)])
    cache = tmp_path / "teacher.jsonl"
    transfer.score(folder, teacher, cache, batch_size=4, chunk=8, time_budget_minutes=None)
    student = save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)
    pairs = selection_pairs(tmp_path / "pairs")
    out, export = tmp_path / "run", tmp_path / "export"
    results = distill.train(distill.parse_args([
        "--student", str(student), "--transfer-dir", str(folder), "--teacher-scores", str(cache), "--selection-pairs-dir", str(pairs),
        "--max-transfer-stories", "12", "--max-train-steps", "4", "--eval-steps", "2", "--per-device-train-batch-size", "4",
        "--output-dir", str(out), "--export-dir", str(export)]))
    assert results["transfer_stories"] == 12 and results["heldout_stories"] == 6 and results["selection_pairs"] == 4
    assert results["length_slope"] is None  # the teacher's own logits, unless --length-neutral-targets
    assert results["transfer_sources"] == {"roc": 12}  # which stories it learned on, for its card
    # the start by its weights, not by a folder path that will not exist where the card is read
    assert results["start"] == {"weights_sha256": transfer.file_sha256(student / "model.safetensors"), "trained_at": None}
    assert set(results["best_validation"]) >= {"heldout_spearman", "selection_pair_accuracy", "selection_score"}
    # the length diagnostic: each side's Spearman with the held-out stories' words, in the order they were scored
    teacher_logits = [json.loads(line)["logit"] for line in cache.read_text().splitlines()[1:7]]
    words = [len(row["story"].split()) for row in transfer.read_stories(folder) if row["split"] == "heldout"]
    assert results["best_validation"]["teacher_heldout_length_spearman"] == pytest.approx(stats.spearmanr(teacher_logits, words).statistic)
    assert -1 <= results["best_validation"]["student_heldout_length_spearman"] <= 1
    even = write_transfer(tmp_path / "even")  # every held-out story has one length: the diagnostic is undefined
    transfer.score(even, teacher, tmp_path / "even.jsonl", batch_size=4, chunk=8, time_budget_minutes=None)
    signals = distill.train(distill.parse_args(["--student", str(student), "--transfer-dir", str(even), "--teacher-scores",
                                                str(tmp_path / "even.jsonl"), "--selection-pairs-dir", str(pairs), "--evaluate-only",
                                                "--output-dir", str(tmp_path / "even-signals")]))
    assert signals["student_heldout_length_spearman"] is None and signals["teacher_heldout_length_spearman"] is None
    assert results["teacher"]["transfer_sha256"] == transfer.file_sha256(folder / "stories.jsonl")
    exported = json.loads((export / "config.json").read_text())
    assert exported["encoder"]["hidden_size"] == 16 and exported["max_length"] == 32
    assert len(load_story_classifier(export).score(STORIES[:2])) == 2


def test_evaluate_only_gives_a_checkpoints_selection_signals_as_the_run_measured_them(scored, tmp_path):
    folder, cache, _ = scored
    pairs = selection_pairs(tmp_path / "pairs")
    common = ["--transfer-dir", str(folder), "--teacher-scores", str(cache), "--selection-pairs-dir", str(pairs)]
    results = distill.train(distill.parse_args([
        "--student", str(save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)), *common,
        "--max-transfer-stories", "12", "--max-train-steps", "2", "--eval-steps", "2", "--per-device-train-batch-size", "4",
        "--output-dir", str(tmp_path / "run")]))
    argv = ["--student", str(tmp_path / "run" / "best"), *common, "--evaluate-only", "--output-dir", str(tmp_path / "signals")]
    signals = distill.train(distill.parse_args(argv))
    for name in ("heldout_spearman", "selection_pair_accuracy", "selection_score"):
        assert signals[name] == pytest.approx(results["best_validation"][name], abs=1e-6)
    assert json.loads((tmp_path / "signals" / distill.SIGNALS_FILE).read_text())["heldout_stories"] == 6
    assert not (tmp_path / "signals" / "best").exists()  # nothing trained
    with pytest.raises(SystemExit):
        distill.parse_args(argv)  # the file exists: never overwritten


def test_more_transfer_stories_than_are_scored_is_refused_before_training(scored, tmp_path):
    folder, cache, _ = scored
    pairs = selection_pairs(tmp_path / "pairs")
    args = distill.parse_args(["--student", str(save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)),
                               "--transfer-dir", str(folder), "--teacher-scores", str(cache), "--selection-pairs-dir", str(pairs),
                               "--max-transfer-stories", "100", "--output-dir", str(tmp_path / "run")])
    with pytest.raises(ValueError, match="only the first 18 training stories of .* are scored"):
        distill.train(args)
    assert not (tmp_path / "run").exists()


def test_a_story_longer_than_the_teachers_window_gets_no_logit_and_is_left_out(tmp_path, shared_data):
    short_window = save_tiny_checkpoint(tmp_path / "teacher", max_length=16, window_stride=8)
    long_story = "the grey lighthouse keeper counted the gulls on the rocks below the tower every single morning before dawn ."
    folder = write_transfer(tmp_path / "transfer", STORIES + [long_story], heldout=6)
    cache = tmp_path / "cache.jsonl"
    record = transfer.score(folder, short_window, cache, batch_size=4, chunk=8, time_budget_minutes=None)
    logits = [json.loads(line)["logit"] for line in cache.read_text().splitlines()[1:]]
    assert record["longer_than_one_window"] == sum(logit is None for logit in logits) >= 1 and logits[-1] is None
    student = save_tiny_checkpoint(tmp_path / "student", max_length=16, window_stride=8)
    args = distill.parse_args(["--student", str(student), "--transfer-dir", str(folder), "--teacher-scores", str(cache),
                               "--selection-pairs-dir", str(selection_pairs(tmp_path / "pairs")), "--output-dir", str(tmp_path / "run")])
    train, heldout, counts = distill.transfer_examples(args, True, load_story_classifier(student).tokenizer, 16)
    assert counts["longer_than_the_teachers_window"]["train"] >= 1
    assert len(train) + counts["longer_than_the_teachers_window"]["train"] == len(STORIES) + 1 - 6


def test_a_transfer_file_from_pair_folders_holds_out_validation_and_reserves_test(tmp_path, shared_data, monkeypatch, capsys):
    monkeypatch.setenv("STORYEVAL_DATA", str(shared_data))

    def save(folder, splits):
        datasets.DatasetDict({split: datasets.Dataset.from_dict({"human": [h for h, _ in pairs], "negative": [n for _, n in pairs],
                                                                 "techniques": [["x"]] * len(pairs)})
                              for split, pairs in splits.items()}).save_to_disk(str(folder))
        return folder

    kinds = [("damage", save(tmp_path / "damage", {"train": [(STORIES[0], STORIES[1]), (STORIES[2], STORIES[3])],
                                                   "validation": [(STORIES[4], STORIES[5])], "test": [(STORIES[6], STORIES[7])]})),
             ("strength", save(tmp_path / "strength", {"train": [(STORIES[2], STORIES[8]), (STORIES[7] + " more .", STORIES[9])],
                                                       "validation": [(STORIES[10], STORIES[4])]}))]
    transfer.main(["build", "--output-dir", str(tmp_path / "out"), "--pairs", f"damage={kinds[0][1]}", "--pairs", f"strength={kinds[1][1]}"])
    rows = transfer.read_stories(tmp_path / "out")
    by_split = {split: {row["story"] for row in rows if row["split"] == split} for split in ("heldout", "train")}
    assert by_split["heldout"] == {STORIES[4], STORIES[5], STORIES[10]}  # once each, though two kinds hold STORIES[4]
    # STORIES[7] + " more ." opens like a test story, so it is reserved; STORIES[2] is in two kinds, kept once
    assert by_split["train"] == {STORIES[0], STORIES[1], STORIES[2], STORIES[3], STORIES[8], STORIES[9]}
    assert all(row["label"] is None for row in rows)
    record = json.loads((tmp_path / "out" / transfer.RECORD_FILE).read_text())
    assert record["reserved_test_stories"] == 2 and record["selection_dropped"] == {"pairs-strength": 1}
    assert record["args"]["pairs"] == [f"damage={kinds[0][1]}", f"strength={kinds[1][1]}"]
    with pytest.raises(SystemExit):
        transfer.parse_args(["build", "--output-dir", str(tmp_path / "new"), "--pairs", f"damage={tmp_path}"])
    assert "no saved DatasetDict there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        transfer.parse_args(["build", "--output-dir", str(tmp_path / "new"), "--pairs", f"damage={kinds[0][1]}",
                             "--pairs", f"damage={kinds[1][1]}"])
    assert "names repeat" in capsys.readouterr().err
    unpaired = tmp_path / "unpaired"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"story": [STORIES[0]]})}).save_to_disk(str(unpaired))
    with pytest.raises(ValueError, match=r"its train split has no \['human', 'negative'\] column"):
        transfer.main(["build", "--output-dir", str(tmp_path / "new"), "--pairs", f"damage={unpaired}"])
    assert not (tmp_path / "new").exists()


def test_with_several_kinds_of_selection_pairs_the_worst_kind_selects(scored, tmp_path):
    folder, cache, _ = scored
    student = save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)
    first, second = selection_pairs(tmp_path / "a"), selection_pairs(tmp_path / "b")
    args = distill.parse_args([
        "--student", str(student), "--transfer-dir", str(folder), "--teacher-scores", str(cache),
        "--selection-pairs", f"origin={first}", "--selection-pairs", f"damage={second}", "--max-selection-pairs-per-set", "3",
        "--max-transfer-stories", "12", "--max-train-steps", "2", "--eval-steps", "2", "--per-device-train-batch-size", "4",
        "--output-dir", str(tmp_path / "run")])
    results = distill.train(args)
    best = results["best_validation"]
    assert results["selection_pairs"] == 6 and results["args"]["selection_pairs"] == [f"origin={first}", f"damage={second}"]
    assert best["selection_pair_accuracy"] == min(best["selection_pair_accuracy_origin"], best["selection_pair_accuracy_damage"])
    assert best["selection_score"] == (best["heldout_spearman"] + best["selection_pair_accuracy"]) / 2


def test_across_story_sets_add_their_auc_to_the_worst_that_selects(scored, tmp_path):
    folder, cache, _ = scored
    student = save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)
    first, second = selection_pairs(tmp_path / "a"), selection_pairs(tmp_path / "b")
    results = distill.train(distill.parse_args([
        "--student", str(student), "--transfer-dir", str(folder), "--teacher-scores", str(cache),
        "--selection-pairs", f"origin={first}", "--selection-pairs", f"breaks={second}", "--across-story-sets", "breaks",
        "--max-transfer-stories", "12", "--max-train-steps", "2", "--eval-steps", "2", "--per-device-train-batch-size", "4",
        "--output-dir", str(tmp_path / "run")]))
    best = results["best_validation"]
    assert "selection_across_story_auc_origin" not in best
    measures = [best["selection_pair_accuracy_origin"], best["selection_pair_accuracy_breaks"]]
    if best["selection_across_story_auc_breaks"] is not None:  # None where no two stories are of about one length
        measures.append(best["selection_across_story_auc_breaks"])
    assert best["selection_pair_accuracy"] == min(measures)


@pytest.mark.parametrize("extra, message", [
    ([], "give --selection-pairs-dir or --selection-pairs"),
    (["--selection-pairs-dir", "X", "--selection-pairs", "a=X"], "not both"),
    (["--selection-pairs", "a=X", "--selection-pairs", "a=X"], "names repeat"),
    (["--selection-pairs", "a=nowhere"], "no saved DatasetDict"),
    (["--selection-pairs", "a=X", "--max-selection-pairs-per-set", "0"], "must be positive: --max-selection-pairs-per-set 0"),
    (["--selection-pairs", "a=X", "--across-story-sets", "b"], "--across-story-sets b: not a --selection-pairs set (a)"),
    (["--selection-pairs", "a=X", "--selection-techniques", "b=machine"], "no --selection-pairs set is named 'b'"),
])
def test_selection_pairs_options_are_checked_before_training(scored, tmp_path, capsys, extra, message):
    folder, cache, _ = scored
    pairs = selection_pairs(tmp_path / "pairs")
    student = save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)
    with pytest.raises(SystemExit):
        distill.parse_args(["--student", str(student), "--transfer-dir", str(folder), "--teacher-scores", str(cache),
                            "--output-dir", str(tmp_path / "run"), *[str(pairs) if a == "X" else a.replace("=X", f"={pairs}") for a in extra]])
    assert message in capsys.readouterr().err


def test_selection_techniques_narrow_a_set_to_the_pairs_a_check_tests(tmp_path):
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    folder = selection_pairs(tmp_path / "pairs")
    pairs = datasets.load_from_disk(str(folder))
    tags = [["cut", "machine" if i % 2 else "human"] for i in range(4)]
    pairs["validation"] = pairs["validation"].remove_columns("techniques").add_column("techniques", tags)
    pairs.save_to_disk(str(tmp_path / "tagged"))
    tokenizer = AutoTokenizer.from_pretrained(save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16))
    config = SimpleNamespace(delexicalize=False, max_length=32)

    def examples(techniques):
        args = SimpleNamespace(selection_techniques=techniques, max_selection_pairs_per_set=None, seed=0)
        return distill.selection_examples("a", tmp_path / "tagged", args, config, tokenizer)

    assert len(examples({})[0]) == 8  # both stories of every pair
    narrowed, across = examples({"a": ["machine"]})
    assert len(narrowed) == 4 and across["stories"] == ["1", "3"]
    with pytest.raises(ValueError, match="--selection-techniques a=nobody: no validation pair"):
        examples({"a": ["nobody"]})


def test_two_transfer_files_teach_one_student_each_checked_against_its_own_cache(scored, teacher, tmp_path):
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    folder, cache, _ = scored
    other = write_transfer(tmp_path / "other", [story.replace("gulls", "crabs") for story in STORIES[:10]], heldout=2)
    other_cache = tmp_path / "other.jsonl"
    transfer.score(other, teacher, other_cache, batch_size=4, chunk=8, time_budget_minutes=None)
    tokenizer = AutoTokenizer.from_pretrained(teacher)
    args = SimpleNamespace(transfer_dir=[str(folder), str(other)], teacher_scores=[str(cache), str(other_cache)], teacher=str(teacher),
                           max_transfer_stories=None)
    train, heldout, counts = distill.transfer_examples(args, False, tokenizer, max_length=64)
    assert (len(train), len(heldout)) == (len(STORIES) - 6 + 8, 6 + 2)
    assert counts["teacher"]["transfer_sha256"] == [transfer.file_sha256(folder / "stories.jsonl"), transfer.file_sha256(other / "stories.jsonl")]
    # each file keeps its own cap: the first N training stories of each
    capped = distill.transfer_examples(SimpleNamespace(**{**vars(args), "max_transfer_stories": 8}), False, tokenizer, max_length=64)[0]
    assert len(capped) == 8 + 8
    # the caches swapped: each is checked against its own file and refused
    with pytest.raises(ValueError, match="written with transfer_sha256"):
        distill.transfer_examples(SimpleNamespace(**{**vars(args), "teacher_scores": [str(other_cache), str(cache)], "teacher": None}),
                                  False, tokenizer, max_length=64)
    # a cache of another teacher beside the first: one student, one teacher
    lines = other_cache.read_text().splitlines()
    header = json.loads(lines[0])
    other_cache.write_text("\n".join([json.dumps({**header, "weights_sha256": "another"}), *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match="written with weights_sha256 'another'.*one teacher"):
        distill.transfer_examples(SimpleNamespace(**{**vars(args), "teacher": None}), False, tokenizer, max_length=64)


@pytest.mark.parametrize("caches, message", [(1, "2 --transfer-dir and 1 --teacher-scores"), (2, "names one folder twice")])
def test_one_cache_per_transfer_folder_and_each_folder_once(scored, tmp_path, capsys, caches, message):
    folder, cache, _ = scored
    with pytest.raises(SystemExit):
        distill.parse_args(["--student", str(save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)),
                            "--transfer-dir", str(folder), str(folder), "--teacher-scores", *[str(cache)] * caches,
                            "--selection-pairs-dir", str(selection_pairs(tmp_path / "pairs")), "--output-dir", str(tmp_path / "run")])
    assert message in capsys.readouterr().err


def test_a_story_longer_than_the_students_window_is_left_out_and_counted(scored, tmp_path):
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from storyeval.text import normalize_story

    folder, cache, _ = scored
    tokenizer = AutoTokenizer.from_pretrained(save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16))
    lengths = [len(ids) for ids in tokenizer([normalize_story(story, False) for story in STORIES])["input_ids"]]
    window = max(lengths) - 1
    args = SimpleNamespace(transfer_dir=[str(folder)], teacher_scores=[str(cache)], teacher=None, max_transfer_stories=None)
    train, heldout, counts = distill.transfer_examples(args, False, tokenizer, max_length=window)
    left_out = counts["longer_than_the_students_window"]
    assert sum(left_out.values()) == sum(length > window for length in lengths) > 0
    assert len(train) + len(heldout) + sum(left_out.values()) == len(STORIES)


def test_a_rebuilt_cache_is_compared_with_its_reference_logit_by_logit(scored, teacher, tmp_path, monkeypatch, capsys):
    """benchmarks.checkpoints.teacher_scores_rebuild: the check that `transfer score`, run again, gives the scores a
    student learned from (the caches are rebuilt, not kept in the repository)."""
    from benchmarks import common
    from benchmarks.checkpoints import teacher_scores_rebuild

    folder, cache, _ = scored
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    argv = ["--transfer-dir", str(folder), "--teacher", str(teacher), "--reference", str(cache), "--stories", "10",
            "--chunk", "8", "--batch-size", "4", "--output", "rebuild"]
    assert teacher_scores_rebuild.main(argv) == 0
    payload = json.loads((tmp_path / "results" / "rebuild.json").read_text())
    assert payload["compared"] == payload["identical"] == 10 and payload["max_abs_difference"] == 0.0 and payload["within_tolerance"]
    assert payload["header_fields_differing"] == {} and payload["reference"]["sha256"] == transfer.file_sha256(cache)

    lines = cache.read_text().splitlines()
    moved = json.loads(lines[3])
    moved["logit"] += 0.01
    cache.write_text("\n".join([*lines[:3], json.dumps(moved), *lines[4:]]) + "\n")
    assert teacher_scores_rebuild.main(argv[:-1] + ["moved"]) == 1  # written, then status 1
    payload = json.loads((tmp_path / "results" / "moved.json").read_text())
    assert payload["max_abs_difference"] == pytest.approx(0.01) and payload["identical"] == 9 and not payload["within_tolerance"]
    assert "above the tolerance" in capsys.readouterr().out


@pytest.mark.parametrize("field", ["weights_sha256", "transfer_sha256"])
def test_a_rebuild_against_another_teachers_or_files_cache_is_refused_before_scoring(scored, teacher, tmp_path, monkeypatch, capsys, field):
    from benchmarks import common
    from benchmarks.checkpoints import teacher_scores_rebuild

    folder, cache, _ = scored
    lines = cache.read_text().splitlines()
    header = json.loads(lines[0])
    header[field] = "other"
    cache.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    with pytest.raises(SystemExit):
        teacher_scores_rebuild.main(["--transfer-dir", str(folder), "--teacher", str(teacher), "--reference", str(cache), "--output", "x"])
    assert f"another {field}" in capsys.readouterr().err and not (tmp_path / "results").exists()


def test_length_neutral_targets_keep_the_teachers_order_within_a_length_and_drop_its_length_trend():
    words = [40, 40, 80, 80, 160, 160, 320, 320]
    logits = [2.0 * math.log(w) + (0.5 if k % 2 else -0.5) for k, w in enumerate(words)]  # a length trend, and an order within each length
    data = datasets.Dataset.from_dict({"teacher_logits": logits, "words": words})
    neutral, slope = distill.length_neutral(data)
    assert slope == pytest.approx(2.0)
    targets = neutral["teacher_logits"]
    assert stats.pearsonr(targets, np.log(words)).statistic == pytest.approx(0.0, abs=1e-9)
    assert np.mean(targets) == pytest.approx(np.mean(logits))
    assert all(targets[k + 1] - targets[k] == pytest.approx(1.0) for k in range(0, len(words), 2))  # same-length order kept
    assert distill.length_neutral(datasets.Dataset.from_dict({"teacher_logits": [1.0, 2.0], "words": [5, 5]}))[1] == 0.0


def test_under_the_no_regression_rule_the_start_is_measured_first_and_a_student_that_does_not_beat_it_is_not_exported(scored, tmp_path):
    folder, cache, _ = scored
    student = save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)
    first, second = selection_pairs(tmp_path / "a"), selection_pairs(tmp_path / "b")
    argv = ["--student", str(student), "--transfer-dir", str(folder), "--teacher-scores", str(cache),
            "--selection-pairs", f"origin={first}", "--selection-pairs", f"damage={second}", "--max-selection-pairs-per-set", "3",
            "--max-transfer-stories", "12", "--max-train-steps", "2", "--eval-steps", "2", "--per-device-train-batch-size", "4",
            "--no-regression", "--output-dir", str(tmp_path / "run"), "--export-dir", str(tmp_path / "export")]
    results = distill.train(distill.parse_args(argv))
    start = json.loads((tmp_path / "run" / "start_validation.json").read_text())
    assert results["start_validation"] == start and results["selected_by"] == "worst_measure_without_regression"
    best = results["best_validation"]
    falls = {name: round(start[name] - best[name], 4) for name in start if name.startswith("selection_pair_accuracy")}
    assert best["regressions_from_start"] == {name: fall for name, fall in falls.items() if fall > 0.02}
    assert results["beats_start"] == (best["worst_measure_without_regression"] > start["selection_score"])
    assert (tmp_path / "export").exists() == results["beats_start"]


def test_no_regression_with_evaluate_only_is_refused(scored, tmp_path, capsys):
    folder, cache, _ = scored
    student = save_tiny_checkpoint(tmp_path / "student", max_length=32, window_stride=16)
    with pytest.raises(SystemExit):
        distill.parse_args(["--student", str(student), "--transfer-dir", str(folder), "--teacher-scores", str(cache),
                            "--selection-pairs-dir", str(selection_pairs(tmp_path / "a")), "--no-regression", "--evaluate-only",
                            "--output-dir", str(tmp_path / "run")])
    assert "--evaluate-only trains nothing" in capsys.readouterr().err
