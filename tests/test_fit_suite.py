"""storyeval_training.recipes.fit_suite: story_quality's learned combination, fitted on held-out pairs."""
import json
import random

import datasets
import pytest

from storyeval_training.data.build_negatives import PAIR_FEATURES
from storyeval_training.recipes import fit_suite

OPENINGS = ["[MALE] was at the bar .", "[FEMALE] went to the park .", "the family went camping .", "[MALE] lost his keys .",
            "[FEMALE] baked a cake .", "the dog ran away .", "[MALE] bought a new car .", "[FEMALE] started a new job ."]
GOOD = " he looked around . he found what he needed . he went home happy ."
BAD = " he looked around . he looked around . he looked around . he looked around ."


def write_pairs(folder, n=None, first_opening=None):
    openings = OPENINGS[:n] if n else list(OPENINGS)
    if first_opening:
        openings[0] = first_opening
    rows = {name: [] for name in PAIR_FEATURES}
    for i, opening in enumerate(openings):
        for name, value in (("id", str(i)), ("context", opening), ("human", opening + GOOD), ("negative", opening + BAD),
                            ("original", opening + GOOD), ("techniques", ["repetition"])):
            rows[name].append(value)
    datasets.DatasetDict({"validation": datasets.Dataset.from_dict(rows, features=PAIR_FEATURES)}).save_to_disk(str(folder))
    return folder


