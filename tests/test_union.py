"""UNION model, scorer, evaluate module, training loop and CLI on tiny random checkpoints."""
import csv
import json
from pathlib import Path

import datasets
import evaluate
import huggingface_hub
import pytest
import torch
import transformers
from huggingface_hub.errors import StrictDataclassClassValidationError
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel

import storyeval
from storyeval.checkpoints import resolution as checkpoints
from storyeval.cli import main as cli
from storyeval.models import UnionConfig, UnionModel
from storyeval.scoring.sequence import load_union_scorer
from storyeval.scoring.signature import major_minor

TRANSFORMERS, TORCH = major_minor(transformers.__version__), major_minor(torch.__version__)

METRIC_DIR = str(Path(__file__).resolve().parent.parent / "metrics" / "union")
STORY = "[MALE] was at the bar . he noticed a phone on the floor . he gave it to the bartender ."


def tiny_encoder_config(vocab_size=30522):
    return BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(checkpoints.backbone_path())


def test_forward_backward_and_ablation():
    torch.manual_seed(0)
    model = UnionModel(UnionConfig(encoder=tiny_encoder_config(vocab_size=50).to_dict(), max_length=64))
    ids = torch.randint(5, 50, (4, 9))
    recon = ids.clone()
    recon[:2] = -100  # human stories carry no target
    out = model(ids, torch.ones_like(ids), labels=torch.tensor([1, 1, 0, 0]), recon_labels=recon)
    assert torch.isfinite(out.loss) and out.recon_loss > 0
    assert torch.allclose(out.loss, out.cls_loss + 0.1 * out.recon_loss)
    out.loss.backward()
    assert model.recon_bias.grad is not None and model.classifier.weight.grad is not None
    model.config.recon_weight = 0.0  # the paper's -Recon ablation
    assert model(ids, labels=torch.ones(4), recon_labels=recon).recon_loss is None


def test_save_load_roundtrip_through_auto_classes(tmp_path):
    model = UnionModel(UnionConfig(encoder=tiny_encoder_config(vocab_size=50).to_dict(), max_length=64)).eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, UnionModel) and loaded.config.model_type == "storyeval-union"
    ids = torch.randint(5, 50, (2, 7))
    assert torch.allclose(model(ids).logits, loaded(ids).logits)
    loaded.drop_reconstruction_head()
    with pytest.raises(ValueError, match="no reconstruction head"):
        loaded(ids, labels=torch.ones(2), recon_labels=ids)


def test_scorer_restores_order_and_is_batch_invariant(tiny_checkpoint):
    scorer = load_union_scorer(tiny_checkpoint, device="cpu")
    stories = [STORY, "he left .", STORY + " " + STORY, "she smiled at him ."]
    together = scorer.score(stories, batch_size=3)
    alone = [scorer.score([s], batch_size=1)[0] for s in stories]
    assert together == pytest.approx(alone, abs=1e-5)
    assert all(0.0 <= s <= 1.0 for s in together)


def test_a_device_passed_to_score_does_not_move_the_shared_cached_scorer(tiny_checkpoint):
    # load_union_scorer caches one scorer per folder and device; every metric instance on that folder holds it
    scorer, other = load_union_scorer(tiny_checkpoint, device="cpu"), load_union_scorer(tiny_checkpoint, device="cpu")
    assert scorer is other
    expected = scorer.score([STORY])
    assert scorer.score([STORY], device="cpu:1") == pytest.approx(expected, abs=1e-6)
    assert other.device == torch.device("cpu") and next(other.model.parameters()).device == torch.device("cpu")
    assert next(scorer.model_in(torch.float32, torch.device("cpu:1")).parameters()) is not next(scorer.model.parameters())
    assert load_union_scorer(tiny_checkpoint, device="cpu").device == torch.device("cpu")


def test_bfloat16_scores_track_float32_and_leave_it_exact(tiny_checkpoint):
    scorer = load_union_scorer(tiny_checkpoint, device="cpu")
    stories = [STORY, "he left .", "she smiled at him ."]
    modes = []
    hooks = [m.register_forward_pre_hook(lambda *_: modes.append(torch.is_inference_mode_enabled())) for m in (scorer.model, scorer.model_in(torch.bfloat16))]
    full = scorer.score(stories)
    low = scorer.score(stories, dtype="bfloat16")
    for hook in hooks:
        hook.remove()
    assert modes and all(modes)  # both precisions score under inference_mode
    assert next(scorer.model_in(torch.bfloat16).parameters()).dtype == torch.bfloat16
    assert low == pytest.approx(full, abs=0.02)
    with pytest.raises(ValueError, match="unsupported dtype 'int4'"):
        scorer.score(stories, dtype="int4")
    # the float32 model is never converted in place, so switching back is exact
    assert scorer.score(stories, dtype=torch.float32) == full and next(scorer.model.parameters()).dtype == torch.float32


def test_long_stories_are_windowed_not_truncated(tiny_checkpoint):
    scorer = load_union_scorer(tiny_checkpoint, device="cpu")
    long_story = " ".join(f"word{i} ." for i in range(40))
    windows = scorer.windows(long_story)
    assert len(windows) > 1 and all(len(w) <= 16 for w in windows)
    body = scorer.tokenizer(long_story, add_special_tokens=False)["input_ids"]
    covered = [tok for w in windows for tok in w[1:-1]]
    assert set(covered) == set(body) and windows[-1][-2] == body[-1]  # the last token is scored
    per_window = scorer.score([scorer.tokenizer.decode(w[1:-1]) for w in windows], batch_size=8)
    assert scorer.score([long_story])[0] == pytest.approx(sum(per_window) / len(per_window), abs=0.02)


def test_a_story_needing_more_windows_than_the_limit_is_refused_naming_it(tiny_checkpoint, monkeypatch):
    from storyeval.scoring import sequence as scoring
    from storyeval.scoring import windows

    scorer = load_union_scorer(tiny_checkpoint, device="cpu")
    long_story = " ".join(f"word{i} ." for i in range(40))
    needed = len(scorer.windows(long_story))
    monkeypatch.setattr(windows, "MAX_WINDOWS", needed)
    assert len(scorer.windows(long_story)) == needed  # at the limit: scored
    monkeypatch.setattr(windows, "MAX_WINDOWS", needed - 1)
    with pytest.raises(scoring.StoryTooLongError, match=rf"predictions\[1\] is .* tokens long and needs {needed} windows of 16 tokens; "
                                                        rf"a story may have at most {needed - 1} \(") as raised:
        scorer.score(["A short story .", long_story])
    assert raised.value.index == 1


