"""Plot-guided stages 3-4: the plot -> story generator and adversarial filtering, on tiny random models."""
import json
import math
import random

import datasets
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel, EncoderDecoderModel

from storyeval.checkpoints import resolution as checkpoints
from storyeval_training.data.plots import adversarial_filter as af
from storyeval_training.data.plots import generator

PLOT = [["[MALE]", "bar"], ["phone", "floor"], ["bartender"]]
STORY = "[MALE] was at the bar . he noticed a phone on the floor . he did n't keep it and gave it to the bartender ."


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    """A random 1-layer BERT with the real MiniLM vocabulary, saved with its tokenizer."""
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-bert")
    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    BertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(checkpoints.backbone_path()).save_pretrained(folder)
    return folder


def plots_dataset(n: int, prefix: str) -> datasets.Dataset:
    """Rows shaped like the plots builder's output."""
    sentences = STORY.split(" . ")
    return datasets.Dataset.from_dict(
        {
            "id": [f"{prefix}-{i}" for i in range(n)],
            "story": [STORY] * n,
            "sentences": [sentences] * n,
            "plot": [PLOT] * n,
            "manipulated_plot": [[["bartender"], ["phone", "floor"], ["[MALE]", "bar"]]] * n,
            "techniques": [["reorder"]] * n,
        }
    )


@pytest.fixture(scope="module")
def trained_generator(tiny_encoder, tmp_path_factory):
    run = tmp_path_factory.mktemp("generator-run")
    plots_dataset(8, "train").save_to_disk(str(run / "plots"))
    results = generator.train(generator.parse_args(
        ["--plots-dir", str(run / "plots"), "--model-name-or-path", str(tiny_encoder), "--output-dir", str(run / "out"),
         "--max-train-steps", "2", "--eval-steps", "1", "--per-device-train-batch-size", "4",
         "--max-source-length", "32", "--max-target-length", "40"]
    ))
    return run, results


def test_plot_to_text():
    assert generator.plot_to_text([["kw1", "kw2"], ["kw3"]]) == "kw1 ; kw2 # kw3"
    assert generator.plot_to_text([["a"], [], [" b "]]) == "a # # b"
    assert generator.plot_to_text([]) == ""


def test_decoding_restores_the_corpus_format(tiny_encoder):
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder)
    ids = tokenizer(STORY + " it was 8:00 , a well-known [FEMALE] 's bar .")["input_ids"]
    assert generator.decode_story(tokenizer, ids) == STORY + " it was 8:00 , a well-known [FEMALE] 's bar ."


@pytest.mark.filterwarnings("ignore:Version v4.12.0:FutureWarning")  # EncoderDecoderModel's note on every loss
def test_encoder_only_checkpoint_becomes_an_encoder_decoder(tiny_encoder):
    model, tokenizer = generator.build_generator(str(tiny_encoder))
    assert isinstance(model, EncoderDecoderModel)
    assert model.config.decoder.is_decoder and model.config.decoder.add_cross_attention
    assert model.config.decoder_start_token_id == tokenizer.cls_token_id
    assert model.generation_config.eos_token_id == tokenizer.sep_token_id
    assert model.config.pad_token_id == tokenizer.pad_token_id and model.config.vocab_size == 30522
    source = tokenizer([generator.plot_to_text(PLOT)], return_tensors="pt")
    labels = tokenizer([STORY], return_tensors="pt")["input_ids"][:, 1:]
    loss = model(input_ids=source["input_ids"], attention_mask=source["attention_mask"], labels=labels).loss
    assert math.isfinite(loss.item())

    stories = generator.generate_stories(model, tokenizer, [PLOT, [["x"]]], num_candidates=3, max_new_tokens=6, batch_size=1, seed=0)
    assert len(stories) == 2 and all(len(s) == 3 and all(isinstance(t, str) for t in s) for s in stories)
    again = generator.generate_stories(model, tokenizer, [PLOT, [["x"]]], num_candidates=3, max_new_tokens=6, batch_size=1, seed=0)
    assert again == stories  # a seed fixes the samples