def synthetic_rows(n, seed=0):
    """Pairs whose `union` percentile always ranks the human story higher and whose `plot_coherence` is noise."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        rows.append({"half": "fit" if i % 2 else "check", "with_context": True,
                     "human_percentiles": {"union": 60 + rng.random() * 40, "plot_coherence": rng.random() * 100},
                     "negative_percentiles": {"union": rng.random() * 40, "plot_coherence": rng.random() * 100}})
    return rows


def test_the_fit_weighs_the_part_that_ranks_pairs_and_drops_a_noisy_one():
    report = fit_suite.evaluate_parts({"a": synthetic_rows(200), "b": synthetic_rows(20, seed=1)}, ("union", "plot_coherence"), False)
    weights = report["weights"]
    assert sum(weights.values()) == pytest.approx(1) and min(weights.values()) >= 0
    assert weights["union"] > 0.9
    assert report["check_accuracy_mean"]["learned"] == 1.0 >= report["check_accuracy_mean"]["mean"]
    assert report["pairs"] == {"a": {"fit": 100, "check": 100}, "b": {"fit": 10, "check": 10}}


def test_a_part_that_ranks_pairs_backwards_gets_no_weight():
    rows = synthetic_rows(100)
    for row in rows:  # plot_coherence now prefers the negative
        row["human_percentiles"]["plot_coherence"], row["negative_percentiles"]["plot_coherence"] = 10.0, 90.0
    fit = fit_suite.fit_weights({"a": rows}, ("union", "plot_coherence"))
    assert fit["weights"] == {"union": 1.0, "plot_coherence": 0.0} and fit["coefficients"]["plot_coherence"] < 0


def test_fit_report_export_and_reexport(tmp_path):
    pairs = write_pairs(tmp_path / "pairs")
    weights = tmp_path / "weights.json"
    fit_suite.main(["--config", "roc", "--pairs", f"rep={pairs}", "--output", str(tmp_path / "fit.json"),
                    "--export-weights", str(weights)])
    report = json.loads((tmp_path / "fit.json").read_text())
    own = report["fits"]["own"]
    assert own["parts"] == ["union:roc", "plot_coherence:roc", "continuation_quality:deltascore"]
    assert set(own["without_contexts"]["weights"]) == {"union", "plot_coherence"}
    assert set(own["with_contexts"]["weights"]) == {"union", "plot_coherence", "continuation_quality"}
    assert report["pair_sets"]["rep"]["pairs"] == len(OPENINGS)
    alone = own["single_part_measures"]  # each part alone, set by set, on the check halves
    assert set(alone) == {"union", "plot_coherence"} and set(alone["union"]["check_accuracy"]) == {"rep"}
    assert min(alone["union"]["check_accuracy"].values()) == own["single_parts"]["union"]
    entry = json.loads(weights.read_text())["roc"]
    assert entry["default"] in ("mean", "learned") and entry["without_contexts"] == own["without_contexts"]["weights"]
    assert entry["fitted"]["command"].startswith("python -m storyeval_training.recipes.fit_suite --config roc")
    again = tmp_path / "again.json"
    fit_suite.main(["--config", "roc", "--from-report", str(tmp_path / "fit.json"), "--export-weights", str(again), "--default", "learned"])
    assert json.loads(again.read_text())["roc"]["with_contexts"] == entry["with_contexts"]
    assert json.loads(again.read_text())["roc"]["default"] == "learned"
    with pytest.raises(ValueError, match="fitted 'roc', not 'roc-base'"):
        fit_suite.main(["--config", "roc-base", "--from-report", str(tmp_path / "fit.json"), "--export-weights", str(again)])


def test_the_default_rule_of_an_across_story_fit_compares_the_worst_measure(tmp_path):
    def fit(worst_learned):
        return {"weights": {"union": 0.5, "plot_coherence": 0.5}, "pairs": {"cut": {"fit": 10, "check": 10}},
                "check_accuracy_min": {"mean": 0.7, "learned": 0.9}, "check_worst_measure": {"mean": 0.6, "learned": worst_learned}}

    report = {"config": "wp-base", "objective": "min-kind", "across_story_sets": ["cut"], "command": "c", "pair_sets": {},
              "split": "validation", "seed": 42, "environment": {"commit": "abc"},
              "fits": {"own": {"parts": ["union:wp-base", "plot_coherence:wp-base", "continuation_quality:deltascore"],
                               "without_contexts": fit(0.6), "with_contexts": None}}}
    # the pair accuracies alone would make the learned weights the default; across stories they gain nothing
    assert fit_suite.export(tmp_path / "w.json", "wp-base", report, None)["default"] == "mean"
    report["fits"]["own"]["without_contexts"] = fit(0.7)
    entry = fit_suite.export(tmp_path / "w.json", "wp-base", report, None)
    assert entry["default"] == "learned" and entry["fitted"]["across_story_sets"] == ["cut"]


def test_a_min_kind_fit_with_contexts_on_fewer_kinds_is_not_exported(tmp_path):
    def fit(weights, kinds):
        return {"weights": weights, "pairs": {kind: {"fit": 10, "check": 10} for kind in kinds},
                "check_accuracy_min": {"mean": 0.7, "learned": 0.8}}

    report = {"config": "wp-base", "objective": "min-kind", "command": "c", "pair_sets": {}, "split": "validation", "seed": 42,
              "environment": {"commit": "abc"},
              "fits": {"own": {"parts": ["union:wp-base", "plot_coherence:wp-base", "continuation_quality:deltascore"],
                               "without_contexts": fit({"union": 0.85, "plot_coherence": 0.15}, ["origin", "damage"]),
                               "with_contexts": fit({"union": 0.0, "plot_coherence": 1.0, "continuation_quality": 0.0}, ["origin"])}}}
    entry = fit_suite.export(tmp_path / "w.json", "wp-base", report, None)
    assert entry["with_contexts"] == {"union": 0.85, "plot_coherence": 0.15, "continuation_quality": 0.0}
    assert entry["with_contexts_fitted"] is False and entry["default"] == "learned"
    report["fits"]["own"]["with_contexts"]["pairs"]["damage"] = {"fit": 10, "check": 10}
    assert fit_suite.export(tmp_path / "w.json", "wp-base", report, None)["with_contexts"]["plot_coherence"] == 1.0


@pytest.mark.parametrize("argv, message", [
    (["--config", "xx", "--pairs", "a=p", "--output", "o.json"], "unknown story_quality config 'xx'"),
    (["--config", "roc", "--output", "o.json"], "give --pairs"),
    (["--config", "roc", "--pairs", "a", "--output", "o.json"], "expected NAME=FOLDER"),
    (["--config", "roc", "--pairs", "a=p", "--pairs", "a=q", "--output", "o.json"], "--pairs names repeat"),
    (["--config", "roc", "--pairs", "a=p", "--techniques", "b=x", "--output", "o.json"], "--techniques 'b=x'"),
    (["--config", "roc", "--pairs", "a=p", "--add-part", "union:roc", "--output", "o.json"], "every part needs its own name"),
    (["--config", "roc", "--pairs", "a=p", "--add-part", "plot_coherence=union:x", "--output", "o.json"], "every part needs its own name"),
    (["--config", "roc", "--pairs", "a=p", "--add-part", "union", "--output", "o.json"], "expected [NAME=]METRIC:CONFIG"),
    (["--config", "roc", "--pairs", "a=p", "--add-part", "=union:roc", "--output", "o.json"], "expected [NAME=]METRIC:CONFIG"),
    (["--config", "roc", "--pairs", "a=p", "--add-part", "overall=continuation_quality:x", "--output", "o.json"],
     "only continuation_quality's part is named continuation_quality"),
    (["--config", "roc", "--from-report", "r.json", "--export-weights", "w.json"], "no such file"),
    (["--config", "roc", "--from-report", "r.json"], "give it --export-weights"),
])
def test_bad_arguments_are_refused(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        fit_suite.parse_args(argv)
    assert message in capsys.readouterr().err


def test_an_added_part_is_named_after_its_metric_or_by_its_own_name():
    from storyeval.analysis.suite import suite_part

    assert fit_suite.part_spec("union:/runs/end") == suite_part("union", "/runs/end")
    named = fit_suite.part_spec("story_end=union:/runs/a=b")  # a folder may hold '=': only the name before ':' is split off
    assert named == suite_part("union", "/runs/a=b", name="story_end")
    assert fit_suite.part_label(named) == "story_end=union:/runs/a=b" and fit_suite.part_label(suite_part("union", "roc")) == "union:roc"


def test_an_existing_report_missing_pairs_and_a_missing_split_are_refused(tmp_path, monkeypatch, capsys):
    (tmp_path / "fit.json").write_text("{}")
    with pytest.raises(SystemExit):
        fit_suite.parse_args(["--config", "roc", "--pairs", "a=p", "--output", str(tmp_path / "fit.json")])
    assert "exists" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="no pairs folder"):
        fit_suite.read_pairs(tmp_path / "none", "validation", None, None, 42)
    pairs = write_pairs(tmp_path / "pairs", n=2)
    with pytest.raises(ValueError, match="no 'test' split"):
        fit_suite.read_pairs(pairs, "test", None, None, 42)
    with pytest.raises(ValueError, match="no pairs left"):
        fit_suite.read_pairs(pairs, "validation", ["gpt2-xl"], None, 42)
    assert len(fit_suite.read_pairs(pairs, "validation", ["repetition"], 1, 42)) == 1


class CountingScorer:
    name = "counting"

    def __init__(self):
        self.scored = []

    def score(self, texts, batch_size=16, progress_bar=False):
        self.scored += texts
        return [len(text) / 1000 for text in texts]


class IdentityReference:
    def percentile(self, values, criterion=None):
        return [100 * value for value in values]


def test_a_letterless_context_leaves_continuation_quality_out_and_the_cache_saves_rescoring(tmp_path):
    from types import SimpleNamespace

    rows = fit_suite.read_pairs(write_pairs(tmp_path / "pairs", n=3, first_opening="' ..."), "validation", None, None, 42)
    assert [row["with_context"] for row in rows] == [False, True, True]
    scorer = CountingScorer()
    suite = SimpleNamespace(components=[("union", None, scorer, IdentityReference())])
    cache = tmp_path / "new-run" / "scores.json"  # a folder that does not exist yet, as a new run's is
    fit_suite.score_parts(suite, {"a": rows}, 16, cache)
    assert len(scorer.scored) == 6 and all("union" in row["human_percentiles"] for row in rows)
    again = CountingScorer()
    fit_suite.score_parts(SimpleNamespace(components=[("union", None, again, IdentityReference())]), {"a": rows}, 16, cache)
    assert again.scored == [] and json.loads(cache.read_text())["counting"]


def test_the_cache_refuses_percentiles_from_a_replaced_checkpoint(tmp_path):
    from types import SimpleNamespace

    import torch

    rows = fit_suite.read_pairs(write_pairs(tmp_path / "pairs", n=3), "validation", None, None, 42)
    cache = tmp_path / "scores.json"
    fit_suite.score_parts(SimpleNamespace(components=[("union", None, CountingScorer(), IdentityReference())]), {"a": rows}, 16, cache)
    before = cache.read_text()
    replaced = CountingScorer()
    replaced.model = torch.nn.Linear(2, 1)  # same name, other weights
    with pytest.raises(ValueError, match="other weights or reference scores"):
        fit_suite.score_parts(SimpleNamespace(components=[("union", None, replaced, IdentityReference())]), {"a": rows}, 16, cache)
    assert replaced.scored == [] and cache.read_text() == before


def kind_rows(n, right: str, wrong: str, seed=0):
    """Pairs that part ``right`` ranks the right way by a wide margin and part ``wrong`` ranks backwards by a narrow one."""
    rng = random.Random(seed)
    return [{"half": "fit" if i % 2 else "check", "with_context": False,
             "human_percentiles": {right: 70 + rng.random() * 30, wrong: 45.0},
             "negative_percentiles": {right: rng.random() * 30, wrong: 55.0}} for i in range(n)]


def test_the_min_kind_objective_keeps_every_kind_above_chance_where_one_part_alone_fails_one():
    # each part holds one kind and inverts the other: only a mix ranks both kinds right
    sets = {"origin": kind_rows(60, "plot_coherence", "union"), "damage": kind_rows(600, "union", "plot_coherence", seed=1)}
    report = fit_suite.evaluate_parts(sets, ("union", "plot_coherence"), False, objective="min-kind")
    assert report["check_accuracy_min"]["learned"] == 1.0
    assert 0 < report["weights"]["union"] < 1 and sum(report["weights"].values()) == pytest.approx(1)
    single = {part: fit_suite.pair_accuracy(sets["origin"], {"union": float(part == "union"), "plot_coherence": float(part != "union")})
              for part in ("union", "plot_coherence")}
    assert single == {"union": 0.0, "plot_coherence": 1.0}


def test_no_pair_with_a_context_leaves_the_with_contexts_fit_empty():
    rows = kind_rows(20, "union", "plot_coherence")
    assert fit_suite.evaluate_parts({"a": rows}, ("union", "plot_coherence"), True, objective="min-kind") is None


def across_rows(n, seed=0):
    """(intact, broken) pairs of one length, each of its own story: within each pair part ``union`` ranks the intact copy
    higher by a hair, but its level follows the story (so across stories it is near chance); ``plot_coherence`` gives every
    intact story 60-70 and every broken copy 40-50, so it ranks intact stories above other stories' broken copies too."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        level = rng.random() * 100
        rows.append({"id": f"s{i}/wp/cut", "human": "word " * 20, "negative": "word " * 20, "half": "fit" if i % 2 else "check",
                     "with_context": False,
                     "human_percentiles": {"union": level + 0.5, "plot_coherence": 60 + rng.random() * 10},
                     "negative_percentiles": {"union": level, "plot_coherence": 40 + rng.random() * 10}})
    return rows