def test_a_checkpoint_can_score_a_long_story_by_its_weakest_window(tmp_path):
    from conftest import save_tiny_checkpoint

    scorer = load_union_scorer(save_tiny_checkpoint(tmp_path / "min", window_aggregation="min"), device="cpu")
    long_story = " ".join(f"word{i} ." for i in range(40))
    per_window = scorer.score([scorer.tokenizer.decode(w[1:-1]) for w in scorer.windows(long_story)], batch_size=8)
    assert scorer.window_aggregation == "min"
    assert scorer.score([long_story])[0] == pytest.approx(min(per_window), abs=0.02)
    with pytest.raises(StrictDataclassClassValidationError, match="window_aggregation must be 'mean' or 'min'"):
        UnionConfig(encoder=tiny_encoder_config().to_dict(), max_length=64, window_aggregation="max")


def test_window_aggregation_is_chosen_on_validation_pairs_and_written_into_the_checkpoint(tmp_path):
    from conftest import save_tiny_checkpoint

    from storyeval_training.export import window_aggregation

    checkpoint = save_tiny_checkpoint(tmp_path / "ckpt", max_length=32, window_stride=16)
    long_story = " ".join(f"word{i} ." for i in range(30))
    pairs = datasets.Dataset.from_dict({"human": [long_story, "he went home ."], "negative": ["home went he .", long_story[::-1]]})
    datasets.DatasetDict({"train": pairs, "validation": pairs}).save_to_disk(str(tmp_path / "pairs"))
    output = tmp_path / "choice.json"
    window_aggregation.main(["--checkpoint", str(checkpoint), "--pairs-dir", str(tmp_path / "pairs"), "--window", "16", "--output", str(output),
                             "--compare-with", str(checkpoint)])
    result = json.loads(output.read_text())
    assert set(result["pair_accuracy"]) == {"mean", "min"} and result["share_of_stories_over_one_window"] == 0.5
    chosen = result["chosen"]
    assert result["pair_accuracy"][chosen] == max(result["pair_accuracy"].values())
    assert json.loads((checkpoint / "config.json").read_text())["window_aggregation"] == chosen
    assert load_union_scorer(checkpoint, device="cpu").window_aggregation == chosen  # the cached scorer was dropped
    with pytest.raises(SystemExit):  # an existing result is never overwritten
        window_aggregation.parse_args(["--checkpoint", str(checkpoint), "--pairs-dir", "p", "--output", str(output)])
    with pytest.raises(ValueError, match="--window must be in 3..32"):
        window_aggregation.choose(str(checkpoint), pairs, 64)


def test_metric_through_evaluate_load(tiny_checkpoint):
    union = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    results = union.compute(predictions=[STORY, "he left ."], batch_size=1)
    assert set(results) == {"scores", "mean_score", "settings"} and len(results["scores"]) == 2
    assert results["settings"] == (f"{tiny_checkpoint.name}_fp32_storyeval-{storyeval.__version__}_transformers-{TRANSFORMERS}"
                                   f"_torch-{TORCH}_weights-{checkpoints.scoring_digest(tiny_checkpoint)}")
    assert results["mean_score"] == pytest.approx(sum(results["scores"]) / 2)
    again = union.compute(predictions=[STORY, "he left ."], batch_size=8, device="cpu", progress_bar=True)
    assert again["scores"] == pytest.approx(results["scores"], abs=1e-5)
    with pytest.raises(ValueError, match="predictions is empty: no stories to score"):  # as the CLI refuses an empty file
        union.compute(predictions=[])


@pytest.mark.parametrize(
    "predictions, error, message",
    [
        (None, TypeError, "got None"),
        ("a story", TypeError, "got str"),
        ([STORY, None], TypeError, r"predictions\[1\]"),
        ([STORY, 3], TypeError, r"predictions\[1\] must be a string"),
        ([STORY, "   "], ValueError, r"predictions\[1\] is empty"),
        ([STORY, "\u200b"], ValueError, r"predictions\[1\] is empty or has no letters"),
        ([STORY, "..."], ValueError, r"predictions\[1\] is empty or has no letters"),
        # the sentence separator of the plot-guided releases is markup, not words
        ([STORY, " </s> . </s>"], ValueError, r"predictions\[1\] is empty or has no letters"),
        ([STORY, "he saw a dog \ud83d"], ValueError, r"predictions\[1\] holds '\\ud83d' at position 13, a lone surrogate"),
    ],
)
def test_metric_bad_input(tiny_checkpoint, predictions, error, message):
    union = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    with pytest.raises(error, match=message):
        union.compute(predictions=predictions)
    with pytest.raises(ValueError, match="reference-free"):
        union.compute(predictions=[STORY], references=[STORY])


def test_missing_nltk_data_fails_at_load_not_at_the_first_compute(tiny_checkpoint, tmp_path, monkeypatch):
    import nltk

    from storyeval.checkpoints.resources import MissingResourceError

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])  # an empty data folder
    with pytest.raises(MissingResourceError, match="punkt_tab"):
        evaluate.load(METRIC_DIR, str(tiny_checkpoint))


def test_numpy_arrays_of_stories_are_accepted(tiny_checkpoint):
    import numpy as np

    union = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    expected = union.compute(predictions=[STORY, "he left ."])["scores"]
    assert union.compute(predictions=np.array([STORY, "he left ."]))["scores"] == pytest.approx(expected, abs=1e-6)
    with pytest.raises(TypeError, match="list of strings"):
        union.compute(predictions=np.array([[STORY]]))  # 2-D: not a list of stories


