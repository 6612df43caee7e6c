"""The benchmark commands' argument checks (the benchmarks themselves are not timed tests)."""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import common
from benchmarks.agreement import continuation_quality, union_correlation, union_development, union_pair_accuracy, wp_rank_pairs
from benchmarks.speed import batch_tokens, cli_cold_start, device_parity, generation_speed, negatives_throughput, scoring_speed, speed_ceiling


def test_checkpoint_specs_parse_and_bad_ones_are_clear_errors():
    assert common.checkpoint_spec("ours=runs/a=b") == ("ours", "runs/a=b")
    assert common.metric_checkpoint_spec("union:ours=roc") == ("union", "ours", "roc")
    for bad in ("no-label", "=path", "label="):
        with pytest.raises(argparse.ArgumentTypeError, match="label=folder_or_config"):
            common.checkpoint_spec(bad)
    for bad in ("ours=roc", ":ours=roc", "union:ours"):
        with pytest.raises(argparse.ArgumentTypeError):
            common.metric_checkpoint_spec(bad)


def test_continuation_benchmark_refuses_a_checkpoint_trained_on_another_split(tmp_path):
    def checkpoint(name, args):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "training_results.json").write_text(json.dumps({"args": args}))
        return folder

    continuation_quality.check_heldout_split(checkpoint("bundled-style", {"seed": 42}))  # before --split-seed existed
    continuation_quality.check_heldout_split(checkpoint("new-seed", {"seed": 43, "split_seed": 42}))
    for name, args in (("old-seed-43", {"seed": 43}), ("split-7", {"seed": 42, "split_seed": 7})):
        with pytest.raises(SystemExit, match="held-out pairs are the test side of split seed 42"):
            continuation_quality.check_heldout_split(checkpoint(name, args))
    with pytest.raises(SystemExit, match="no training_results.json"):
        continuation_quality.check_heldout_split(tmp_path)


@pytest.mark.parametrize("flag", ["--plots", "--num-candidates", "--batch-size"])
def test_generation_speed_rejects_non_positive_counts(flag, capsys):
    with pytest.raises(SystemExit):
        generation_speed.main(["--model-name-or-path", "x", flag, "0"])
    assert "must be positive" in capsys.readouterr().err


def test_scoring_speed_rejects_zero_repeats(capsys):
    with pytest.raises(SystemExit):
        scoring_speed.main(["--repeats", "0"])
    assert "--repeats must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--same-process", "-1"], ["--same-process", "4", "--skip-bert-base"]])
def test_scoring_speed_refuses_a_same_process_run_it_cannot_do(argv, capsys):
    with pytest.raises(SystemExit):
        scoring_speed.main(argv)
    assert "--same-process" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--settings", "16:x", "--output", "speed/x"], "give BATCH_SIZE:MAX_TOKENS"),
    (["--settings", "0:none", "--output", "speed/x"], "must be at least 1"),
    (["--settings", "16:0", "--output", "speed/x"], "must be at least 1"),
    (["--settings", "16:2048", "--rounds", "0", "--output", "speed/x"], "--rounds and --num-threads must be at least 1"),
    (["--settings", "16:2048", "--batch-size", "8", "--output", "speed/x"], "unrecognized arguments: --batch-size"),
    (["--settings", "16:2048", "--output", "nolog/x"], "no experiment log"),
])
def test_batch_tokens_refuses_bad_settings_before_loading_anything(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    with pytest.raises(SystemExit):
        batch_tokens.main(argv)
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


def test_scoring_speed_children_find_the_baseline_from_any_folder(tmp_path, monkeypatch):
    # the child processes import the BERT-base-sized baseline from this checkout, wherever the benchmark was started
    monkeypatch.chdir(tmp_path)
    script = "import json, sys; from benchmarks.speed import baseline_scorer; print(json.dumps({'argv': sys.argv[1:], 'file': baseline_scorer.__file__}))"
    result = scoring_speed.child_result(script, "a", 2)
    assert result["argv"] == ["a", "2"]
    assert Path(result["file"]).resolve() == (Path(scoring_speed.__file__).parent / "baseline_scorer.py").resolve()


def test_cold_start_attributes_import_time_to_packages_and_rejects_zero_repeats(capsys):
    log = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:       100 |        200 |     scipy.stats",
        "import time:        10 |     300000 |   nltk.collocations",
        "import time:        50 |    1250000 | nltk",
        "import time:        20 |     900000 | torch",
    ])
    assert cli_cold_start.import_costs(log) == {"torch": 0.9, "nltk": 1.25, "scipy": 0.0}
    with pytest.raises(SystemExit):
        cli_cold_start.main(["--repeats", "0"])
    assert "--repeats must be positive" in capsys.readouterr().err