def test_across_story_sets_join_the_worst_measure_that_the_min_kind_fit_raises():
    sets = {"cut": across_rows(200)}
    within_only = fit_suite.evaluate_parts(sets, ("union", "plot_coherence"), False, objective="min-kind")
    assert "check_worst_measure" not in within_only  # both parts hold every pair: any weighting is as good
    report = fit_suite.evaluate_parts(sets, ("union", "plot_coherence"), False, objective="min-kind", across_sets=("cut",))
    auc = report["check_across_story_auc"]["cut"]
    assert auc["learned"] == 1.0 > auc["mean"]  # union's story level blurs the plain mean across stories
    assert report["weights"]["plot_coherence"] > report["weights"]["union"]
    assert report["check_worst_measure"]["learned"] == 1.0 and report["check_worst_measure"]["mean"] == auc["mean"]
    union_alone = fit_suite.weighted_across_auc([r for r in sets["cut"] if r["half"] == "check"],
                                                fit_suite.across_matches([r for r in sets["cut"] if r["half"] == "check"]),
                                                {"union": 1.0})
    assert 0.3 < union_alone < 0.7


def test_across_story_matches_leave_out_a_pairs_own_story_and_other_lengths():
    rows = [{"id": "a/wp/cut", "human": "w " * 20, "negative": "w " * 12}, {"id": "a/wp/swap", "human": "w " * 20, "negative": "w " * 20},
            {"id": "b/wp/cut", "human": "w " * 20, "negative": "w " * 21}]
    matches = fit_suite.across_matches(rows)
    # a's intact stories meet b's broken copy (21 words, within 10%) only; b's meets a's 20-word copy, not the 12-word one
    assert matches.tolist() == [[False, False, True], [False, False, True], [False, True, False]]