@pytest.mark.filterwarnings("ignore:Version v4.12.0:FutureWarning")
def test_validation_loss_is_the_token_mean_over_all_stories(tiny_encoder):
    from accelerate import Accelerator

    model, tokenizer = generator.build_generator(str(tiny_encoder))
    source = tokenizer([generator.plot_to_text(PLOT)] * 2, return_tensors="pt")
    labels = tokenizer([STORY, "he left ."], return_tensors="pt", padding=True)["input_ids"][:, 1:].contiguous()
    labels[labels == tokenizer.pad_token_id] = -100
    batch = {"input_ids": source["input_ids"], "attention_mask": source["attention_mask"], "labels": labels}
    expected = model(**batch).loss.item()  # the model's own mean over the batch's tokens
    measured = generator.evaluate_loss(model, [batch], Accelerator(cpu=True))
    assert measured["loss"] == pytest.approx(expected, rel=1e-5) and model.training


@pytest.mark.slow
def test_training_writes_a_loadable_generator(trained_generator):
    run, results = trained_generator
    assert results["completed_steps"] == 2 and len(results["history"]) == 2
    assert json.loads((run / "out" / "all_results.json").read_text())["best_validation"]["loss"] > 0
    model, _ = generator.build_generator(str(run / "out" / "best"))  # a saved generator loads as seq2seq
    assert isinstance(model, EncoderDecoderModel)
    assert model.generation_config.max_new_tokens == 40 and model.generation_config.top_k == 50
    info = json.loads((run / "out" / "best" / generator.GENERATOR_INFO).read_text())
    assert info["max_source_length"] == 32 and len(info["train_ids"]) == 7  # one of 8 held out


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Version v4.12.0:FutureWarning")
def test_training_counts_and_warns_about_cut_plots_and_stories(tiny_encoder, tmp_path, caplog):
    """Long WP stories exceed the decoder's window: cutting them must not pass silently."""
    plots = datasets.concatenate_datasets([plots_dataset(6, "short"), plots_dataset(2, "long").map(lambda ex: {"plot": [["bar"] * 12], "story": STORY * 3})])
    plots.save_to_disk(str(tmp_path / "plots"))
    with caplog.at_level("WARNING", logger="storyeval_training.data.plots.generator"):
        results = generator.train(generator.parse_args(
            ["--plots-dir", str(tmp_path / "plots"), "--model-name-or-path", str(tiny_encoder), "--output-dir", str(tmp_path / "out"),
             "--max-train-steps", "1", "--eval-steps", "1", "--max-source-length", "16", "--max-target-length", "40"]
        ))
    truncated = results["truncated"]
    assert sum(t["examples"] for t in truncated.values()) == 8
    assert sum(t["sources"] for t in truncated.values()) == sum(t["targets"] for t in truncated.values()) == 2
    assert "plots cut at --max-source-length 16" in caplog.text and "stories cut at --max-target-length 40" in caplog.text


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Version v4.12.0:FutureWarning")
def test_extra_training_stories_join_training_only(tiny_encoder, tmp_path):
    """Another corpus's stories (ROC's under WP) add training text; validation and the skip list's meaning stay the main data's."""
    plots_dataset(8, "wp").save_to_disk(str(tmp_path / "plots"))
    plots_dataset(5, "roc").select_columns(["id", "plot", "story"]).save_to_disk(str(tmp_path / "extra"))
    results = generator.train(generator.parse_args(
        ["--plots-dir", str(tmp_path / "plots"), "--extra-train-plots-dir", str(tmp_path / "extra"), "--max-extra-train-examples", "3",
         "--model-name-or-path", str(tiny_encoder), "--output-dir", str(tmp_path / "out"),
         "--max-train-steps", "1", "--eval-steps", "1", "--max-source-length", "32", "--max-target-length", "40"]
    ))
    assert results["train_pairs"] == 7 + 3 and results["truncated"]["validation"]["examples"] == 1
    train_ids = json.loads((tmp_path / "out" / "best" / generator.GENERATOR_INFO).read_text())["train_ids"]
    assert sum(i.startswith("roc-") for i in train_ids) == 3 and sum(i.startswith("wp-") for i in train_ids) == 7