def test_stories_queued_with_add_batch_are_scored_by_compute(tiny_checkpoint):
    union = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    expected = union.compute(predictions=[STORY, "he left ."])["scores"]
    union.add_batch(predictions=[STORY])
    union.add(prediction="he left .")
    assert union.compute(batch_size=1)["scores"] == pytest.approx(expected, abs=1e-5)
    assert len(union.compute(predictions=["he ran ."])["scores"]) == 1  # the queue was consumed
    with pytest.raises(TypeError, match="got None"):
        union.compute()  # nothing queued, nothing passed
    # a bad item is rejected before it is queued
    with pytest.raises(ValueError, match=r"predictions\[1\] is empty"):
        union.add_batch(predictions=[STORY, ""])
    with pytest.raises(ValueError, match="reference-free"):
        union.add(prediction=STORY, reference=STORY)
    assert len(union.compute(predictions=["he ran ."])["scores"]) == 1
    union.add_batch(predictions=[])  # an empty batch queued, as an eval loop with nothing left may do
    with pytest.raises(ValueError, match="predictions is empty: no stories to score"):
        union.compute()
    union.add_batch(predictions=[])  # beside others, it adds nothing
    union.add_batch(predictions=["he ran ."])
    assert len(union.compute()["scores"]) == 1


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"device": "cuda:99"}, ValueError, "'cuda:99' is not available"),
        ({"device": "gpu"}, ValueError, "unsupported device 'gpu'"),
        ({"device": "meta"}, ValueError, "unsupported device 'meta'"),
        ({"batch_size": 0}, ValueError, "batch_size must be positive"),
        ({"batch_size": None}, TypeError, "batch_size must be a positive integer"),
        ({"batch_size": 1.5}, TypeError, "batch_size must be a positive integer"),
        ({"batch_size": True}, TypeError, "batch_size must be a positive integer"),
        ({"progress_bar": "no"}, TypeError, "progress_bar must be True or False, got 'no'"),  # a truthy string
        ({"dtype": "int4"}, ValueError, "unsupported dtype"),
        ({"batchsize": 8}, TypeError, r"unknown option\(s\) \['batchsize'\]; it takes \['batch_size', 'device', 'progress_bar', 'dtype', 'on_invalid'\]"),
    ],
)
def test_bad_runtime_options_change_nothing(tiny_checkpoint, options, error, message):
    union = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    expected = union.compute(predictions=[STORY])["scores"]
    union.add_batch(predictions=[STORY])
    with pytest.raises(error, match=message):
        union.compute(predictions=["he left ."], **options)
    # the queued story is still there, and the shared, cached model still scores on its device
    assert len(union.compute()["scores"]) == 1
    assert evaluate.load(METRIC_DIR, str(tiny_checkpoint)).compute(predictions=[STORY])["scores"] == pytest.approx(expected, abs=1e-6)


def test_numpy_integers_are_batch_sizes(tiny_checkpoint):
    import numpy as np

    union = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    assert union.compute(predictions=[STORY, "he left ."], batch_size=np.int64(1))["scores"] == pytest.approx(
        union.compute(predictions=[STORY, "he left ."], batch_size=2)["scores"], abs=1e-5)


def test_unknown_config_lists_choices_and_missing_checkpoint_says_what_to_do(monkeypatch, tmp_path):
    choices = (r"\['roc', 'roc-base', 'roc-complete', 'roc-neighbours', 'wp', 'wp-base', 'wp-base-complete', 'wp-base-ending', "
               r"'wp-base-ending-neighbours', 'wp-base-ordered', 'wp-complete', 'wp-neighbours', 'wp-ordered', 'default'\]")
    with pytest.raises(ValueError, match=choices):
        evaluate.load(METRIC_DIR, "imaginary")
    monkeypatch.setattr(checkpoints, "HUB_CARDS", tmp_path)  # no bundled copies
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))  # none cached either
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match=rf"hf download storyeval/{checkpoints.REGISTRY['union'][checkpoints.DEFAULT_CONFIG['union']]}"):
        checkpoints.resolve_checkpoint("union", "default")


def test_default_config_is_the_registrys(tiny_checkpoint, monkeypatch, tmp_path):
    (tmp_path / checkpoints.REGISTRY["union"][checkpoints.DEFAULT_CONFIG["union"]]).symlink_to(tiny_checkpoint)
    monkeypatch.setattr(checkpoints, "HUB_CARDS", tmp_path)
    resolved = checkpoints.resolve_checkpoint("union", "default")  # a snapshot of it in the Hugging Face cache
    assert (resolved / "model.safetensors").resolve() == (tiny_checkpoint / "model.safetensors").resolve()


def save_tiny_training_inputs(tmp_path, tokenizer, pairs: int):
    """A tiny BERT encoder in tmp_path/encoder (returned) and ``pairs`` repetition pairs in tmp_path/pairs (validation: 2)."""
    from storyeval_training.data import build_negatives

    encoder_dir = tmp_path / "encoder"
    BertModel(tiny_encoder_config()).save_pretrained(encoder_dir)
    tokenizer.save_pretrained(encoder_dir)
    rows = {
        "id": [f"s{i}" for i in range(pairs)],
        "context": ["he sat ."] * pairs,
        "human": [f"he sat . he ate {i} apples ." for i in range(pairs)],
        "negative": [f"he sat . he ate ate {i} apples ." for i in range(pairs)],
        "original": [f"he sat . he ate {i} apples ." for i in range(pairs)],
        "techniques": [["repetition"]] * pairs,
    }
    dataset = datasets.Dataset.from_dict(rows, features=build_negatives.PAIR_FEATURES)
    datasets.DatasetDict({"train": dataset, "validation": dataset.select(range(2))}).save_to_disk(tmp_path / "pairs")
    return encoder_dir


@pytest.mark.slow
def test_training_smoke_run_writes_a_loadable_checkpoint(tmp_path, tokenizer):
    from storyeval_training.recipes import train_union

    encoder_dir = save_tiny_training_inputs(tmp_path, tokenizer, 6)
    args = train_union.parse_args(
        ["--pairs-dir", str(tmp_path / "pairs"), "--model-name-or-path", str(encoder_dir), "--output-dir", str(tmp_path / "run"),
         "--max-train-steps", "3", "--eval-steps", "2", "--checkpointing-steps", "2", "--per-device-train-batch-size", "4",
         "--max-length", "32", "--export-dir", str(tmp_path / "export")]
    )
    results = train_union.train(args)
    assert results["completed_steps"] == 3 and len(results["history"]) == 2
    assert json.loads((tmp_path / "run" / "all_results.json").read_text())["completed_steps"] == 3
    assert (tmp_path / "run" / "step_2" / "trainer_state.json").is_file()  # resumable state
    exported = UnionModel.from_pretrained(tmp_path / "export")
    assert exported.config.has_reconstruction_head and exported.dtype == torch.float16
    card = (tmp_path / "export" / "README.md").read_text()
    assert "## Training data and procedure" in card
    # pairs from a folder that does not record its corpus: the card does not claim one, and gives the encoder's real size
    assert "\n# union\n" in card and "datasets:" not in card and "the pairs in `" in card
    assert "An encoder of 1 layer of width 16, smaller than the paper's BERT-base" in card
    # the card says where it trained, from the environment the loop recorded
    environment = json.loads((tmp_path / "export" / "training_results.json").read_text())["environment"]
    assert environment["cores"] >= 1 and f"-core CPU ({environment['cpu']})" in card
    resumed = train_union.train(train_union.parse_args(
        ["--pairs-dir", str(tmp_path / "pairs"), "--model-name-or-path", str(encoder_dir), "--output-dir", str(tmp_path / "run2"),
         "--max-train-steps", "3", "--per-device-train-batch-size", "4", "--max-length", "32",
         "--resume-from-checkpoint", str(tmp_path / "run" / "step_2")]
    ))
    # the resumed run keeps the evaluations it had already made
    assert resumed["completed_steps"] == 3 and [m["step"] for m in resumed["history"]] == [2, 3]
    assert resumed["best_validation"]["step"] in (2, 3)
    # continuing from an exported (fp16) checkpoint trains in fp32
    continued = train_union.train(train_union.parse_args(
        ["--pairs-dir", str(tmp_path / "pairs"), "--model-name-or-path", str(tmp_path / "export"), "--output-dir", str(tmp_path / "run3"),
         "--max-train-steps", "1", "--per-device-train-batch-size", "4", "--max-length", "32"]
    ))
    assert continued["completed_steps"] == 1 and UnionModel.from_pretrained(tmp_path / "run3" / "best").dtype == torch.float32