@pytest.mark.parametrize("extra, message", [
    (["--across-story-sets", "nope", "--objective", "min-kind"], "not a --pairs set"),
    (["--across-story-sets", "a"], "give --objective min-kind"),
    (["--no-regression"], "give --objective min-kind"),
])
def test_across_story_sets_bad_options(tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit):
        fit_suite.parse_args(["--config", "roc", "--pairs", f"a={tmp_path}", "--output", str(tmp_path / "fit.json"), *extra])
    assert message in capsys.readouterr().err


def test_a_missing_pairs_folder_or_split_ends_in_one_line_before_any_scoring(tmp_path, capsys):
    with pytest.raises(SystemExit):
        fit_suite.parse_args(["--config", "roc", "--pairs", f"a={tmp_path / 'none'}", "--output", str(tmp_path / "fit.json")])
    assert "--pairs a=" in capsys.readouterr().err
    pairs = write_pairs(tmp_path / "pairs", n=2)
    with pytest.raises(SystemExit) as stopped:
        fit_suite.main(["--config", "roc", "--pairs", f"a={pairs}", "--split", "test", "--output", str(tmp_path / "fit.json")])
    assert str(stopped.value.code).startswith("error:") and "no 'test' split" in str(stopped.value.code)
    assert not (tmp_path / "fit.json").exists()
    with pytest.raises(SystemExit) as stopped:  # an added part that is not there
        fit_suite.main(["--config", "roc", "--pairs", f"a={pairs}", "--add-part", f"story_end=union:{tmp_path / 'gone'}",
                        "--output", str(tmp_path / "fit.json")])
    assert str(stopped.value.code) == f"error: no checkpoint folder at {tmp_path / 'gone'}"
    assert not (tmp_path / "fit.json").exists()