def test_score_agreement_reports_the_gap_to_float32():
    agreement = scoring_speed.score_agreement([0.5, 0.61, 0.9], [0.5, 0.7, 0.95])
    assert agreement["max_abs_difference"] == pytest.approx(0.09)
    assert agreement["mean_abs_difference"] == pytest.approx(0.14 / 3)
    assert agreement["spearman_with_float32"] == pytest.approx(1.0)


def test_pair_accuracy_groups_by_technique_and_counts_ties_half():
    result = union_pair_accuracy.pair_accuracy(
        [0.9, 0.4, 0.5, 0.7], [0.1, 0.6, 0.5, 0.2], [["reordering"], ["reordering", "negation"], ["negation"], ["repetition"]]
    )
    assert result["all"] == {"accuracy": 2.5 / 4, "pairs": 4}
    assert result["reordering_any"]["accuracy"] == 0.5 and result["reordering_alone"] == {"accuracy": 1.0, "pairs": 1}
    assert result["negation_alone"]["accuracy"] == 0.5 and result["2_techniques"] == {"accuracy": 0.0, "pairs": 1}
    with pytest.raises(ValueError, match="one human score"):
        union_pair_accuracy.pair_accuracy([0.1], [], [["negation"]])


def test_speed_ceiling_batches_like_the_scorer_and_counts_dense_flops():
    assert speed_ceiling.batch_shapes([3, 9, 5, 7, 2], batch_size=2) == [(2, 9), (2, 5), (1, 2)]  # longest first, padded
    bert_base = speed_ceiling.encoder_flops([(2, 10)], speed_ceiling.BERT_BASE)
    # 12 layers x 20 tokens x (4 x 768^2 + 2 x 768 x 3072) multiply-adds, 2 FLOPs each
    assert bert_base["dense"] == 2 * 12 * 20 * (4 * 768**2 + 2 * 768 * 3072)
    assert bert_base["attention"] == 2 * 12 * 2 * 2 * 10 * 10 * 768
    half = {**speed_ceiling.BERT_BASE, "hidden_size": 384, "intermediate_size": 1536, "num_hidden_layers": 6}
    assert bert_base["dense"] / speed_ceiling.encoder_flops([(2, 10)], half)["dense"] == 8


def test_story_cloze_accuracy_counts_a_tie_as_half():
    # right endings by index: first, second, second, first; the third item is a tie
    assert continuation_quality.cloze_accuracy([0.9, 0.1, 0.5, 0.2], [0.1, 0.8, 0.5, 0.7], [0, 1, 1, 0]) == (1 + 1 + 0.5 + 0) / 4


def test_union_correlation_refuses_a_missing_checkpoint_before_writing(tmp_path, capsys):
    before = {p: p.stat().st_mtime for p in common.RESULTS.rglob("*.json")}
    with pytest.raises(SystemExit):
        union_correlation.main(["--checkpoint", f"typo={tmp_path / 'nothing'}", "--output", "never_written"])
    assert "no checkpoint there" in capsys.readouterr().err
    assert {p: p.stat().st_mtime for p in common.RESULTS.rglob("*.json")} == before