def test_extra_training_stories_need_plots_and_stories(tmp_path):
    plots_dataset(2, "roc").select_columns(["id", "story"]).save_to_disk(str(tmp_path / "extra"))
    with pytest.raises(ValueError, match=r"no column\(s\) \['plot'\]"):
        generator.add_extra_train_examples(plots_dataset(2, "wp"), str(tmp_path / "extra"), None, 42)
    with pytest.raises(SystemExit):
        generator.parse_args(["--plots-dir", "p", "--output-dir", "o", "--max-extra-train-examples", "3"])


@pytest.mark.parametrize("options, message", [
    (["--chunk-size", "0"], "--chunk-size and --max-examples must be positive"),
    (["--time-budget-minutes", "0"], "--time-budget-minutes must be positive"),
    (["--min-new-tokens", "-1"], "--min-new-tokens must be in 0..--max-new-tokens"),
])
def test_bad_generation_options_are_usage_errors(options, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        generator.parse_generate_args(["--plots-dir", "p", "--model-name-or-path", "m", "--output-dir", str(tmp_path / "out"), *options])
    assert message in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_generation_refuses_an_output_folder_that_is_not_one_of_its_runs(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit):
        generator.parse_generate_args(["--plots-dir", "p", "--model-name-or-path", "m", "--output-dir", str(tmp_path / "out")])
    assert "exists and is not a run of this command" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]


@pytest.mark.slow
def test_generate_command_writes_candidates(trained_generator, tmp_path):
    run, _ = trained_generator
    plots = datasets.concatenate_datasets([plots_dataset(3, "new"), plots_dataset(2, "train")])
    no_manipulated = plots_dataset(1, "bare").map(lambda ex: {"manipulated_plot": []})
    blank = plots_dataset(1, "blank").map(lambda ex: {"manipulated_plot": [[" "], []]})  # phrases, but all blank
    overlong = plots_dataset(1, "long").map(lambda ex: {"manipulated_plot": [["bartender"] * 40]})  # > the 32 source tokens
    datasets.DatasetDict({"validation": datasets.concatenate_datasets([plots, no_manipulated, blank, overlong])}).save_to_disk(str(tmp_path / "plots"))
    summary = generator.generate_negatives(generator.parse_generate_args(
        ["--plots-dir", str(tmp_path / "plots"), "--model-name-or-path", str(run / "out" / "best"), "--output-dir", str(tmp_path / "neg"),
         "--num-candidates", "2", "--max-new-tokens", "5", "--batch-size", "2"]
    ))
    written = datasets.load_from_disk(str(tmp_path / "neg"))["validation"]
    # stories the generator trained on are skipped, as are rows without a manipulated plot
    train_ids = set(json.loads((run / "out" / "best" / generator.GENERATOR_INFO).read_text())["train_ids"])
    assert written.column_names == ["id", "story", "candidates"]
    assert all(i.startswith("new-") or i not in train_ids for i in written["id"])
    assert not any(i.startswith(("bare", "blank", "long")) for i in written["id"])
    assert all(len(c) == 2 for c in written["candidates"]) and written[0]["story"] == STORY
    stats = summary["splits"]["validation"]
    assert stats["skipped_without_manipulated_plot"] == 2 and stats["generated"] == 2 * len(written)
    assert stats["skipped_plots_longer_than_source_window"] == 1 and stats["stories_per_second"] > 0