def threshold_rows(thresholds, old: bool):
    """Pairs each ranked right only on one side of a plot-coherence weight: an ``old`` pair while the weight is below its
    threshold, a new one while it is above (the margin of weights (1 - w, w) is threshold - w, or w - threshold)."""
    rows = []
    for i, t in enumerate(thresholds):
        union, plot = (t, t - 1) if old else (-t, 1 - t)
        rows.append({"half": "fit", "with_context": False, "human_percentiles": {"union": 50 + 10 * union, "plot_coherence": 50 + 10 * plot},
                     "negative_percentiles": {"union": 50.0, "plot_coherence": 50.0}})
    return rows


def test_no_regression_keeps_the_fit_from_giving_up_a_kind_the_current_weights_hold():
    # the plain mean ranks every old pair right and two new ones of ten; raising the worst kind means giving up old pairs
    sets = {"old": threshold_rows([0.515 + 0.02 * i for i in range(10)], old=True),
            "new": threshold_rows([0.405, 0.455, 0.555, 0.605, 0.655, 0.705, 0.755, 0.805, 0.855, 0.905], old=False)}
    metrics = ("union", "plot_coherence")
    mean = {"union": 0.5, "plot_coherence": 0.5}
    assert fit_suite.kind_measures(sets, mean) == {"old": 1.0, "new": 0.2}
    free = fit_suite.fit_min_kind(sets, metrics)
    assert free["fit_min_accuracy"] > 0.2 and fit_suite.pair_accuracy(sets["old"], free["weights"]) < 0.98
    kept = fit_suite.fit_min_kind(sets, metrics, incumbent=mean)
    assert fit_suite.pair_accuracy(sets["old"], kept["weights"]) == 1.0 and kept["fit_min_accuracy"] == 0.2
    assert kept["incumbent"] == mean and kept["eligible_weightings"] >= 1