def test_an_experiments_results_go_to_its_folder_and_a_bare_name_finds_the_file_where_it_was_filed(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert common.results_name("union_correlation") == "union_correlation"
    assert common.results_name("modern_text/modern_breaks_c2") == "modern_text/modern_breaks_c2"
    written = common.write_results("modern_text/modern_breaks_c2", {"figure": 1})
    assert written == tmp_path / "experiments" / "modern_text" / "modern_breaks_c2.json"
    # a recorded command names it bare: reading and rewriting it find it in its experiment's folder
    assert common.results_path("modern_breaks_c2") == written
    assert common.write_results("modern_breaks_c2", {"figure": 2}) == written and json.loads(written.read_text()) == {"figure": 2}
    assert common.results_path("a_new_name") == tmp_path / "a_new_name.json"  # a new bare name is one of the summary's
    common.write_results("wp/modern_breaks_c2", {})
    with pytest.raises(ValueError, match=r"several experiments' folders \(modern_text, wp\)"):
        common.results_path("modern_breaks_c2")
    assert common.results_path("wp/modern_breaks_c2", tmp_path / "elsewhere") == tmp_path / "elsewhere" / "experiments" / "wp" / "modern_breaks_c2.json"


@pytest.mark.parametrize("name, message", [("modern_txt/x", "no experiment log benchmarks/experiments/modern_txt.md"),
                                           ("x.json", "without .json"), ("modern_text/", "give NAME or EXPERIMENT/NAME"),
                                           ("../x", "no experiment log"), ("modern_text/a/b", "no experiment log")])
def test_a_results_name_of_no_experiment_is_refused_before_anything_is_measured(name, message, tmp_path, capsys):
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        common.results_name(name)
    before = {p: p.stat().st_mtime for p in common.RESULTS.rglob("*.json")}
    with pytest.raises(SystemExit):
        union_correlation.main(["--checkpoint", f"x={tmp_path}", "--output", name])
    assert message in capsys.readouterr().err and {p: p.stat().st_mtime for p in common.RESULTS.rglob("*.json")} == before


def test_union_development_set_never_reads_the_held_out_pairs(shared_data):
    import datasets

    from storyeval_training.data import continuation_data

    root = shared_data / "continuation"
    rated = datasets.concatenate_datasets([continuation_data.read_deltascore(root / f"deltascore_crowdsource_{name}.jsonl") for name in ("roc", "wp")])
    held_out = continuation_data.grouped_split(rated)["test"]
    held_out_stories = {f"{c} {s}" for c, s in zip(held_out["context"], held_out["continuation"])}
    sizes = {}
    for set_name in ("roc", "wp"):
        stories, overall, models = union_development.development_stories(set_name)
        assert len(stories) == len(overall) == len(models) and not held_out_stories & set(stories)
        assert all(1 <= rating <= 5 for rating in overall)
        sizes[set_name] = len(stories)
    # together with the held-out side, the two sets make up both files, each row once
    assert sizes["roc"] + sizes["wp"] + len(held_out) == len(rated)
    assert sizes["roc"] < sum(1 for source in rated["source"] if "_roc:" in source)


def test_union_development_groups_scores_by_generating_model():
    grouped = union_development.by_model([0.2, 0.4, 0.9], [3.0, 4.0, 5.0], ["gpt3", "gpt3", "BART"], ["a b", "a b c d", "a"])
    assert grouped == {"BART": {"stories": 1, "mean_score": 0.9, "mean_overall": 5.0, "mean_words": 1.0},
                       "gpt3": {"stories": 2, "mean_score": pytest.approx(0.3), "mean_overall": 3.5, "mean_words": 3.0}}


@pytest.mark.parametrize("labels", [["a", "a"], ["missing"]])
def test_union_development_refuses_bad_checkpoints_before_writing(labels, tiny_checkpoint, tmp_path, capsys):
    before = {p: p.stat().st_mtime for p in common.RESULTS.rglob("*.json")}
    paths = {"a": tiny_checkpoint, "missing": tmp_path / "nothing"}
    with pytest.raises(SystemExit):
        union_development.main([arg for label in labels for arg in ("--checkpoint", f"{label}={paths[label]}")] + ["--output", "never_written"])
    assert ("unique" if labels == ["a", "a"] else "no checkpoint there") in capsys.readouterr().err
    assert {p: p.stat().st_mtime for p in common.RESULTS.rglob("*.json")} == before


def test_build_memory_adds_up_the_whole_process_tree():
    # a parent and a child each holding 60 MB: the sum is what a machine must have free
    holder = "import time; x = bytearray(60_000_000); x[::4096] = b'1' * len(x[::4096]); time.sleep(1.5)"
    parent = f"import subprocess, sys; c = subprocess.Popen([sys.executable, '-c', {holder!r}]); exec({holder!r}); c.wait()"
    assert negatives_throughput.run_sampling_memory([sys.executable, "-c", parent], interval=0.1) > 110


def test_the_harness_reproduces_each_papers_row_and_refuses_a_wrong_one(shared_data):
    import dataclasses

    from benchmarks import correlation

    for name in correlation.HUMAN_SETS:
        human_set = correlation.load_human_set(name)
        result = correlation.reproduce_paper(human_set)
        assert result["n"] == len(human_set.stories) == len(human_set.human)
        published = dict(human_set.paper.published, spearman=human_set.paper.published["spearman"] + 0.001)
        wrong = dataclasses.replace(human_set, paper=dataclasses.replace(human_set.paper, published=published))
        with pytest.raises(SystemExit, match=f"harness check failed on {name}"):
            correlation.reproduce_paper(wrong)


def test_unknown_or_absent_human_sets_are_clear_errors(tmp_path, monkeypatch):
    from benchmarks import correlation

    with pytest.raises(KeyError, match="unknown human set 'union_xx'"):
        correlation.load_human_set("union_xx")
    monkeypatch.setenv("STORYEVAL_DATA", str(tmp_path))
    with pytest.raises(SystemExit, match="human-judged set 'union_roc' not found"):
        correlation.load_human_set("union_roc")


def test_the_recorded_command_is_the_module_form():
    assert common.command_line("benchmarks.agreement.union_correlation", ["--sets", "roc"]) == "python -m benchmarks.agreement.union_correlation --sets roc"
    assert common.command_line("benchmarks.agreement.cross_metric", []) == "python -m benchmarks.agreement.cross_metric"


def test_a_benchmark_run_with_python_m_records_its_own_module_name(monkeypatch):
    """Under `python -m benchmarks.<group>.x`, __name__ is "__main__": the command recorded must still name x."""
    import importlib.machinery
    import sys

    from benchmarks.common import command_line

    monkeypatch.setattr(sys.modules["__main__"], "__spec__", importlib.machinery.ModuleSpec("benchmarks.agreement.union_correlation", None), raising=False)
    assert command_line("__main__", ["--sets", "roc"]) == "python -m benchmarks.agreement.union_correlation --sets roc"
    assert command_line("benchmarks.agreement.cross_metric", []) == "python -m benchmarks.agreement.cross_metric"


def test_reference_scores_refuses_to_drop_a_corpus_the_checkpoint_holds(capsys):
    from benchmarks.checkpoints import reference_scores

    with pytest.raises(SystemExit):
        reference_scores.main(["--checkpoint", f"cq={common.BUNDLED / 'continuation-quality'}", "--corpus", "roc"])
    assert "also holds ['wp'], which this run would drop" in capsys.readouterr().err


@pytest.mark.slow
def test_cross_validation_holds_every_rated_pair_out_once(tmp_path):
    import datasets
    from test_continuation import save_tiny_statistics
    from test_continuation_encoder import save_tiny_encoder
    from transformers import AutoTokenizer

    from storyeval.checkpoints.resolution import backbone_path

    recipe = save_tiny_statistics(tmp_path / "head")
    (recipe / "training_results.json").write_text(json.dumps({"args": {"cloze_split": "test", "cloze_pairs": 0, "epochs": 2, "batch_size": 8}}))
    save_tiny_encoder(recipe / "encoder", AutoTokenizer.from_pretrained(backbone_path()))
    animals = ["cat", "dog", "fish", "bird", "horse", "goat"]
    rows = [{"context": f"[MALE] saw a {animals[i % 6]} number {i} .", "continuation": text, "overall": 1 + (i + k) % 5,
             "relevance": 1 + (2 * i + k) % 5, "interestingness": 1 + (i + 2 * k) % 5}
            for i in range(12) for k, text in enumerate(["he fed it some bread .", "the stock market fell ."])]
    rated = datasets.Dataset.from_list(rows)
    result = continuation_quality.cross_validate(recipe, 2, with_encoder=True, rated=rated)
    assert (result["folds"], result["pairs"], result["contexts"]) == (2, 24, 12)
    assert [fold["test_pairs"] for fold in result["per_fold"]] == [12, 12]
    assert all(fold["train_pairs"] + fold["validation_pairs"] + fold["test_pairs"] == 24 and fold["validation_pairs"]
               for fold in result["per_fold"])
    assert set(result["spearman"]) == {"overall", "relevance", "interestingness"}
    assert all(-1 <= v["rho"] <= 1 and len(v["ci95"]) == 2 for v in result["spearman"].values())
    with pytest.raises(SystemExit):
        continuation_quality.main(["--cross-validate", "1"])


def test_wp_extra_pairs_groups_generators_as_weak_or_strong_and_counts_ties_half():
    from benchmarks.agreement.wp_extra_pairs import accuracies

    result = accuracies([0.9, 0.2, 0.5, 0.1], [0.1, 0.3, 0.5, 0.9], ["gpt2-xl", "gpt-neox-20b", "gpt-4", "gpt-4"])
    assert result["weak"] == {"accuracy": 0.5, "pairs": 2}
    assert result["strong"] == {"accuracy": 0.25, "pairs": 2}
    assert result["all"]["pairs"] == 4 and result["gpt-4"]["accuracy"] == 0.25


def test_wp_drift_detokenises_the_release_text():
    from benchmarks.agreement.wp_drift import detokenise, first_words

    assert detokenise("he did n't go , she said .") == "he didn't go, she said."
    assert first_words("a b c d", 2) == "a b"


def test_training_curve_keeps_the_best_so_far_and_refuses_a_state_without_evaluations(tmp_path, capsys):
    from benchmarks.checkpoints import training_curve

    history = [{"step": 25, "minutes": 10.0, "pair_accuracy": 0.7}, {"step": 50, "minutes": 20.0, "pair_accuracy": 0.6},
               {"step": 75, "minutes": 30.0}]
    rows = training_curve.curve(history, "pair_accuracy")
    assert [(r["step"], r["best_so_far"]) for r in rows] == [(25, 0.7), (50, 0.7)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"history": []}))
    with pytest.raises(SystemExit):
        training_curve.main(["--state", str(tmp_path), "--output", "x"])
    assert "holds no evaluation" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        training_curve.main(["--state", str(tmp_path / "none"), "--output", "x"])
    assert "holds neither trainer_state.json nor all_results.json" in capsys.readouterr().err
    ended = tmp_path / "ended"  # a run that ended off the checkpointing grid keeps its history in all_results.json
    ended.mkdir()
    (ended / "all_results.json").write_text(json.dumps({"history": []}))
    with pytest.raises(SystemExit):
        training_curve.main(["--state", str(ended), "--output", "x"])
    assert "all_results.json holds no evaluation" in capsys.readouterr().err