@pytest.mark.slow
def test_a_generation_stopped_by_its_budget_resumes_to_what_one_run_writes(trained_generator, tmp_path):
    run, _ = trained_generator
    datasets.DatasetDict({"validation": plots_dataset(3, "new")}).save_to_disk(str(tmp_path / "plots"))

    def generate(folder, *extra):
        return generator.generate_negatives(generator.parse_generate_args(
            ["--plots-dir", str(tmp_path / "plots"), "--model-name-or-path", str(run / "out" / "best"), "--output-dir", str(tmp_path / folder),
             "--num-candidates", "2", "--max-new-tokens", "5", "--chunk-size", "1", *extra]
        ))

    whole = generate("whole")
    stopped = generate("stopped", "--time-budget-minutes", "1e-9")  # stops after its first part
    assert stopped["splits"]["validation"]["stories"] == 1 and not stopped["splits"]["validation"]["complete"]
    assert len(datasets.load_from_disk(str(tmp_path / "stopped"))["validation"]) == 1  # what is done can already be filtered
    with pytest.raises(SystemExit):  # parts of an earlier run are never overwritten silently
        generate("stopped")
    with pytest.raises(ValueError, match="num_candidates differ"):
        generator.generate_negatives(generator.parse_generate_args(
            ["--plots-dir", str(tmp_path / "plots"), "--model-name-or-path", str(run / "out" / "best"), "--output-dir", str(tmp_path / "stopped"),
             "--num-candidates", "3", "--max-new-tokens", "5", "--chunk-size", "1", "--resume"]
        ))
    resumed = generate("stopped", "--resume")
    assert resumed["splits"]["validation"]["complete"] and resumed["splits"]["validation"]["generated_this_sitting"] == 4
    assert whole["splits"]["validation"]["generated"] == resumed["splits"]["validation"]["generated"] == 6
    stopped_rows = datasets.load_from_disk(str(tmp_path / "stopped"))["validation"].to_dict()
    assert stopped_rows == datasets.load_from_disk(str(tmp_path / "whole"))["validation"].to_dict()


@pytest.mark.slow
def test_a_minimum_length_keeps_the_end_token_away(trained_generator):
    run, _ = trained_generator
    model, tokenizer = generator.build_generator(str(run / "out" / "best"))
    stories = generator.generate_stories(model, tokenizer, [PLOT], num_candidates=3, max_new_tokens=6, min_new_tokens=6, seed=0)
    assert all(len(tokenizer(story, add_special_tokens=False)["input_ids"]) >= 5 for story in stories[0])
    with pytest.raises(ValueError, match="min_new_tokens must be in 0..max_new_tokens"):
        generator.generate_stories(model, tokenizer, [PLOT], max_new_tokens=3, min_new_tokens=4)
    with pytest.raises(SystemExit):
        generator.parse_generate_args(["--plots-dir", "p", "--model-name-or-path", "m", "--output-dir", "o", "--max-new-tokens", "3", "--min-new-tokens", "4"])


@pytest.mark.slow
def test_generation_rejects_empty_and_overlong_plots(trained_generator):
    run, _ = trained_generator
    model, tokenizer = generator.build_generator(str(run / "out" / "best"))
    with pytest.raises(ValueError, match=r"plots \[1\] have no phrases"):
        generator.generate_stories(model, tokenizer, [PLOT, [[], [" "]]], max_new_tokens=3)
    with pytest.raises(ValueError, match="1 plot\\(s\\) exceed max_source_length=32 .*not truncated silently"):
        generator.generate_stories(model, tokenizer, [PLOT, [["bartender"] * 40]], max_new_tokens=3, max_source_length=32)


# ---------------------------------------------------------------- adversarial filtering

WORDS = "the a he she went to store park dog cat saw found gave took happy sad home friend car ball".split()


def synthetic_stories(seed: int, n: int, candidates_per_story: int = 6):
    """Humans and human-looking candidates share one distribution; the
    even-indexed candidates carry an obvious marker word and are easy."""
    rng = random.Random(seed)

    def sentence():
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 9))) + " ."

    def story():
        return " ".join(sentence() for _ in range(4))

    humans = [story() for _ in range(n)]
    candidates = [[story() + (" zzzz qqqq zzzz qqqq ." if j % 2 == 0 else "") for j in range(candidates_per_story)] for _ in range(n)]
    return humans, candidates