@pytest.mark.slow
@pytest.mark.parametrize(
    "pairs, accumulation, steps, resume_at, batches_after",
    # 6 batches an epoch, resumed in epoch 1; 5 batches in 3 steps (the last accumulates one), resumed at an epoch's end;
    # 6 batches an epoch, the last step (9) in the middle of epoch 1
    [(12, 1, 12, 8, 4), (10, 2, 6, 3, 5), (12, 1, 9, 3, 6)],
)
def test_a_resumed_run_trains_on_the_batches_the_uninterrupted_one_did(
    tmp_path, tokenizer, monkeypatch, pairs, accumulation, steps, resume_at, batches_after
):
    from storyeval_training.data import build_negatives
    from storyeval_training.loop import load_trainer_state
    from storyeval_training.recipes import train_union

    encoder_dir = tmp_path / "encoder"
    BertModel(tiny_encoder_config()).save_pretrained(encoder_dir)
    tokenizer.save_pretrained(encoder_dir)
    rows = {
        "id": [f"s{i}" for i in range(pairs)], "context": ["he sat ."] * pairs,
        "human": [f"he sat . he ate {i} apples ." for i in range(pairs)],
        "negative": [f"he sat . he ate ate {i} apples ." for i in range(pairs)],
        "original": [f"he sat . he ate {i} apples ." for i in range(pairs)], "techniques": [["repetition"]] * pairs,
    }
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows, features=build_negatives.PAIR_FEATURES),
                          "validation": datasets.Dataset.from_dict(rows, features=build_negatives.PAIR_FEATURES).select(range(2))}
                         ).save_to_disk(tmp_path / "pairs")
    seen = []
    forward = UnionModel.forward

    def recording_forward(self, input_ids=None, **kwargs):
        if self.training:
            seen.append(sorted(input_ids.sum(dim=1).tolist()))  # which examples were in the batch
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(UnionModel, "forward", recording_forward)
    common = ["--pairs-dir", str(tmp_path / "pairs"), "--model-name-or-path", str(encoder_dir), "--max-train-steps", str(steps),
              "--per-device-train-batch-size", "4", "--max-length", "32", "--gradient-accumulation-steps", str(accumulation),
              "--eval-steps", "2"]
    full = train_union.train(train_union.parse_args(common + ["--output-dir", str(tmp_path / "full"), "--checkpointing-steps", str(resume_at)]))
    uninterrupted, seen[:] = list(seen), []
    resumed = train_union.train(train_union.parse_args(
        common + ["--output-dir", str(tmp_path / "resumed"), "--resume-from-checkpoint", str(tmp_path / "full" / f"step_{resume_at}"),
                  "--export-dir", str(tmp_path / "export")]))
    assert len(seen) == batches_after and seen == uninterrupted[-batches_after:]
    assert resumed["completed_steps"] == full["completed_steps"] == steps and (tmp_path / "export" / "model.safetensors").is_file()
    # and with the same dropout masks: every evaluation after the resume matches the uninterrupted run's
    def evaluations(results):
        return [{k: v for k, v in h.items() if k != "minutes"} for h in results["history"] if h["step"] > resume_at]

    assert evaluations(resumed) and evaluations(resumed) == evaluations(full)
    if steps % resume_at == 0:  # resuming from the last step trains nothing more
        seen[:] = []
        again = train_union.train(train_union.parse_args(
            common + ["--output-dir", str(tmp_path / "again"), "--resume-from-checkpoint", str(tmp_path / "full" / f"step_{steps}")]))
        assert not seen and again["completed_steps"] == steps and again["history"] == full["history"]
    # the best weights so far come back with the state, so a resume into a new folder can export them
    # even if no later evaluation beats them
    state = tmp_path / "full" / f"step_{resume_at}"
    best, _, _ = load_trainer_state(state, tmp_path / "fresh")
    assert best["step"] <= resume_at
    assert (tmp_path / "fresh" / "best" / "model.safetensors").read_bytes() == (state / "best" / "model.safetensors").read_bytes()


@pytest.mark.parametrize("option", ["--eval-steps", "--checkpointing-steps", "--gradient-accumulation-steps", "--per-device-eval-batch-size",
                                    "--num-train-epochs", "--max-train-pairs", "--max-train-steps", "--learning-rate"])
def test_training_options_that_must_be_positive_are_usage_errors(option, capsys):
    from storyeval_training.recipes import train_union

    with pytest.raises(SystemExit):
        train_union.parse_args(["--dataset", "roc", "--output-dir", "never-made", option, "0"])
    assert f"must be positive: {option} 0" in capsys.readouterr().err
    assert train_union.parse_args(["--dataset", "roc", "--output-dir", "x", "--max-eval-pairs", "0"]).max_eval_pairs == 0  # all


@pytest.mark.parametrize(
    "options, message",
    [
        (["--recon-weight", "-1"], "--recon-weight (0: no reconstruction) must not be negative"),
        (["--weight-decay", "-0.1"], "must not be negative: --weight-decay -0.1"),
        (["--num-warmup-steps", "-3"], "must not be negative: --num-warmup-steps -3"),
        (["--negative-seeds", "42", "42"], "--negative-seeds repeats a seed"),
        (["--lr-scheduler-type", "bogus"], "invalid choice: 'bogus'"),
        (["--resume-from-checkpoint", "{tmp}/nothing/step_4"], "expected a step_N folder"),
        (["--resume-from-checkpoint", "{tmp}/best"], "expected a step_N folder"),
    ],
)
def test_training_options_that_would_fail_after_the_output_folder_are_usage_errors(options, message, tmp_path, capsys):
    from storyeval_training.recipes import train_union

    (tmp_path / "best").mkdir()
    with pytest.raises(SystemExit):
        train_union.parse_args(["--dataset", "roc", "--output-dir", str(tmp_path / "run")] + [o.format(tmp=tmp_path) for o in options])
    assert message in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_a_negative_reconstruction_weight_is_refused_by_the_config():
    with pytest.raises(StrictDataclassClassValidationError, match="recon_weight must not be negative"):
        UnionConfig(encoder=tiny_encoder_config().to_dict(), max_length=64, recon_weight=-1.0)