def test_reward_gaming_measures_every_shipped_config_and_refuses_a_bad_one(capsys):
    from benchmarks.reward import reward_gaming

    shipped = reward_gaming.shipped_configs()
    assert ("plot_coherence", "wp-base") in shipped and ("story_quality", "wp-base") in shipped
    assert ("plot_coherence", "wp") not in shipped  # registered, not shipped
    for bad, message in (("union", "expected METRIC:CONFIG"), ("bleu:roc", "unknown metric 'bleu'")):
        with pytest.raises(SystemExit):
            reward_gaming.main(["--configs", bad])
        assert message in capsys.readouterr().err


def test_guard_correlation_gives_the_plain_and_guarded_rewards_from_one_checkpoint():
    import storyeval
    from benchmarks.reward import reward_guard_correlation

    prompts = ["Ken went to the bar.", "Amy wanted a bike.", "Amy wanted a bike."]
    completions = ["He ordered a drink and talked with friends for hours.", "She saved her money all summer long and bought one.",
                   "she saved . she saved . she saved . she saved ."]
    guarded_reward = storyeval.reward("union", "roc", guard=True)
    plain, guarded = reward_guard_correlation.in_calls(guarded_reward, prompts, completions)
    assert plain == pytest.approx(storyeval.reward("union", "roc")(prompts=prompts, completions=completions))
    assert guarded == pytest.approx(guarded_reward(prompts=prompts, completions=completions))
    assert guarded[2] < plain[2]


