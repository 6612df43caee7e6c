"""Model cards render from card_templates/ through huggingface_hub, and cite from one place."""
import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import DatasetCard, ModelCard

from storyeval.models import citations
from storyeval_training.export import model_card

CHECKOUT = Path(__file__).resolve().parent.parent
BUNDLED = CHECKOUT / "hub_cards"


def _rerender(name: str, tmp_path: Path) -> Path:
    """A copy of a bundled card's folder (without weights), its card rendered again from its own records."""
    folder = tmp_path / name
    folder.mkdir()
    for path in (BUNDLED / name).glob("*.json"):
        shutil.copy(path, folder)
    results = json.loads((folder / "training_results.json").read_text())
    if name == "continuation-quality":
        # the card's figures: the benchmark run its Evaluation section names
        run = json.loads((CHECKOUT / "benchmarks" / "results" / "continuation_quality.json").read_text())
        model_card.write_continuation_card(folder, results, {**run["full"], "command": run["command"],
                                                          "cross_validated": run.get("cross_validated")})
    elif name.startswith("union"):
        model_card.write_union_card(folder, results)
    else:
        model_card.write_plot_coherence_card(folder, results)
    return folder / "README.md"


@pytest.mark.parametrize("name", ["union-roc", "union-wp", "union-wp-base", "plot-coherence-roc", "continuation-quality"])
def test_bundled_cards_are_what_the_templates_render(name, tmp_path):
    assert _rerender(name, tmp_path).read_text() == (BUNDLED / name / "README.md").read_text()


def test_card_figures_are_the_evaluation_files_figures():
    for name in ("union-roc", "union-wp"):
        evaluation = json.loads((BUNDLED / name / "evaluation.json").read_text())["correlations"]
        results = ModelCard.load(BUNDLED / name / "README.md").data.eval_results
        assert {(r.dataset_type, r.metric_type): r.metric_value for r in results} == {
            (f"union-human-{set_name}", coefficient): round(c[coefficient], 4)
            for set_name, c in evaluation.items() for coefficient in ("pearson", "spearman", "kendall")}


def test_cards_and_metric_modules_cite_from_one_place():
    cards = {"union-roc": citations.UNION, "union-wp": citations.UNION, "plot-coherence-roc": citations.PLOT_COHERENCE,
             "continuation-quality": citations.CONTINUATION_QUALITY}
    for name, citation in cards.items():
        assert f"```bibtex\n{citation}```\n" in (BUNDLED / name / "README.md").read_text()
    for metric, constant in (("union", "UNION"), ("plot_coherence", "PLOT_COHERENCE"), ("continuation_quality", "CONTINUATION_QUALITY")):
        source = (CHECKOUT / "metrics" / metric / f"{metric}.py").read_text()
        assert f"from storyeval.models.citations import {constant} as _CITATION" in source
    assert "9157--9166" in citations.UNION and "Guan, Jian and Huang, Minlie" in citations.UNION


def test_a_card_without_figures_says_how_to_measure_them(tmp_path):
    results = json.loads((BUNDLED / "union-roc-base" / "training_results.json").read_text())  # trained by train_union
    model_card.write_union_card(tmp_path, results)
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.eval_results is None and "model-index" not in card.content
    assert "Not yet measured: run `python -m benchmarks.agreement.union_correlation`" in card.text
    assert "See `config.json` for the encoder's size" in card.text  # no weights in this folder


def test_update_evaluation_writes_the_figures_and_rerenders(tmp_path):
    folder = tmp_path / "union-roc"
    folder.mkdir()
    shutil.copy(BUNDLED / "union-roc" / "training_results.json", folder)
    correlations = {"roc": {"pearson": 0.1, "spearman": 0.2, "kendall": 0.3}}
    model_card.update_evaluation(folder, "union", "python -m benchmarks.agreement.union_correlation", correlations)
    assert json.loads((folder / "evaluation.json").read_text())["correlations"] == correlations
    card = (folder / "README.md").read_text()
    assert "| roc | 0.1000 | 0.2000 | 0.3000 |" in card and "command: `python -m benchmarks.agreement.union_correlation`" in card


def test_update_evaluation_refuses_bad_input_before_writing(tmp_path):
    with pytest.raises(KeyError, match="choose from union, plot_coherence"):
        model_card.update_evaluation(tmp_path, "continuation_quality", "cmd", {})
    with pytest.raises(FileNotFoundError, match="no checkpoint folder"):
        model_card.update_evaluation(tmp_path / "missing", "union", "cmd", {})
    assert list(tmp_path.iterdir()) == []


