"""Plot-coherence classifier: AF data reading, leakage rule, training smoke run, evaluate module."""
import csv
import json
from pathlib import Path

import datasets
import evaluate
import pytest
import torch
from conftest import save_tiny_checkpoint
from transformers import AutoTokenizer, BertConfig, BertModel

from storyeval.checkpoints import resolution as checkpoints
from storyeval.cli import hub
from storyeval.cli import main as cli
from storyeval.models import UnionConfig, UnionModel
from storyeval.scoring.sequence import load_plot_coherence_scorer
from storyeval_training.data.builders.common import InputFormatError
from storyeval_training.data.builders.roc import read_af_tsv
from storyeval_training.export.model_card import write_plot_coherence_card
from storyeval_training.recipes import train_plot_coherence

METRIC_DIR = str(Path(__file__).resolve().parent.parent / "metrics" / "plot_coherence")
JUDGED = "a week after the little girl 's dog died , she had a new puppy ."


def write_af_tsv(path, groups):
    lines, index = [], 0
    for human, negatives in groups:
        for label, story in [(1, human)] + [(0, n) for n in negatives]:
            lines.append(f"{index}\t{label}\t{index}\t{story}")
            index += 1
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def data_root(tmp_path):
    return tiny_af_data_root(tmp_path)


def tiny_af_data_root(tmp_path):
    """A data folder with a tiny AF file and one human-judged story."""
    root = tmp_path / "data"
    (root / "roc").mkdir(parents=True)
    (root / "human" / "plot_amt_roc").mkdir(parents=True)
    with (root / "human" / "plot_amt_roc" / "amt_roc.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([["WorkerId", "Input.text1", "Answer.text1"], ["w", f"{JUDGED} </s> she loved it . </s>", "4"]])
    groups = [(f"bob sat down {i} . he ate lunch . he went home .", [f"bob sat down {i} . he ate ate ate . home home ."] * 3)
              for i in range(12)]
    groups.append((f"{JUDGED} she loved it .", ["she hated it . " * 3] * 3))  # leaks: must be dropped
    write_af_tsv(root / "roc" / "af_manplts_valid.tsv", groups)
    write_af_tsv(root / "roc" / "af_manplts_test.tsv", groups[:2])
    return root


def test_read_af_tsv_groups_each_human_story_with_its_negatives(tmp_path):
    path = tmp_path / "af.tsv"
    write_af_tsv(path, [("a b . c .", ["x .", "y .", "z ."]), ("d e .", ["w </s> v ."])])
    assert read_af_tsv(path) == [("a b . c .", ["x .", "y .", "z ."]), ("d e .", ["w v ."])]
    path.write_text("0\t0\t0\tnegative first\n")
    with pytest.raises(InputFormatError, match="af.tsv:1: a negative before any human story"):
        read_af_tsv(path)
    path.write_text("0\t1\tno story column\n")
    with pytest.raises(InputFormatError, match="af.tsv:1: expected"):
        read_af_tsv(path)


def test_build_pairs_drops_leaked_groups_and_never_pairs_a_story_with_itself(data_root):
    groups = read_af_tsv(data_root / "roc" / "af_manplts_valid.tsv")
    groups.append(("same story .", ["same story .", "other story ."]))
    pairs, dropped = train_plot_coherence.build_pairs(groups, data_root / "human")
    assert dropped == 1
    rows = [row for split in pairs.values() for row in split]
    assert not any(JUDGED in row["human"] for row in rows)
    assert all(row["human"] != row["negative"] for row in rows)
    assert len(rows) == 12 * 3 + 1
    train_humans = set(pairs["train"]["human"])
    assert not train_humans & set(pairs["validation"]["human"])  # split by group


def test_pairs_only_writes_the_pairs_and_trains_nothing(data_root, tmp_path):
    results = train_plot_coherence.train(["--data-dir", str(data_root), "--output-dir", str(tmp_path / "run"), "--pairs-only"])
    saved = datasets.load_from_disk(str(tmp_path / "run" / "pairs"))
    assert results["leakage_dropped_groups"] == 1 and results["pairs"] == dict(saved.num_rows)
    assert sum(saved.num_rows.values()) == (12 + 2) * 3  # both released files, the leaked group dropped
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["pairs"]  # no model, no results file


@pytest.mark.parametrize("bad", [["--per-device-train-batch-size", "0"], ["--eval-steps", "0"], ["--model-name-or-path", "/nonexistent/model"],
                                 ["--max-length", "1000"]])
def test_bad_training_options_fail_before_the_pairs_are_written(data_root, tmp_path, bad):
    with pytest.raises((SystemExit, OSError, ValueError)):
        train_plot_coherence.train(["--data-dir", str(data_root), "--output-dir", str(tmp_path / "run"), *bad])
    assert not (tmp_path / "run").exists()


def test_paper_negatives_are_roc_only():
    with pytest.raises(SystemExit):
        train_plot_coherence.parse_args(["--dataset", "wp", "--output-dir", "x"])


@pytest.mark.slow
def test_training_smoke_run_exports_a_plot_coherence_checkpoint(data_root, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(checkpoints.backbone_path())
    encoder_dir = tmp_path / "encoder"
    BertModel(BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=64)).save_pretrained(encoder_dir)
    tokenizer.save_pretrained(encoder_dir)
    export = tmp_path / "export"
    results = train_plot_coherence.train([
        "--data-dir", str(data_root), "--model-name-or-path", str(encoder_dir), "--output-dir", str(tmp_path / "run"),
        "--max-train-steps", "2", "--eval-steps", "1", "--max-length", "32", "--export-dir", str(export),
    ])
    assert results["completed_steps"] == 2 and results["args"]["leakage_dropped_groups"] == 1
    model = UnionModel.from_pretrained(export)
    assert model.config.metric == "plot_coherence" and not model.config.delexicalize
    assert not model.config.has_reconstruction_head and model.dtype == torch.float16
    card = (export / "README.md").read_text()
    assert "# plot-coherence-roc" in card and "AF_ManPlts" in card
    assert hub.checkpoint_metric(export) == "plot_coherence"

    # the evaluate module scores with it; names are kept, as in the paper's data
    scorer = load_plot_coherence_scorer(export)
    assert scorer.windows("Bob sat.") == scorer.windows("bob sat .")
    metric = evaluate.load(METRIC_DIR, str(export))
    scores = metric.compute(predictions=["bob sat down . he ate lunch .", "he ate ate ate ."])["scores"]
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)