def test_checked_checkpoints_refuses_repeated_labels_missing_folders_and_bad_batch_sizes(tiny_checkpoint, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    common.add_checkpoint_options(parser, batch_size=8, required=False)
    parse = parser.parse_args
    assert common.checked_checkpoints(parser, parse([]), default={"bundled": "x"}, folders=False) == {"bundled": "x"}
    assert common.checked_checkpoints(parser, parse(["--checkpoint", f"a={tiny_checkpoint}"])) == {"a": str(tiny_checkpoint)}
    for argv, message in ((["--checkpoint", f"a={tiny_checkpoint}", "--checkpoint", f"a={tiny_checkpoint}"], "label must be unique"),
                          (["--checkpoint", f"a={tmp_path / 'none'}"], "no checkpoint there"),
                          (["--checkpoint", f"a={tiny_checkpoint}", "--batch-size", "0"], "--batch-size must be positive")):
        with pytest.raises(SystemExit):
            common.checked_checkpoints(parser, parse(argv))
        assert message in capsys.readouterr().err


def test_device_parity_counts_flipped_pairs_and_refuses_bad_input_before_scoring(tiny_checkpoint, tmp_path, capsys):
    assert device_parity.order_changes([0.1, 0.2, 0.3], [0.1, 0.2, 0.3]) == 0.0
    assert device_parity.order_changes([0.3, 0.2, 0.1], [0.1, 0.2, 0.3]) == 1.0
    assert device_parity.order_changes([0.2, 0.1, 0.3], [0.1, 0.2, 0.3]) == 1 / 3
    stories = tmp_path / "stories.txt"
    stories.write_text("Ken went to the bar. He found a phone.\nAmy baked a cake. It burned.\nTom ran. He won the race.\n")
    for args, message in ((["--checkpoint", f"continuation_quality={tiny_checkpoint}"], "union and plot_coherence"),
                          (["--checkpoint", f"union={tmp_path / 'nothing'}"], "no checkpoint folder"),
                          (["--checkpoint", f"union={tiny_checkpoint}", "--batch-size", "0"], "must be positive"),
                          (["--checkpoint", f"union={tiny_checkpoint}", "--stories-file", str(tmp_path / "none.txt")], "no such file")):
        with pytest.raises(SystemExit):
            device_parity.main(["--stories-file", str(stories), "--output-dir", str(tmp_path)] + args)  # a later option wins
        assert message in capsys.readouterr().err
    # the CPU against itself: the same code path a GPU run takes, with zero gaps
    run = ["--checkpoint", f"union={tiny_checkpoint}", "--device", "cpu", "--dtypes", "float32", "--stories-file", str(stories),
           "--batch-size", "2", "--output-dir", str(tmp_path), "--output", "parity"]
    device_parity.main(run)
    result = json.loads((tmp_path / "parity.json").read_text())
    from storyeval_training.export.provenance import portable_path

    float32 = result["checkpoints"][portable_path(str(tiny_checkpoint))]["dtypes"]["float32"]  # results name no machine path
    assert result["stories"] == 3 and float32["max_abs_difference"] == 0.0 and float32["order_changes_vs_cpu_float32"] == 0.0
    with pytest.raises(SystemExit):  # an existing results file is not overwritten
        device_parity.main(run)
    assert "exists" in capsys.readouterr().err


def test_wp_rank_pairs_scores_each_pair_and_averages_over_prompts(tmp_path):
    pairs = [{"prompt": "a", "better": "s1", "worse": "s2"}, {"prompt": "a", "better": "s1", "worse": "s3"},
             {"prompt": "b", "better": "s4", "worse": "s5"}]
    result = wp_rank_pairs.pair_accuracy(pairs, {"s1": 0.9, "s2": 0.1, "s3": 0.9, "s4": 0.2, "s5": 0.8})
    # pairs: 1 + 0.5 (a tie) + 0 = 1.5 of 3; prompts: a 0.75, b 0.0
    assert (result["accuracy"], result["pairs"], result["prompts"], result["mean_over_prompts"]) == (0.5, 3, 2, 0.375)
    bad = tmp_path / "rank_pairs.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "better_id": "wph1", "worse_id": "wph2"}) + "\n" + json.dumps({"prompt": "p", "better_id": "wph1"}) + "\n")
    with pytest.raises(ValueError, match=r"rank_pairs.jsonl:2: a rank pair needs better_id and worse_id"):
        wp_rank_pairs.read_rank_pairs(bad)
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match=r"rank_pairs.jsonl:1: not a JSON line"):
        wp_rank_pairs.read_rank_pairs(bad)
    with pytest.raises(FileNotFoundError, match="no rank pairs at"):
        wp_rank_pairs.read_rank_pairs(tmp_path / "missing.jsonl")