def test_negatives_card_is_a_dataset_card_with_its_counts(tmp_path):
    stats = {"train": {"pairs": 1200, "per_technique": {"negation": 700, "reordering": 600}, "per_number_of_techniques": {"1": 1000, "2": 200}},
             "environment": {"cpu": "x"}}
    model_card.write_negatives_card(tmp_path, "wp", 7, stats)
    card = DatasetCard.load(tmp_path / "README.md")
    assert card.data.pretty_name == "UNION negative samples (WritingPrompts)" and card.data.size_categories == ["1K<n<10K"]
    assert "| train | 1,200 | negation 700, reordering 600 | 1: 1,000, 2: 200 |" in card.text
    assert "--dataset wp --seed 7" in card.text and citations.UNION in card.text


def test_a_continuation_card_names_its_learned_encoder_and_its_tier(tmp_path):
    from test_continuation_encoder import save_tiny_encoder
    from transformers import AutoTokenizer

    from storyeval.checkpoints.resolution import backbone_path
    from storyeval_training.export.model_card import write_continuation_card

    results = {"args": {"input_mode": "sim+cont", "cloze_split": "test", "ranking_weight": 1.0, "lm_order": 4, "learning_rate": 0.001,
                        "epochs": 2, "batch_size": 32, "encoder": "run-export"},
               "features": ["length", "encoder_logit"], "train_pairs": 1, "validation_pairs": 1, "test_pairs": 1, "cloze_pairs": 2,
               "best_validation": {"epoch": 1, "validation_mean_spearman": 0.3}, "training_minutes": 1.0}
    encoder = save_tiny_encoder(tmp_path / "head" / "encoder", AutoTokenizer.from_pretrained(backbone_path()))
    (encoder / "training_results.json").write_text(json.dumps({
        "args": {"model_name_or_path": "all-MiniLM-L6-v2"}, "selected_by": "pair_accuracy_generated", "completed_steps": 20,
        "training_minutes": 2.5, "best_validation": {"pair_accuracy_generated": 0.75}, "train_pairs_by_kind": {"true": 3, "generated": 2}}))
    write_continuation_card(tmp_path / "head", results)
    card = (tmp_path / "head" / "README.md").read_text()
    assert card.count("# continuation-quality\n") == 1 and "base_model: sentence-transformers/all-MiniLM-L6-v2" in card
    assert "a pool of generated: 2\n" in card and "best `pair_accuracy_generated`" in card and "(0.750;" in card


def test_a_cards_gaming_line_reads_every_gaming_run(tmp_path):
    """A checkpoint measured in a later gaming run than the first (plot-coherence-wp-base) gets its measured line."""
    from storyeval_training.export import model_card

    assert "plot_coherence:wp-base" in model_card.gaming_results() and "union:roc" in model_card.gaming_results()
    assert "one story for every prompt (96)" in model_card._gaming_text("plot-coherence-wp-base")
    assert model_card.gaming_results(tmp_path) == {}


def test_a_distilled_students_card_names_its_teacher_data_and_selection(tmp_path):
    results = {
        "args": {"student": "hub_cards/union-roc", "loss": "mse", "hard_label_weight": 0.0, "per_device_train_batch_size": 32,
                 "learning_rate": 5e-5, "num_train_epochs": 2, "seed": 42},
        "teacher": {"teacher": "union-roc-base", "settings": "union-roc-base_fp32", "weights_sha256": "ab" * 32, "teacher_commit": "97502dc"},
        "transfer_stories": 20000, "heldout_stories": 989, "selection_pairs": 888, "completed_steps": 1250, "training_minutes": 30.0,
        "best_validation": {"heldout_spearman": 0.9, "selection_pair_accuracy": 0.8, "step": 1000},
    }
    (tmp_path / "evaluation.json").write_text(json.dumps({"command": "python -m benchmarks.agreement.union_correlation",
                                                          "correlations": {"union_roc": {"pearson": 0.3, "spearman": 0.4, "kendall": 0.3}}}))
    model_card.write_union_card(tmp_path, results)
    card = ModelCard.load(tmp_path / "README.md")
    assert "A fast student of `union-roc-base`" in card.text and "first 20,000 training stories" in card.text
    assert "ROCStories stories, their UNION negatives" in card.text
    assert "`hub_cards/union-roc` when it trained" in card.text  # a record from before the start was identified
    (tmp_path / "start").mkdir()
    model_card.write_union_card(tmp_path / "start", {**results, "start": {"weights_sha256": "cd" * 32, "trained_at": "4cf89ac"}})
    assert "weights SHA-256 `cdcdcdcdcdcd…`, trained at 4cf89ac" in (tmp_path / "start" / "README.md").read_text()
    # a student taught on the plot pairs' stories alone (transfer build --pairs plot=...) says so
    (tmp_path / "plot").mkdir()
    model_card.write_union_card(tmp_path / "plot", {**results, "transfer_sources": {"pairs-plot": 20000}})
    plot_card = (tmp_path / "plot" / "README.md").read_text()
    assert "AF_ManPlts pairs on the training side" in plot_card and "their UNION negatives" not in plot_card
    # one taught on two transfer files of pairs names both, with their counts
    (tmp_path / "two").mkdir()
    model_card.write_union_card(tmp_path / "two", {**results, "transfer_stories": 30845,
                                                   "transfer_sources": {"pairs-plot": 21845, "pairs-generated": 9000}})
    two_card = (tmp_path / "two" / "README.md").read_text()
    assert "Transfer stories: 30,845 training stories of 2 files" in two_card
    assert "(21,845 stories from the plot paper's AF_ManPlts pairs" in two_card and "; 9,000 stories from pairs of this project's own CPU generator" in two_card
    assert "their UNION negatives" not in two_card and "the first 20,000" not in two_card
    assert "0.9000" in card.text and "| union_roc | 0.3000 | 0.4000 | 0.3000 |" in card.text and "distillation" in card.data.tags