def tiny_encoder_dir(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(checkpoints.backbone_path())
    folder = tmp_path / "encoder"
    BertModel(BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_generated(folder, humans, negatives_per_human=3):
    """A folder like storyeval-adversarial-filter's output (a Dataset of group / id / story / label rows)."""
    rows = {"group": [], "id": [], "story": [], "label": []}
    for group, human in enumerate(humans):
        for label, story in [(1, human)] + [(0, f"{human} again again {k} .") for k in range(negatives_per_human)]:
            for name, value in (("group", group), ("id", f"s{group}"), ("story", story), ("label", label)):
                rows[name].append(value)
    datasets.Dataset.from_dict(rows).save_to_disk(str(folder))


def test_read_generated_reads_every_split_of_a_dataset_dict(tmp_path):
    """generate-negatives and adversarial-filter write a DatasetDict for a DatasetDict input; group ids restart per split."""
    write_generated(tmp_path / "train", ["a b .", "c d ."])
    write_generated(tmp_path / "validation", ["e f ."], negatives_per_human=2)
    datasets.DatasetDict({name: datasets.load_from_disk(str(tmp_path / name)) for name in ("train", "validation")}).save_to_disk(str(tmp_path / "af"))
    assert train_plot_coherence.read_generated(tmp_path / "af") == [
        ("a b .", [f"a b . again again {k} ." for k in range(3)]),
        ("c d .", [f"c d . again again {k} ." for k in range(3)]),
        ("e f .", [f"e f . again again {k} ." for k in range(2)]),
    ]
    assert train_plot_coherence.read_generated(tmp_path / "train") == train_plot_coherence.read_generated(tmp_path / "af")[:2]


def test_names_delexicalized_follows_the_training_text():
    def pairs(human, negative):
        return datasets.DatasetDict({"train": datasets.Dataset.from_dict({"human": [human], "negative": [negative]})})

    assert not train_plot_coherence.names_delexicalized(pairs("ken sat down .", "ken sat sat ."))  # the released data
    assert train_plot_coherence.names_delexicalized(pairs("[MALE] sat down .", "[MALE] sat sat ."))  # the builders' stories


@pytest.mark.slow
def test_own_negatives_with_placeholders_train_a_checkpoint_that_delexicalizes(data_root, tmp_path):
    """The builders replace names, so our own negatives carry [MALE]: scoring must replace names too."""
    write_generated(tmp_path / "af", [f"[MALE] sat down {i} . he ate lunch ." for i in range(12)])
    export = tmp_path / "export"
    results = train_plot_coherence.train([
        "--negatives", "generated", "--generated-dir", str(tmp_path / "af"), "--data-dir", str(data_root),
        "--model-name-or-path", str(tiny_encoder_dir(tmp_path)), "--output-dir", str(tmp_path / "run"),
        "--max-train-steps", "1", "--eval-steps", "1", "--max-length", "32", "--export-dir", str(export),
    ])
    assert results["args"]["delexicalize"] and UnionModel.from_pretrained(export).config.delexicalize
    assert "names are replaced by `[MALE]`" in (export / "README.md").read_text()
    scorer = load_plot_coherence_scorer(export)
    assert scorer.windows("Bob sat down.") == scorer.windows("[MALE] sat down .")


def test_card_of_a_checkpoint_trained_on_placeholders_but_keeping_names_says_so(tmp_path):
    """Own-negatives runs before the fix: trained on [MALE], scored with names."""
    results = {"args": {"negatives": "generated", "model_name_or_path": "m", "per_device_train_batch_size": 8, "learning_rate": 2e-5,
                        "max_length": 128, "num_train_epochs": 1, "seed": 42}, "completed_steps": 1, "train_pairs": 2, "training_minutes": 1}
    write_plot_coherence_card(tmp_path, results)
    card = (tmp_path / "README.md").read_text()
    assert "names are kept when scoring, but the stories it was trained on had placeholders" in card
    assert "leakage_dropped_stories" in card  # where the builders' leakage count is


def test_wp_card_names_its_corpus(tmp_path):
    results = {"args": {"dataset": "wp", "negatives": "generated", "model_name_or_path": "m", "per_device_train_batch_size": 8,
                        "learning_rate": 2e-5, "max_length": 512, "num_train_epochs": 1, "seed": 42, "delexicalize": True},
               "completed_steps": 1, "train_pairs": 2, "training_minutes": 1}
    write_plot_coherence_card(tmp_path, results)
    card = (tmp_path / "README.md").read_text()
    assert "# plot-coherence-wp" in card and "Positives: human-written WritingPrompts stories" in card and "ROC stories" not in card
    assert "The training stories carry no prompt" in card and "scores are averaged" in card


def test_card_states_the_window_aggregation_chosen_for_the_checkpoint(tmp_path):
    from storyeval_training.export.window_aggregation import write_choice

    UnionModel(UnionConfig(encoder=BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                              max_position_embeddings=64).to_dict(), metric="plot_coherence", max_length=64)).save_pretrained(tmp_path)
    results = {"args": {"dataset": "wp", "negatives": "generated", "model_name_or_path": "m", "per_device_train_batch_size": 8,
                        "learning_rate": 2e-5, "max_length": 512, "num_train_epochs": 1, "seed": 42, "delexicalize": True},
               "completed_steps": 1, "train_pairs": 2, "training_minutes": 1}
    (tmp_path / "training_results.json").write_text(json.dumps(results))
    write_plot_coherence_card(tmp_path, results)
    assert "scores are averaged" in (tmp_path / "README.md").read_text()
    write_choice(str(tmp_path), "min")  # the choice re-renders the card
    card = (tmp_path / "README.md").read_text()
    assert "the story's\n  score is the lowest window's" in card and "scores are averaged" not in card


@pytest.mark.slow
def test_training_from_a_union_checkpoint_exports_plot_coherence_settings(data_root, tmp_path):
    """UNION weights as the starting point: the export must not keep UNION's
    name placeholders, window or reconstruction head, or scoring would differ from training."""
    union_dir = tmp_path / "union"
    UnionModel(UnionConfig(encoder=BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                              max_position_embeddings=64).to_dict(), max_length=64, window_stride=32)).save_pretrained(union_dir)
    AutoTokenizer.from_pretrained(checkpoints.backbone_path()).save_pretrained(union_dir)
    assert UnionModel.from_pretrained(union_dir).config.delexicalize  # a UNION checkpoint to start from
    export = tmp_path / "export"
    assert train_plot_coherence.main([
        "--data-dir", str(data_root), "--model-name-or-path", str(union_dir), "--output-dir", str(tmp_path / "run"),
        "--max-train-steps", "1", "--eval-steps", "1", "--max-length", "32", "--export-dir", str(export),
    ]) is None  # the console script's exit status: anything else exits 1
    config = UnionModel.from_pretrained(export).config
    assert (config.metric, config.delexicalize, config.has_reconstruction_head) == ("plot_coherence", False, False)
    assert (config.max_length, config.window_stride) == (32, 16)