def test_a_spearman_difference_falls_only_when_its_whole_paired_interval_is_below_zero():
    import numpy as np

    from benchmarks.agreement.cross_metric import spearman_difference

    rng = np.random.default_rng(0)
    human = rng.normal(size=300)
    good = human + rng.normal(size=300)
    same = spearman_difference(good, good, human, resamples=200)
    assert same == {"difference": 0.0, "interval": [0.0, 0.0], "falls": False}
    worse = spearman_difference(rng.normal(size=300), good, human, resamples=200)
    assert worse["falls"] and worse["interval"][1] < 0 < -worse["difference"]
    close = spearman_difference(good + 0.05 * rng.normal(size=300), good, human, resamples=200)
    assert not close["falls"] and close["interval"][0] < 0  # a small move is within the draw of stories


@pytest.mark.parametrize("argv, message", [
    (["--ending", "e=a+b:0.5"], "--ending e=a: no checkpoint there"),
    (["--ending", "e=a+b"], "expects label=story_folder+ending_folder:weight"),
    (["--opening-ending", "o=a+b"], "expects label=story_folder+part_folder:weight"),
    (["--runs", "r=a+b"], "expects label=story_folder+order_folder:weight"),
    (["--part-lowest-share", "e=0.5"], "--part-lowest-share ['e']: not the label of an --ending, --neighbours, --opening-ending or --runs row"),
    (["--part-sentences", "e=5"], "--part-sentences ['e']: not the label of an --ending, --opening-ending or --runs row"),
])
def test_cross_metric_refuses_a_bad_ending_row_before_scoring(capsys, argv, message):
    from benchmarks.agreement import cross_metric

    with pytest.raises(SystemExit):
        cross_metric.main(argv)
    assert message in capsys.readouterr().err