def test_filter_keeps_the_human_looking_candidates():
    humans, candidates = synthetic_stories(0, 80)
    selected, history = af.adversarial_filter(humans, candidates, keep=3, rounds=8, seed=1)
    assert all(len(s) == 3 for s in selected)
    easy_kept = sum(i % 2 == 0 for s in selected for i in s)
    assert easy_kept <= 0.05 * 240  # about half of the first random selection was marked
    assert history[-1]["error"] > history[0]["error"]  # the selection got harder to reject
    assert history[-1]["swaps"] < history[0]["swaps"]


def test_filter_shows_a_progress_bar(capsys):
    humans, candidates = synthetic_stories(1, 10)
    af.adversarial_filter(humans, candidates, keep=2, rounds=2, seed=0)
    assert "adversarial filtering" in capsys.readouterr().err


def test_filter_is_deterministic_for_a_seed():
    humans, candidates = synthetic_stories(2, 30)
    first = af.adversarial_filter(humans, candidates, keep=2, rounds=3, seed=5)
    assert af.adversarial_filter(humans, candidates, keep=2, rounds=3, seed=5) == first


def test_filter_rejects_bad_input():
    with pytest.raises(ValueError, match="at least two"):
        af.adversarial_filter(["a ."], [["b ."]])
    with pytest.raises(ValueError, match="candidate lists"):
        af.adversarial_filter(["a .", "b ."], [["c ."]])


def test_filter_command_writes_groups_and_history(tmp_path):
    humans, candidates = synthetic_stories(3, 20)
    candidates[0] = [humans[0], "", humans[0].replace(" .", ".")] + candidates[0][:2]  # copies and an empty one
    datasets.Dataset.from_dict({"id": [f"s{i}" for i in range(20)], "story": humans, "candidates": candidates}).save_to_disk(str(tmp_path / "neg"))
    summary = af.run(af.parse_args(["--candidates-dir", str(tmp_path / "neg"), "--output-dir", str(tmp_path / "af"), "--rounds", "2"]))
    pairs = datasets.load_from_disk(str(tmp_path / "af"))
    assert pairs.column_names == ["group", "id", "story", "label"]
    report = summary["splits"]["train"]
    # story 0 has only 2 usable candidates left: dropped so every group is 1 human + 3 negatives
    assert report["dropped_stories_with_too_few_candidates"] == 1 and report["dropped_empty_or_copied_candidates"] == 3
    assert len(pairs) == 19 * 4 and sum(pairs["label"]) == 19
    first_group = pairs.filter(lambda ex: ex["group"] == 0)
    assert list(first_group["label"]) == [1, 0, 0, 0] and first_group["story"][0] == humans[1]
    saved = json.loads((tmp_path / "af" / "adversarial_filter_history.json").read_text())
    assert saved["splits"]["train"]["history"][0]["round"] == 1


def test_zero_rounds_keeps_a_random_selection_as_the_unfiltered_baseline(tmp_path):
    humans, candidates = synthetic_stories(3, 20)
    datasets.Dataset.from_dict({"id": [f"s{i}" for i in range(20)], "story": humans, "candidates": candidates}).save_to_disk(str(tmp_path / "neg"))
    summary = af.run(af.parse_args(["--candidates-dir", str(tmp_path / "neg"), "--output-dir", str(tmp_path / "random"), "--rounds", "0"]))
    pairs = datasets.load_from_disk(str(tmp_path / "random"))
    assert summary["splits"]["train"]["history"] == []
    assert len(pairs) == 20 * 4 and sum(pairs["label"]) == 20
    negatives = [story for story, label in zip(pairs["story"], pairs["label"]) if label == 0]
    assert set(negatives) <= {c for row in candidates for c in row}
    with pytest.raises(SystemExit):
        af.parse_args(["--candidates-dir", "x", "--output-dir", "y", "--rounds", "-1"])