def test_pair_accuracy_ranks_each_human_story_against_its_own_negative():
    from storyeval_training.recipes.train_union import pair_accuracy

    labels = torch.tensor([1, 0, 1, 0, 1, 0])
    # every score is above the 0.5 threshold, so threshold accuracy is 0.5, yet two pairs of three rank right, one ties
    logits = torch.tensor([3.0, 1.0, 2.0, 0.5, 1.0, 1.0])
    assert pair_accuracy(logits, labels) == pytest.approx(2.5 / 3)
    with pytest.raises(ValueError, match="alternate"):
        pair_accuracy(logits, torch.tensor([0, 1, 1, 0, 1, 0]))
    with pytest.raises(ValueError, match="alternate"):
        pair_accuracy(logits[:5], labels[:5])


def test_reconstruction_targets_are_the_original_words_not_special_tokens(tokenizer):
    from storyeval_training.recipes import train_union

    batch = {"id": ["s1"], "human": ["he ate apples ."], "negative": ["he ate ate apples ."], "original": ["he ate apples ."]}
    examples = train_union.to_examples(batch, tokenizer, max_length=32)
    human_targets, negative_targets = examples["recon_labels"]
    assert set(human_targets) == {-100} and examples["labels"] == [1, 0]
    words = tokenizer("he ate apples .", add_special_tokens=False)["input_ids"]
    # aligned by position with the negative: [CLS] he ate ate apples . [SEP] -> - he ate apples . - -
    assert negative_targets == [-100, *words, -100, -100]
    assert len(negative_targets) == len(examples["input_ids"][1])


def test_the_best_evaluation_is_the_earliest_of_equals_and_never_nan():
    from storyeval_training.selection import best_by, improves

    nan = float("nan")
    history = [{"step": 1, "rho": nan}, {"step": 2, "rho": 0.3}, {"step": 3, "rho": nan}, {"step": 4, "rho": 0.3}, {"step": 5}]
    assert best_by(history, "rho")["step"] == 2
    assert best_by(history[:1], "rho")["step"] == 1  # a NaN is kept only until a number arrives
    assert best_by([{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0}], "loss", lowest=True)["step"] == 2
    assert best_by([{"step": 5}], "rho") is None
    assert improves({"rho": 0.1}, None, "rho") and not improves({"rho": nan}, {"rho": 0.0}, "rho")


def test_the_length_signal_is_a_spearman_with_words_and_undefined_for_one_length():
    from storyeval_training.selection import length_spearman

    assert length_spearman([0.1, 0.5, 0.9], [10, 20, 30]) == pytest.approx(1.0)
    assert length_spearman([0.9, 0.5, 0.1], [10, 20, 30]) == pytest.approx(-1.0)
    assert length_spearman([0.1, 0.5, 0.9], [20, 20, 20]) is None