def test_the_current_weights_are_the_configs_default_combination():
    assert fit_suite.current_weights("roc-base", ("union", "plot_coherence"), False) == {"union": 0.5, "plot_coherence": 0.5}
    added = fit_suite.current_weights("roc-base", ("union", "plot_coherence", "continuation_quality"), True)
    assert added == pytest.approx({"union": 1 / 3, "plot_coherence": 1 / 3, "continuation_quality": 1 / 3})
    learned = fit_suite.current_weights("wp-base", ("union", "plot_coherence"), False)  # wp-base's default is learned
    assert learned == pytest.approx({"union": 0.85, "plot_coherence": 0.15})


def test_a_fit_that_falls_on_a_check_half_does_not_become_the_default(tmp_path):
    fit = {"weights": {"union": 0.3, "plot_coherence": 0.7}, "pairs": {"cut": {"fit": 10, "check": 10}},
           "check_accuracy_min": {"mean": 0.5, "learned": 0.7}, "check_regressions_against_incumbent": {"old": 0.05}}
    report = {"config": "roc-base", "objective": "min-kind", "command": "c", "pair_sets": {}, "split": "validation", "seed": 42,
              "environment": {"commit": "abc"},
              "fits": {"own": {"parts": ["union:roc-base", "plot_coherence:roc-base", "continuation_quality:deltascore"],
                               "without_contexts": fit, "with_contexts": None}}}
    assert fit_suite.export(tmp_path / "w.json", "roc-base", report, None)["default"] == "mean"
    fit["check_regressions_against_incumbent"] = {}
    assert fit_suite.export(tmp_path / "w.json", "roc-base", report, None)["default"] == "learned"


def test_the_check_halves_measure_the_incumbent_beside_the_plain_mean_and_the_fit():
    rows = across_rows(200)
    incumbent = {"union": 0.85, "plot_coherence": 0.15}
    report = fit_suite.evaluate_parts({"cut": rows}, ("union", "plot_coherence"), False, objective="min-kind",
                                      across_sets=("cut",), incumbent=incumbent)
    check = [r for r in rows if r["half"] == "check"]
    assert report["check_across_story_auc"]["cut"]["incumbent"] == fit_suite.weighted_across_auc(
        check, fit_suite.across_matches(check), incumbent)
    assert report["check_worst_measure"]["incumbent"] <= report["check_worst_measure"]["learned"]
    assert set(report["check_accuracy_min"]) == {"mean", "learned", "incumbent"}