def test_continuation_scale_counts_the_scores_outside_1_to_5_and_refuses_bad_counts(capsys):
    from benchmarks.agreement import continuation_scale

    scores = {"overall": [0.5, 2.0, 4.0, 6.0], "relevance": [1.0, 2.0, 3.0, 5.0], "interestingness": [3.0] * 4}
    result = continuation_scale.summary(scores, [10, 20, 30, 40])
    assert result["overall"]["above_5"] == 0.25 and result["overall"]["below_1"] == 0.25
    assert result["relevance"]["above_5"] == 0.0 and result["relevance"]["below_1"] == 0.0  # 1 and 5 are on the scale
    assert result["overall_spearman_with_words"] == 1.0 and result["words"] == {"median": 25, "max": 40}
    with pytest.raises(SystemExit):
        continuation_scale.main(["--cut-words", "0"])
    assert "must be positive" in capsys.readouterr().err


def test_scoring_speed_times_torch_compile_in_float32_only(capsys):
    with pytest.raises(SystemExit):
        scoring_speed.main(["--torch-compile", "--dtype", "bfloat16"])
    assert "--torch-compile times the float32 model" in capsys.readouterr().err


def test_the_cold_start_is_timed_beside_a_fresh_import_torch(tmp_path, monkeypatch):
    timed = []

    def run(command, **options):
        timed.append(command[1:])
        return subprocess.CompletedProcess(command, 0, "", "import time: self [us] | cumulative | imported package\n")

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(cli_cold_start.subprocess, "run", run)
    cli_cold_start.main(["--repeats", "2", "--output", "cold"])
    payload = json.loads((tmp_path / "cold.json").read_text())
    assert sum(command == ["-c", "import torch"] for command in timed) == 2
    assert len(payload["import_torch_seconds"]) == 2 and payload["ratio_to_import_torch"] > 0


@pytest.mark.parametrize("argv, message", [
    (["--dtype", "int8"], "--dtype int8: give --output"),
    (["--int8-scheme", "union-roc-base=weights_int8"], "--int8-scheme and --sets go with --dtype int8"),
    (["--sets", "union_wp"], "--int8-scheme and --sets go with --dtype int8"),
])
def test_the_suite_correlation_benchmark_measures_int8_only_into_a_file_of_its_own(argv, message, capsys):
    from benchmarks.agreement import story_quality_correlation

    with pytest.raises(SystemExit):
        story_quality_correlation.main(argv)
    assert message in capsys.readouterr().err


def test_a_longer_window_stride_scores_fewer_windows_and_says_how_far_the_scores_move(tiny_checkpoint, shared_data, tmp_path, monkeypatch):
    from benchmarks.speed import window_stride

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    window_stride.main(["--checkpoint", str(tiny_checkpoint), "--corpus", "roc", "--stories", "6", "--strides", "14", "--output", "stride"])
    payload = json.loads((tmp_path / "stride.json").read_text())
    row = payload["strides"]["14"]
    assert payload["own_stride"] == 8 and row["windows"] < payload["own"]["windows"]
    assert set(row["agreement_with_own_stride"]) == {"max_abs_difference", "mean_abs_difference", "spearman_with_float32"}
    for bad in (["--strides", "8"], ["--strides", "15"]):  # the own stride, and one past the window less its special tokens
        with pytest.raises(SystemExit):
            window_stride.main(["--checkpoint", str(tiny_checkpoint), "--stories", "2", *bad])