@pytest.mark.slow
def test_training_selects_on_other_pairs_when_given(tmp_path, tokenizer):
    from storyeval_training.data import build_negatives
    from storyeval_training.recipes import train_union

    encoder_dir = tmp_path / "encoder"
    BertModel(tiny_encoder_config()).save_pretrained(encoder_dir)
    tokenizer.save_pretrained(encoder_dir)
    own = {
        "id": [f"s{i}" for i in range(6)], "context": ["he sat ."] * 6,
        "human": [f"he sat . he ate {i} apples ." for i in range(6)],
        "negative": [f"he sat . he ate ate {i} apples ." for i in range(6)],
        "original": [f"he sat . he ate {i} apples ." for i in range(6)], "techniques": [["repetition"]] * 6,
    }
    pairs = datasets.Dataset.from_dict(own, features=build_negatives.PAIR_FEATURES)
    datasets.DatasetDict({"train": pairs, "validation": pairs.select(range(2))}).save_to_disk(tmp_path / "pairs")
    # released-style pairs: names kept, cased, untokenised
    other = {
        "id": ["a-0", "b-0"], "context": ["Tom sat down.", "Anna woke up."],
        "human": ["Tom sat down. He ate an apple.", "Anna woke up. She was late."],
        "negative": ["Tom sat down. He ate the chair.", "Anna woke up. She was asleep."],
        "original": ["Tom sat down. He ate an apple.", "Anna woke up. She was late."], "techniques": [["paper"]] * 2,
    }
    selection = datasets.Dataset.from_dict(other, features=build_negatives.PAIR_FEATURES)
    datasets.DatasetDict({"train": selection, "validation": selection}).save_to_disk(tmp_path / "selection")

    normalised = train_union.load_selection_pairs(str(tmp_path / "selection"), delexicalize=True)
    assert normalised["human"][0] == "[MALE] sat down . he ate an apple ."  # as scoring would see it
    # a builder's pairs are read as they are: normalising '' again would make it ``
    quoted = normalised.map(lambda row: {"human": row["human"] + " he said , `` fine . ''"})
    datasets.DatasetDict({"validation": quoted}).save_to_disk(tmp_path / "built")
    assert train_union.load_selection_pairs(str(tmp_path / "built"), True, normalised=True)["human"] == quoted["human"]
    assert train_union.load_selection_pairs(str(tmp_path / "built"), True)["human"][0].endswith("`` fine . ``")

    common = ["--pairs-dir", str(tmp_path / "pairs"), "--model-name-or-path", str(encoder_dir), "--max-train-steps", "4",
              "--eval-steps", "1", "--per-device-train-batch-size", "4", "--max-length", "32", "--learning-rate", "1e-3"]
    assert train_union.parse_args(common + ["--output-dir", "x", "--selection-pairs-normalised"]).selection_pairs_normalised
    results = train_union.train(train_union.parse_args(
        common + ["--output-dir", str(tmp_path / "run"), "--selection-pairs-dir", str(tmp_path / "selection"), "--export-dir", str(tmp_path / "export")]
    ))
    assert results["selected_by"] == "selection_pair_accuracy"
    assert results["train_pairs_dropped_for_selection"] == 0 and "0 training pairs" in (tmp_path / "export" / "README.md").read_text()
    # results from before the screening say so instead of claiming none were dropped
    from storyeval_training.export.model_card import write_union_card

    write_union_card(tmp_path / "export", {k: v for k, v in results.items() if k != "train_pairs_dropped_for_selection"})
    assert "were not screened" in (tmp_path / "export" / "README.md").read_text()
    # a training story the selection pairs judge is left out: "[MALE] sat down ." and "Tom sat down." share the key
    overlapping = datasets.Dataset.from_dict({"human": ["[MALE] sat down . he ate an apple .", "he sat . he ate 1 apples ."]})
    kept, dropped = train_union.drop_selection_stories(overlapping, train_union.load_selection_pairs(str(tmp_path / "selection"), True))
    assert dropped == 1 and kept["human"] == ["he sat . he ate 1 apples ."]
    assert all({"selection_pair_accuracy", "selection_accuracy", "pair_accuracy", "accuracy"} <= set(m) for m in results["history"])
    first_best = max(results["history"], key=lambda m: m["selection_pair_accuracy"])  # max keeps the earliest of ties
    assert results["best_validation"]["step"] == first_best["step"]
    assert "other held-out pairs" in (tmp_path / "export" / "README.md").read_text()
    plain = train_union.train(train_union.parse_args(common + ["--output-dir", str(tmp_path / "run-plain"), "--checkpointing-steps", "2"]))
    assert plain["selected_by"] == "accuracy" and "selection_pair_accuracy" not in plain["history"][0]
    by_pairs = train_union.train(train_union.parse_args(
        common + ["--output-dir", str(tmp_path / "run-pairs"), "--select-by", "pair_accuracy", "--export-dir", str(tmp_path / "export-pairs")]
    ))
    assert by_pairs["selected_by"] == "pair_accuracy"
    assert by_pairs["best_validation"] == max(by_pairs["history"], key=lambda m: m["pair_accuracy"])
    assert "best share of held-out validation pairs" in (tmp_path / "export-pairs" / "README.md").read_text()
    # resumed with a selection set: the earlier evaluations never measured it, so they cannot be the best
    resumed = train_union.train(train_union.parse_args(
        common + ["--output-dir", str(tmp_path / "run-resumed"), "--selection-pairs-dir", str(tmp_path / "selection"),
                  "--resume-from-checkpoint", str(tmp_path / "run-plain" / "step_2")]
    ))
    assert [m["step"] for m in resumed["history"]] == [1, 2, 3, 4] and resumed["best_validation"]["step"] in (3, 4)

    with pytest.raises(SystemExit):  # a missing folder is a usage error, before anything is written
        train_union.parse_args(common + ["--output-dir", str(tmp_path / "run-bad"), "--selection-pairs-dir", str(tmp_path / "none")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no saved DatasetDict"):
        train_union.load_selection_pairs(str(tmp_path / "empty"), delexicalize=True)
    datasets.DatasetDict({"train": selection}).save_to_disk(tmp_path / "no-validation")
    with pytest.raises(ValueError, match="needs a non-empty validation split"):
        train_union.load_selection_pairs(str(tmp_path / "no-validation"), delexicalize=True)
    # a folder that holds no usable pairs fails before the run's output folder is made
    with pytest.raises(ValueError, match="needs a non-empty validation split"):
        train_union.train(train_union.parse_args(
            common + ["--output-dir", str(tmp_path / "run-bad"), "--selection-pairs-dir", str(tmp_path / "no-validation")]))
    bad_pairs = [a if a != str(tmp_path / "pairs") else str(tmp_path / "empty") for a in common]
    with pytest.raises(FileNotFoundError, match="--pairs-dir .*no saved DatasetDict"):
        train_union.train(train_union.parse_args(bad_pairs + ["--output-dir", str(tmp_path / "run-bad")]))
    assert not (tmp_path / "run-bad").exists()


@pytest.mark.parametrize("start", ["encoder", "union-checkpoint"])
def test_training_max_length_beyond_the_encoder_is_a_clear_error(tmp_path, tokenizer, tiny_checkpoint, start):
    from storyeval_training.recipes import train_union

    encoder_dir = tmp_path / "encoder"
    BertModel(tiny_encoder_config()).save_pretrained(encoder_dir)  # 64 positions
    tokenizer.save_pretrained(encoder_dir)
    model_dir = encoder_dir if start == "encoder" else tiny_checkpoint
    run_dir = tmp_path / "run"
    args = ["--pairs-dir", str(tmp_path / "no-pairs"), "--model-name-or-path", str(model_dir), "--output-dir", str(run_dir)]
    # transformers' config validators raise huggingface_hub's strict-dataclass error, with the ValueError inside
    with pytest.raises(StrictDataclassClassValidationError, match="max_length 65 exceeds the 64 positions of the bert encoder"):
        train_union.train(train_union.parse_args(args + ["--max-length", "65"]))
    with pytest.raises(ValueError, match="--max-length 513 exceeds the 512 tokens the tokenizer"):
        train_union.train(train_union.parse_args(args + ["--max-length", "513"]))
    assert not run_dir.exists()


def run_cli(args, capsys):
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_round_trips_txt_jsonl_csv(tiny_checkpoint, tmp_path, capsys):
    txt = tmp_path / "s.txt"
    txt.write_text(f"{STORY}\nhe left .\n")
    code, out, err = run_cli(["score", str(txt), "--config", str(tiny_checkpoint), "--quiet"], capsys)
    assert code == 0 and len(out.splitlines()) == 2 and "2 stories, mean" in err
    expected = load_union_scorer(tiny_checkpoint).score([STORY, "he left ."])
    assert [float(x) for x in out.split()] == pytest.approx(expected, abs=1e-5)

    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(json.dumps({"id": 1, "story": STORY}) + "\n" + json.dumps({"id": 2, "story": "he left ."}) + "\n")
    code, _, _ = run_cli(["score", str(jsonl), "--config", str(tiny_checkpoint), "-o", str(tmp_path / "o.jsonl"), "--quiet"], capsys)
    records = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert code == 0 and [r["id"] for r in records] == [1, 2] and records[0]["score"] == pytest.approx(expected[0], abs=1e-5)

    table = tmp_path / "s.csv"
    with table.open("w", newline="") as handle:
        csv.writer(handle).writerows([["id", "text"], ["a", STORY], ["b", "he left ."]])
    code, _, _ = run_cli(["score", str(table), "--column", "text", "--config", str(tiny_checkpoint), "-o", str(tmp_path / "o.csv"), "--quiet"], capsys)
    rows = list(csv.DictReader((tmp_path / "o.csv").open()))
    assert code == 0 and [r["id"] for r in rows] == ["a", "b"] and float(rows[1]["score"]) == pytest.approx(expected[1], abs=1e-5)

    code, out, _ = run_cli(["score", str(txt), "--config", str(tiny_checkpoint), "--dtype", "bfloat16", "--quiet"], capsys)
    assert code == 0 and [float(x) for x in out.split()] == pytest.approx(expected, abs=0.02)
    with pytest.raises(SystemExit):
        cli.main(["score", str(txt), "--config", str(tiny_checkpoint), "--dtype", "int4", "--quiet"])
    assert "invalid choice: 'int4'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name, content, extra, message",
    [
        ("missing.txt", None, [], "input file not found"),
        ("s.txt", "a story .\n\nanother .\n", [], "s.txt:2: empty line"),
        ("s.txt", "a story .\n...\n", [], "s.txt:2: empty line or no letters"),
        ("s.jsonl", '{"story": "ok ."}\n{"story": ""}\n', [], "s.jsonl:2: 'story' is empty or has no letters"),
        ("s.csv", "story,note\nok .,x\n\"...\",y\n", [], "s.csv:3: 'story' is empty or has no letters"),
        ("s.csv", "story,note,story\nok .,x,fine .\n", [], "more than one column named 'story'"),
        ("s.jsonl", '{"story": "ok ."}\n{broken\n', [], "s.jsonl:2: not JSON"),
        ("s.jsonl", '{"text": "ok ."}\n', [], "string field 'story'"),
        ("s.csv", "id,text\n1,ok .\n", [], "no column 'story'"),
        ("s.pdf", "x", [], "unsupported input format"),
        ("s.parquet", "x", [], "for Parquet put the file in a folder and run `storyeval score-shards"),
        ("s.txt", "a story .\n", ["--config", "nonsense"], "unknown union config"),
    ],
)
def test_cli_bad_input_is_a_clear_error(tiny_checkpoint, tmp_path, capsys, name, content, extra, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    out_path = tmp_path / f"out{Path(name).suffix}"  # the output takes the input's format
    out_path.write_text("earlier results\n")
    # even allowed to replace it, a run that fails leaves the earlier output as it was
    code, _, err = run_cli(["score", str(path), "--config", str(tiny_checkpoint), "-o", str(out_path), "--overwrite", "--quiet", *extra], capsys)
    assert code == 1 and message in err and "Traceback" not in err
    assert out_path.read_text() == "earlier results\n" and not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize(
    "config, expected",
    [("roc", [0.9210, 0.3414, 0.0358]), ("wp", [0.7683, 0.4074, 0.5487])],
)
def test_bundled_checkpoint_scores_are_pinned(config, expected, pinned_stories):
    if not (checkpoints.HUB_CARDS / f"union-{config}" / "model.safetensors").is_file():
        pytest.skip(f"bundled union-{config} checkpoint not in this checkout")
    scores = evaluate.load(METRIC_DIR, config).compute(predictions=pinned_stories)["scores"]
    # the human-written order beats its shuffled and repetitive copies
    assert scores == pytest.approx(expected, abs=2e-3)
    # bfloat16 keeps the pinned scores to about .01 (BENCHMARKS.md measures it on 1,000 stories)
    fast = evaluate.load(METRIC_DIR, config).compute(predictions=pinned_stories, dtype="bfloat16")["scores"]
    assert fast == pytest.approx(expected, abs=0.02)


@pytest.mark.parametrize(
    "batches, processes, accumulation, epochs, max_steps, expected",
    [
        (1000, 1, 1, 1, None, 1000),
        # 2 processes make 500 optimizer steps each, and accelerate steps the scheduler once per process at each
        (1000, 2, 1, 1, None, 1000),
        (1001, 2, 2, 2, None, 2 * 251 * 2),  # 501 batches a process, 251 steps an epoch (the last accumulates one)
        (1000, 2, 1, 1, 300, 600),  # --max-train-steps counts optimizer steps per process
    ],
)
def test_the_learning_rate_schedule_ends_when_training_does(batches, processes, accumulation, epochs, max_steps, expected):
    from types import SimpleNamespace

    from storyeval_training.loop import schedule_lengths

    args = SimpleNamespace(gradient_accumulation_steps=accumulation, num_train_epochs=epochs, max_train_steps=max_steps, num_warmup_steps=10)
    assert schedule_lengths(args, batches, processes) == {"num_warmup_steps": 10 * processes, "num_training_steps": expected}


@pytest.mark.slow
def test_top_layer_training_leaves_the_rest_of_the_backbone_as_it_was(tmp_path, tokenizer, capsys):
    from storyeval_training.data import build_negatives
    from storyeval_training.recipes import train_union

    encoder_dir = tmp_path / "encoder"
    config = tiny_encoder_config()
    config.num_hidden_layers = 3
    BertModel(config).save_pretrained(encoder_dir)
    tokenizer.save_pretrained(encoder_dir)
    rows = {"id": [f"s{i}" for i in range(8)], "context": ["he sat ."] * 8,
            "human": [f"he sat . he ate {i} apples ." for i in range(8)],
            "negative": [f"he sat . he ate ate {i} apples ." for i in range(8)],
            "original": [f"he sat . he ate {i} apples ." for i in range(8)], "techniques": [["repetition"]] * 8}
    pairs = datasets.Dataset.from_dict(rows, features=build_negatives.PAIR_FEATURES)
    datasets.DatasetDict({"train": pairs, "validation": pairs.select(range(2))}).save_to_disk(tmp_path / "pairs")
    common = ["--pairs-dir", str(tmp_path / "pairs"), "--model-name-or-path", str(encoder_dir), "--output-dir", str(tmp_path / "run"),
              "--per-device-train-batch-size", "4", "--max-length", "32", "--train-top-layers", "1", "--learning-rate", "1e-2",
              "--eval-steps", "2", "--checkpointing-steps", "2", "--recon-weight", "0"]
    # 'latest' with no state in the output folder starts afresh
    train_union.train(train_union.parse_args(common + ["--max-train-steps", "2", "--resume-from-checkpoint", "latest"]))
    before = UnionModel.from_encoder(str(encoder_dir), max_length=32).state_dict()
    after = UnionModel.from_pretrained(tmp_path / "run" / "best").state_dict()
    # the heads start random, so only the encoder's weights can be compared with the backbone's
    changed = {name for name in before if name.startswith("encoder.") and not torch.equal(before[name], after[name])}
    assert changed and all(name.startswith("encoder.encoder.layer.2.") for name in changed)
    assert UnionModel.from_pretrained(tmp_path / "run" / "best").config.trained_top_layers == 1
    # the export ships only the trained layer and the classifier, on top of the backbone it names
    train_union.export(tmp_path / "run" / "best", tmp_path / "export", {"args": {}}, write_card=lambda *a: None,
                       base_model=str(encoder_dir))
    from safetensors import safe_open

    with safe_open(str(tmp_path / "export" / "model.safetensors"), "pt") as saved:
        assert all(name.startswith(("encoder.encoder.layer.2.", "classifier.")) for name in saved.keys())
    ids = torch.randint(5, 1000, (1, 9))
    assert torch.allclose(UnionModel.from_pretrained(tmp_path / "export")(ids).logits,
                          UnionModel.from_pretrained(tmp_path / "run" / "best").eval()(ids).logits, atol=2e-3)
    # a state's best weights export with a card: while the run goes on, from its final state, or after it ended
    from storyeval_training.export import export_state

    finished = (tmp_path / "run" / "all_results.json").read_text()
    (tmp_path / "run" / "all_results.json").unlink()  # as if the run were still going
    export_state.main(["--state", str(tmp_path / "run" / "step_2"), "--export-dir", str(tmp_path / "from-state"), "--"] + common
                      + ["--max-train-steps", "4"])
    card = (tmp_path / "from-state" / "README.md").read_text()
    assert "Exported from the run's resumable state at step 2 of 4; the selected step is the best evaluation up to that state" in card
    # the run ended two steps after its last saved state, with no better evaluation: the card says so, with the whole history
    ended = json.loads(finished)
    ended.update(completed_steps=4, history=ended["history"] + [{**ended["history"][-1], "accuracy": -1.0, "step": 4}])
    (tmp_path / "run" / "all_results.json").write_text(json.dumps(ended))
    export_state.main(["--state", str(tmp_path / "run" / "step_2"), "--export-dir", str(tmp_path / "ended"), "--"] + common
                      + ["--max-train-steps", "4"])
    assert "from the run's last saved state, step 2, after the run ended at step 4" in (tmp_path / "ended" / "README.md").read_text()
    assert json.loads((tmp_path / "ended" / "training_results.json").read_text())["completed_steps"] == 4
    (tmp_path / "run" / "all_results.json").write_text(finished)
    export_state.main(["--state", str(tmp_path / "run" / "step_2"), "--export-dir", str(tmp_path / "final"), "--"] + common
                      + ["--max-train-steps", "2"])
    assert "Exported from the run's final state, step 2; the selected step is the best evaluation of the whole run" in \
        (tmp_path / "final" / "README.md").read_text()
    assert UnionModel.from_pretrained(tmp_path / "from-state").config.base_model == str(encoder_dir)
    # an ended run's own folder exports its selection, with the run's record
    export_state.main(["--state", str(tmp_path / "run"), "--export-dir", str(tmp_path / "whole-run"), "--"] + common)
    exported = json.loads((tmp_path / "whole-run" / "training_results.json").read_text())
    assert exported["best_validation"] == json.loads(finished)["best_validation"] and exported["completed_steps"] == 2
    for bad, message in ((["--state", str(tmp_path), "--export-dir", str(tmp_path / "x"), "--"] + common, "expected a step_N folder"),
                         (["--state", str(tmp_path / "run" / "step_2"), "--export-dir", str(tmp_path / "from-state"), "--"] + common, "exists"),
                         (["--state", str(tmp_path / "run" / "step_2"), "--export-dir", str(tmp_path / "x")], "the run's own arguments")):
        with pytest.raises(SystemExit):
            export_state.main(bad)
        assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    # 'latest' picks the newest complete state; a half-written one (still under its temporary name) is ignored
    (tmp_path / "run" / "step_9.partial").mkdir()
    args = train_union.parse_args(common + ["--max-train-steps", "3", "--resume-from-checkpoint", "latest"])
    assert Path(args.resume_from_checkpoint).name == "step_2"
    assert train_union.train(args)["completed_steps"] == 3


def test_top_layers_beyond_the_encoder_are_refused():
    model = UnionModel(UnionConfig(encoder=tiny_encoder_config(vocab_size=50).to_dict(), max_length=64))
    with pytest.raises(ValueError, match="between 1 and the encoder's 1 layers"):
        model.train_top_layers_only(2)


@pytest.mark.slow
def test_a_run_stopped_by_its_time_budget_saves_a_state_to_resume_from(tmp_path, tokenizer):
    from storyeval_training.recipes import train_union

    encoder_dir = save_tiny_training_inputs(tmp_path, tokenizer, 8)
    common = ["--pairs-dir", str(tmp_path / "pairs"), "--model-name-or-path", str(encoder_dir), "--max-train-steps", "4",
              "--per-device-train-batch-size", "2", "--max-length", "32", "--eval-steps", "2", "--checkpointing-steps", "100",
              "--output-dir", str(tmp_path / "run")]
    stopped = train_union.train(train_union.parse_args(common + ["--time-budget-minutes", "1e-9"]))
    assert stopped["stopped_by_time_budget"] and stopped["completed_steps"] == 1
    assert (tmp_path / "run" / "step_1" / "trainer_state.json").is_file()  # not a checkpointing step: saved because it stopped
    resumed = train_union.train(train_union.parse_args(common + ["--resume-from-checkpoint", "latest", "--checkpointing-steps", "1",
                                                                 "--keep-last-states", "1"]))
    assert resumed["completed_steps"] == 4 and not resumed["stopped_by_time_budget"]
    assert [folder.name for folder in (tmp_path / "run").glob("step_*")] == ["step_4"]  # the older states were deleted


@pytest.mark.slow
def test_a_run_stopped_at_a_step_continues_as_the_whole_run(tmp_path, tokenizer):
    from storyeval_training.recipes import train_union

    encoder_dir = save_tiny_training_inputs(tmp_path, tokenizer, 8)

    def run(folder, *extra):
        return train_union.train(train_union.parse_args(
            ["--pairs-dir", str(tmp_path / "pairs"), "--model-name-or-path", str(encoder_dir), "--max-train-steps", "4",
             "--per-device-train-batch-size", "2", "--max-length", "32", "--eval-steps", "2", "--checkpointing-steps", "100",
             "--output-dir", str(tmp_path / folder), *extra]))

    whole = run("whole")
    stopped = run("parts", "--stop-after-steps", "2")
    assert stopped["stopped_by_step_limit"] and not stopped["stopped_by_time_budget"] and stopped["completed_steps"] == 2
    assert (tmp_path / "parts" / "step_2" / "trainer_state.json").is_file()  # not a checkpointing step: saved because it stopped
    again = run("parts", "--stop-after-steps", "2", "--resume-from-checkpoint", "latest")
    assert again["completed_steps"] == 2 and again["stopped_by_step_limit"]  # already there: nothing trained twice
    resumed = run("parts", "--resume-from-checkpoint", "latest")
    assert resumed["completed_steps"] == 4 and not resumed["stopped_by_step_limit"]
    # the schedule was the 4-step run's throughout, so stopping and resuming changed nothing
    ignore = ("minutes",)
    assert [{k: v for k, v in h.items() if k not in ignore} for h in resumed["history"]] == \
        [{k: v for k, v in h.items() if k not in ignore} for h in whole["history"]]