def test_a_wp_students_card_is_named_after_its_teacher_and_selects_on_the_worst_kind(tmp_path):
    """A student of union-wp-base is union-wp: its card says WritingPrompts and the kinds it was selected on."""
    results = {
        "args": {"student": "hub_cards/union-wp", "loss": "mse", "hard_label_weight": 0.0, "per_device_train_batch_size": 32,
                 "learning_rate": 5e-5, "num_train_epochs": 2, "seed": 42,
                 "selection_pairs": ["origin=kinds/origin", "damage=kinds/damage", "strength=kinds/strength"]},
        "teacher": {"teacher": "union-wp-base", "settings": "union-wp-base_fp32", "weights_sha256": "ab" * 32, "teacher_commit": "cfb6e8a"},
        "transfer_stories": 5000, "heldout_stories": 998, "selection_pairs": 600, "completed_steps": 314, "training_minutes": 50.0,
        "best_validation": {"heldout_spearman": 0.7, "selection_pair_accuracy": 0.71, "step": 250},
    }
    model_card.write_union_card(tmp_path, results)
    card = ModelCard.load(tmp_path / "README.md")
    assert card.text.startswith("# union-wp\n") and 'evaluate.load("union", "wp")' in card.text
    assert card.data.datasets == ["writingprompts"] and "WritingPrompts pair kinds" in card.text
    assert "the worst of 3 kinds of held-out pairs (600 pairs in all;\n  0.7100), at step 250." in card.text
    assert "ROC-length" not in card.text and "less their least-squares trend" not in card.text
    results["args"]["length_neutral_targets"], results["length_slope"] = True, 2.0284
    model_card.write_union_card(tmp_path, results)
    assert "trend in log(words) over the training stories (slope\n  2.028)" in (tmp_path / "README.md").read_text()
    results["teacher"]["teacher"] = "export"  # a teacher from a run folder: its name says no config
    with pytest.raises(ValueError, match="cannot tell the student's config"):
        model_card.write_union_card(tmp_path, results)


def test_a_ranker_card_names_every_kind_and_selects_on_the_worst(tmp_path):
    results = json.loads((BUNDLED / "union-wp-base" / "training_results.json").read_text())
    shutil.copy(BUNDLED / "union-wp-base" / "config.json", tmp_path)
    model_card.write_union_card(tmp_path, results)
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.base_model.endswith("/all-mpnet-base-v2") and card.data.datasets == ["writingprompts"]
    assert 'evaluate.load("union", "wp-base")' in card.text and "Bradley-Terry" in card.text
    for kind in ("origin", "damage", "strength"):
        assert f"**{kind}**: " in card.text
    assert "the step whose worst kind is best" in card.text and "0.7625 at step 375" in card.text


def test_a_wp_cards_kinds_line_says_where_it_holds_and_what_to_use_instead():
    assert model_card._kinds_text("union-wp-base").endswith("So it holds on every kind.")
    plot = model_card._kinds_text("plot-coherence-wp-base")
    assert "0.333 (inverted)" in plot and plot.endswith(f"for stories of several kinds, {model_card.SEVERAL_KINDS_CONFIG}.")
    assert model_card._kinds_text("union-roc") is None