@pytest.mark.slow
def test_a_resumed_generator_keeps_the_lowest_loss_it_had_seen(trained_generator, tmp_path):
    from storyeval_training.loop import load_trainer_state

    state = tmp_path / "step_3"
    (state / "best").mkdir(parents=True)
    (state / "best" / "weights").write_text("step 2")
    history = [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 1.0}, {"step": 3, "loss": 2.0}]
    (state / "trainer_state.json").write_text(json.dumps({"best": history[1], "history": history, "minutes": 1.0}))
    best, kept, minutes = load_trainer_state(state, tmp_path / "resumed", "loss", lowest=True)
    assert best == history[1] and kept == history and minutes == 1.0
    assert (tmp_path / "resumed" / "best" / "weights").read_text() == "step 2"

    run, _ = trained_generator
    resumed = generator.train(generator.parse_args(
        ["--plots-dir", str(run / "plots"), "--model-name-or-path", str(run / "out" / "best"), "--output-dir", str(tmp_path / "again"),
         "--max-train-steps", "2", "--eval-steps", "1", "--checkpointing-steps", "1", "--per-device-train-batch-size", "4",
         "--max-source-length", "32", "--max-target-length", "40"]
    ))
    # make step 1 the lowest loss so far: the resumed run must keep it, whatever step 2 gives
    state_file = tmp_path / "again" / "step_1" / "trainer_state.json"
    saved = json.loads(state_file.read_text())
    saved["history"][0]["loss"] = saved["best"]["loss"] = 1e-6
    state_file.write_text(json.dumps(saved))
    continued = generator.train(generator.parse_args(
        ["--plots-dir", str(run / "plots"), "--model-name-or-path", str(run / "out" / "best"), "--output-dir", str(tmp_path / "again2"),
         "--max-train-steps", "2", "--eval-steps", "1", "--per-device-train-batch-size", "4",
         "--max-source-length", "32", "--max-target-length", "40", "--resume-from-checkpoint", str(tmp_path / "again" / "step_1")]
    ))
    assert [m["step"] for m in continued["history"]] == [1, 2] and continued["best_validation"]["step"] == 1
    assert resumed["completed_steps"] == 2


@pytest.mark.parametrize("option", ["--eval-steps", "--checkpointing-steps", "--max-train-examples", "--max-target-length"])
def test_generator_options_that_must_be_positive_are_usage_errors(option, capsys):
    with pytest.raises(SystemExit):
        generator.parse_args(["--output-dir", "never-made", option, "0"])
    assert f"must be positive: {option} 0" in capsys.readouterr().err
    assert generator.parse_args(["--output-dir", "x", "--max-eval-examples", "0"]).max_eval_examples == 0  # all


@pytest.mark.parametrize("options", [["--lr-scheduler-type", "bogus"], ["--num-warmup-steps", "-1"], ["--resume-from-checkpoint", "nowhere/step_3"]])
def test_generator_options_that_would_fail_after_the_output_folder_are_usage_errors(options, tmp_path):
    with pytest.raises(SystemExit):
        generator.parse_args(["--output-dir", str(tmp_path / "run"), *options])
    assert not (tmp_path / "run").exists()


def test_generation_and_negatives_limits_must_be_positive(capsys):
    from storyeval_training.data import build_negatives

    with pytest.raises(SystemExit):
        generator.parse_generate_args(["--plots-dir", "p", "--model-name-or-path", "m", "--output-dir", "o", "--max-examples", "0"])
    assert "--max-examples must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_negatives.parse_args(["--dataset", "roc", "--output-dir", "o", "--limit", "-1"])
    assert "--limit must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("dataset", ["roc", "wp"])
def test_generator_data_dir_is_the_data_root_as_in_the_other_commands(dataset, tmp_path, monkeypatch):
    seen = []

    def fake_load_split(builder, split, cache_dir=None, **config):
        seen.append(config)
        return datasets.Dataset.from_list([{"id": "1", "plot": [["went"]], "story": "he went ."}])

    monkeypatch.setattr(generator.training, "load_split", fake_load_split)
    args = generator.parse_args(["--dataset", dataset, "--output-dir", str(tmp_path / "run"), "--data-dir", str(tmp_path)])
    generator.load_story_plots(args)
    assert [config["data_dir"] for config in seen] == [str(tmp_path / dataset)] * 2