@pytest.fixture
def tiny_checkpoint(tmp_path):
    """A random 1-layer plot-coherence checkpoint with a 16-token window."""
    return save_tiny_checkpoint(tmp_path / "tiny", metric="plot_coherence", delexicalize=False)


def test_metric_rejects_bad_input_and_unknown_configs(tiny_checkpoint):
    with pytest.raises(ValueError, match="unknown plot_coherence config 'nope'"):
        evaluate.load(METRIC_DIR, "nope")
    metric = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    with pytest.raises(ValueError, match="predictions is empty: no stories to score"):
        metric.compute(predictions=[])
    with pytest.raises(ValueError, match="empty"):
        metric.compute(predictions=["fine .", "  "])
    with pytest.raises(TypeError):
        metric.compute(predictions=["fine .", None])
    long_story = "bob sat down and ate a big lunch . " * 20  # far beyond the 16-token window: scored in windows
    assert len(load_plot_coherence_scorer(tiny_checkpoint).windows(long_story)) > 5
    assert 0.0 <= metric.compute(predictions=[long_story])["scores"][0] <= 1.0


def test_cli_scores_a_file_with_a_plot_coherence_checkpoint(tiny_checkpoint, tmp_path, capsys):
    stories = tmp_path / "stories.txt"
    stories.write_text("bob sat down . he ate lunch .\nhe ate ate ate .\n")
    assert cli.main(["score", str(stories), "--metric", "plot_coherence", "--config", str(tiny_checkpoint), "--quiet"]) == 0
    scores = [float(line) for line in capsys.readouterr().out.split()]
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)
    assert scores == pytest.approx(load_plot_coherence_scorer(tiny_checkpoint).score(["bob sat down . he ate lunch .", "he ate ate ate ."]), abs=1e-4)


def test_bundled_roc_checkpoint_scores_are_pinned(pinned_stories):
    if not (checkpoints.HUB_CARDS / "plot-coherence-roc" / "model.safetensors").is_file():
        pytest.skip("bundled plot-coherence-roc checkpoint not in this checkout")
    scores = evaluate.load(METRIC_DIR, "roc").compute(predictions=pinned_stories)["scores"]
    # the plausible order beats the shuffled copy, which beats the repetitive one
    assert scores == pytest.approx([0.8832, 0.4032, 0.1298], abs=2e-3)
