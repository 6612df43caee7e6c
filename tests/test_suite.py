"""The percentile scale and the story_quality suite (Python and evaluate module)."""
import importlib.util
import json
import math

import pytest

from storyeval.analysis import percentiles
from storyeval.analysis.suite import PROVENANCE_KEYS, StoryQuality, output_keys

STORIES = [
    "[MALE] was at the bar . he noticed a phone on the floor . he gave it to the bartender .",
    "[MALE] was at the bar . he was at the bar . he was at the bar . he was at the bar .",
]
CONTEXTS = ["[MALE] was at the bar .", "[FEMALE] went to the park ."]
CONTINUATIONS = ["he noticed a phone on the floor . he gave it to the bartender .", "she saw a dog . she played with it ."]


def write_reference(folder, scores, metric="union", corpus="roc"):
    entry = percentiles.build_reference(metric, corpus, scores, {"builder": "ROCStories", "split": "test", "items": 4})
    return percentiles.write_reference(folder, metric, {corpus: entry}, {"commit": "abc1234"})


def test_percentile_is_the_share_of_reference_items_scoring_lower(tmp_path):
    write_reference(tmp_path, {"score": [0.4, 0.1, 0.3, 0.2]})
    reference = percentiles.load_reference(tmp_path)
    assert reference.percentile([0.05, 0.1, 0.25, 0.9]) == [0.0, 0.0, 50.0, 100.0]
    assert percentiles.percentile([0.35], tmp_path, "roc") == [75.0]
    assert reference.provenance["split"] == "test" and reference.provenance["provenance"]["commit"] == "abc1234"


def test_reference_problems_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="from a source checkout .*benchmarks.checkpoints.reference_scores"):
        percentiles.load_reference(tmp_path)
    write_reference(tmp_path, {"overall": [1.0, 2.0], "relevance": [1.0, 3.0]}, metric="continuation_quality")
    reference = percentiles.load_reference(tmp_path, "roc")
    with pytest.raises(ValueError, match="several criteria"):
        reference.percentile([1.5])
    with pytest.raises(KeyError, match="no roc reference for criterion 'fun'"):
        reference.percentile([1.5], "fun")
    with pytest.raises(KeyError, match="no 'wp' reference"):
        percentiles.load_reference(tmp_path, "wp")
    with pytest.raises(ValueError, match="finite"):
        reference.percentile([math.nan], "overall")
    payload = json.loads(percentiles.reference_path(tmp_path).read_text())
    payload["format"] = 99
    percentiles.reference_path(tmp_path).write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="unknown format 99"):
        percentiles.load_reference(tmp_path)


def test_build_reference_refuses_empty_scores_and_unknown_corpora():
    with pytest.raises(ValueError, match="no union reference"):
        percentiles.build_reference("union", "roc", {"score": []}, {})
    with pytest.raises(KeyError, match="unknown corpus"):
        percentiles.build_reference("union", "xx", {"score": [0.1]}, {})


def test_bundled_checkpoints_carry_their_reference_with_provenance():
    from storyeval.checkpoints.resolution import HUB_CARDS

    for folder, corpus in [("union-roc", "roc"), ("union-wp", "wp"), ("plot-coherence-roc", "roc"), ("continuation-quality", "wp"),
                           ("union-roc-base", "roc"), ("union-wp-base", "wp"), ("plot-coherence-roc-base", "roc")]:
        reference = percentiles.load_reference(HUB_CARDS / folder, corpus)
        assert reference.provenance["split"] == "test" and reference.provenance["items"] > 100
        assert {"commit", "storyeval_version", "command"} <= set(reference.provenance["provenance"])
        assert all(list(values) == sorted(values) for values in reference.scores.values())


@pytest.fixture(scope="module")
def roc_suite():
    return StoryQuality("roc")


def test_suite_without_contexts_leaves_continuation_out(roc_suite):
    result = roc_suite.score(STORIES)
    assert list(result) == output_keys("roc", with_contexts=False) + ["mean_combined", *PROVENANCE_KEYS]
    for i in range(2):
        parts = [result["union_percentile"][i], result["plot_coherence_percentile"][i]]
        assert result["combined"][i] == pytest.approx(sum(parts) / 2)
        assert 0 <= result["combined"][i] <= 100
    assert result["union"][0] > result["union"][1]  # the repetitive story scores lower


def test_suite_with_contexts_scores_the_whole_story_and_adds_continuation(roc_suite):
    from storyeval.scoring.sequence import load_scorer

    result = roc_suite.score(CONTINUATIONS, contexts=CONTEXTS)
    assert list(result) == output_keys("roc", with_contexts=True) + ["mean_combined", *PROVENANCE_KEYS]
    union = load_scorer("union", roc_suite.components[0][1])
    assert result["union"] == pytest.approx(union.score([f"{c} {p}" for c, p in zip(CONTEXTS, CONTINUATIONS)]))
    parts = [result[k][0] for k in ("union_percentile", "plot_coherence_percentile", "continuation_quality_overall_percentile")]
    assert result["combined"][0] == pytest.approx(sum(parts) / 3)


@pytest.mark.parametrize(
    "predictions, contexts, error",
    [([""], None, ValueError), ("a story .", None, TypeError), (["a ."], ["b .", "c ."], ValueError), (["a ."], [None], TypeError)],
)
def test_suite_refuses_bad_input(roc_suite, predictions, contexts, error):
    with pytest.raises(error):
        roc_suite.score(predictions, contexts)


def test_every_result_says_what_produced_it(roc_suite):
    """A suite result names each part's checkpoint, the precision and versions, and where its percentiles came from,
    as every metric's result does: without it a result cannot be reproduced."""
    from storyeval.scoring.signature import settings_string

    alone, with_contexts, empty = roc_suite.score(STORIES), roc_suite.score(CONTINUATIONS, CONTEXTS), roc_suite.score([])
    versions = settings_string("x").removeprefix("x")  # _fp32_storyeval-..._transformers-..._torch-...
    digests = {name: scorer.weights for name, _, scorer, _ in roc_suite.parts(with_contexts=True)}
    assert len(set(digests.values())) == 3 and all(len(digest) == 8 for digest in digests.values())
    weights = f"_weights-{digests['union']}+{digests['plot_coherence']}"
    assert alone["settings"].startswith(f"union-roc+plot-coherence-roc{versions}{weights}_percentiles-roc-test-")
    assert with_contexts["settings"].startswith(
        f"union-roc+plot-coherence-roc+continuation-quality{versions}{weights}+{digests['continuation_quality']}_percentiles-roc-test-")
    assert empty["settings"] == alone["settings"]
    references = alone["percentile_references"]
    assert list(references) == ["union", "plot_coherence"] and list(with_contexts["percentile_references"])[-1] == "continuation_quality"
    union = references["union"]
    assert union["checkpoint"] == "union-roc" and union["corpus"] == "roc" and union["split"] == "test" and union["items"] > 1000
    assert union["provenance"]["commit"] in alone["settings"]


def test_suite_empty_input_and_unknown_config(roc_suite):
    assert roc_suite.score([])["combined"] == [] and math.isnan(roc_suite.score([])["mean_combined"])
    with pytest.raises(ValueError, match="unknown story_quality config 'xx'"):
        StoryQuality("xx")


def test_evaluate_module_matches_the_python_suite(roc_suite):
    import evaluate

    from storyeval.checkpoints.resolution import HUB_CARDS

    module = evaluate.load(str(HUB_CARDS.parent / "metrics" / "story_quality"), "roc")
    result = module.compute(predictions=CONTINUATIONS, contexts=CONTEXTS)
    expected = roc_suite.score(CONTINUATIONS, CONTEXTS)
    assert result.keys() == expected.keys() and result["combined"] == pytest.approx(expected["combined"])
    alone = module.compute(predictions=STORIES)
    assert "continuation_quality_overall" not in alone and len(alone["combined"]) == 2
    module.add_batch(predictions=STORIES[:1])
    module.add_batch(predictions=STORIES[1:], contexts=CONTEXTS[:1])
    with pytest.raises(ValueError, match="a context for every story or for none"):
        module.compute()
    with pytest.raises(TypeError, match="unknown option"):
        module.compute(predictions=STORIES, temperature=1)
    with pytest.raises(ValueError, match="reference-free"):
        module.compute(predictions=STORIES, references=STORIES)
    with pytest.raises(ValueError, match="predictions is empty: no stories to score"):
        module.compute(predictions=[])
    # float32 named is the precision it scores in anyway; any other is refused before the queue is consumed
    assert module.compute(predictions=STORIES, dtype="float32")["combined"] == pytest.approx(alone["combined"])
    with pytest.raises(ValueError, match=r"unsupported dtype 'bfloat16'; choose from \['float32', 'int8'\]"):
        module.compute(predictions=STORIES, dtype="bfloat16")


def test_the_wp_base_config_is_the_wp_base_tier_against_wp_references_with_learned_weights():
    suite = StoryQuality("wp-base")
    assert suite.corpus == "wp"
    assert [(metric, reference.corpus) for metric, _, _, reference in suite.components] == [
        ("union", "wp"), ("plot_coherence", "wp"), ("continuation_quality", "wp")]
    assert "union-wp-base" in str(suite.components[0][1]) and "plot-coherence-wp-base" in str(suite.components[1][1])
    result = suite.score(["[MALE] opened the door . the dragon was asleep on the gold ."])
    assert result["combination"]["rule"] == "learned" and result["combination"]["fitted"]["command"].startswith(
        "python -m storyeval_training.recipes.fit_suite --config wp-base")
    weights = result["combination"]["weights"]
    assert set(weights) == {"union", "plot_coherence"} and sum(weights.values()) == pytest.approx(1, abs=1e-3)
    assert result["combined"][0] == pytest.approx(sum(w * result[f"{m}_percentile"][0] for m, w in weights.items()))


def test_the_base_config_scores_with_the_base_tier_against_roc_references():
    suite = StoryQuality("roc-base")
    assert suite.corpus == "roc"
    assert [(metric, reference.corpus) for metric, _, _, reference in suite.components] == [
        ("union", "roc"), ("plot_coherence", "roc"), ("continuation_quality", "roc")]
    assert suite.components[0][1].name != "union-roc" and "union-roc-base" in str(suite.components[0][1])
    assert "plot-coherence-roc-base" in str(suite.components[1][1])
    result = suite.score(["Ken went to the bar. He found a phone. He gave it to the bartender."])
    assert set(result) == {"union", "union_percentile", "plot_coherence", "plot_coherence_percentile", "combined", "mean_combined",
                           "settings", "percentile_references", "combination"}
    assert result["settings"].startswith("union-roc-base+plot-coherence-roc-base_fp32_")


def test_the_module_refuses_a_path_like_config_without_creating_it(tmp_path):
    import evaluate

    from storyeval.checkpoints.resolution import HUB_CARDS

    folder = tmp_path / "not-a-config"
    with pytest.raises(ValueError, match="unknown story_quality config"):
        evaluate.load(str(HUB_CARDS.parent / "metrics" / "story_quality"), str(folder))
    assert not folder.exists()


@pytest.fixture
def weights_file(tmp_path, monkeypatch):
    """A weights file for the `roc` config, in place of the shipped one."""
    from storyeval.analysis import suite

    path = tmp_path / "suite_weights.json"
    path.write_text(json.dumps({"roc": {
        "default": "mean", "without_contexts": {"union": 0.8, "plot_coherence": 0.2},
        "with_contexts": {"union": 0.5, "plot_coherence": 0.25, "continuation_quality": 0.25},
        "fitted": {"commit": "abc1234", "command": "python -m storyeval_training.recipes.fit_suite ..."}}}))
    monkeypatch.setattr(suite, "WEIGHTS_FILE", path)
    suite.learned_weights.cache_clear()
    yield path
    suite.learned_weights.cache_clear()


def test_the_learned_combination_is_the_fitted_weighted_mean(roc_suite, weights_file):
    plain, learned = roc_suite.score(STORIES), roc_suite.score(STORIES, combination="learned")
    for i in range(2):
        assert learned["combined"][i] == pytest.approx(0.8 * learned["union_percentile"][i] + 0.2 * learned["plot_coherence_percentile"][i])
        assert plain["combined"][i] == pytest.approx((plain["union_percentile"][i] + plain["plot_coherence_percentile"][i]) / 2)
    assert plain["combination"] == {"rule": "mean", "weights": {"union": 0.5, "plot_coherence": 0.5}}
    assert learned["combination"]["rule"] == "learned" and learned["combination"]["fitted"]["commit"] == "abc1234"
    assert learned["settings"] == plain["settings"] + "_combined-learned-abc1234"
    contexts = roc_suite.score(CONTINUATIONS, CONTEXTS, combination="learned")
    parts = [contexts[k][0] for k in ("union_percentile", "plot_coherence_percentile", "continuation_quality_overall_percentile")]
    assert contexts["combined"][0] == pytest.approx(0.5 * parts[0] + 0.25 * parts[1] + 0.25 * parts[2])


def test_a_config_default_combination_comes_from_the_weights_file(roc_suite, weights_file):
    from storyeval.analysis import suite

    entries = json.loads(weights_file.read_text())
    entries["roc"]["default"] = "learned"
    weights_file.write_text(json.dumps(entries))
    suite.learned_weights.cache_clear()
    assert roc_suite.score(STORIES)["combination"]["rule"] == "learned"
    assert roc_suite.score(STORIES, combination="mean")["combination"]["rule"] == "mean"
    assert roc_suite.score([])["combination"]["rule"] == "learned"


def test_combination_problems_are_clear(roc_suite, weights_file):
    from storyeval.analysis import suite

    with pytest.raises(ValueError, match="unknown combination 'median'"):
        roc_suite.score(STORIES, combination="median")
    with pytest.raises(ValueError, match="'wp' has no learned weights; configs with them: \\['roc'\\]"):
        suite.check_combination("wp", "learned")
    entries = json.loads(weights_file.read_text())
    entries["roc"]["without_contexts"] = {"union": 1.0}
    weights_file.write_text(json.dumps(entries))
    suite.learned_weights.cache_clear()
    with pytest.raises(ValueError, match="weights are for \\['union'\\], not this suite's"):
        roc_suite.score(STORIES, combination="learned")


def test_the_module_takes_the_combination_and_checks_it_before_consuming_the_queue(weights_file):
    import evaluate

    from storyeval.checkpoints.resolution import HUB_CARDS

    module = evaluate.load(str(HUB_CARDS.parent / "metrics" / "story_quality"), "roc")
    assert module.compute(predictions=STORIES, combination="learned")["combination"]["rule"] == "learned"
    module.add_batch(predictions=STORIES)
    with pytest.raises(ValueError, match="unknown combination"):
        module.compute(combination="median")
    assert len(module.compute(combination="mean")["combined"]) == 2  # the queued stories are still there


def test_the_shipped_learned_weights_fit_their_configs_parts():
    """A config whose parts change must be refitted: its shipped weights would no longer name its parts."""
    from storyeval.analysis.suite import SUITE_CONFIGS, learned_weights

    assert set(learned_weights()) <= set(SUITE_CONFIGS)
    for config, entry in learned_weights().items():
        parts = [part.name for part in SUITE_CONFIGS[config]]
        assert sorted(entry["with_contexts"]) == sorted(parts)
        assert sorted(entry["without_contexts"]) == sorted(m for m in parts if m != "continuation_quality")
        for weights in (entry["with_contexts"], entry["without_contexts"]):
            assert min(weights.values()) >= 0 and sum(weights.values()) == pytest.approx(1, abs=1e-3)
        assert entry["default"] in ("mean", "learned") and entry["fitted"]["command"].startswith("python -m storyeval_training.recipes.fit_suite")


def test_a_second_part_of_one_metric_has_a_name_of_its_own_which_keys_its_columns_and_weight(tiny_checkpoint):
    from storyeval.analysis.suite import StoryQuality, output_keys, suite_part

    parts = [suite_part("union", "roc"), suite_part("union", str(tiny_checkpoint), name="story_end")]
    assert output_keys("roc", False, parts) == ["union", "union_percentile", "story_end", "story_end_percentile", "combined"]
    with pytest.raises(ValueError, match="two parts share a name in \\['union', 'union'\\]"):
        StoryQuality("roc", parts=[parts[0], suite_part("union", str(tiny_checkpoint))])
    with pytest.raises(ValueError, match="only continuation_quality's part is named continuation_quality"):
        suite_part("union", "roc", name="continuation_quality")
    with pytest.raises(ValueError, match="only continuation_quality's part is named continuation_quality"):
        suite_part("continuation_quality", "deltascore", name="overall")


def test_the_correlation_benchmark_reads_the_learned_combination_off_a_plain_result(roc_suite, weights_file):
    from benchmarks.agreement.story_quality_correlation import add_learned

    plain = roc_suite.score(CONTINUATIONS, CONTEXTS, combination="mean")
    learned = roc_suite.score(CONTINUATIONS, CONTEXTS, combination="learned")
    assert add_learned(roc_suite, plain, True)["combined_learned"] == pytest.approx(learned["combined"])


def test_int8_scores_the_story_metrics_int8_where_the_config_is_offered_it_and_is_refused_in_one_line_elsewhere(roc_suite, monkeypatch):
    from storyeval.analysis import suite as suite_module
    from storyeval.scoring.int8 import runtime as int8_runtime

    with pytest.raises(ValueError, match="story_quality scores in float32, or in int8 through its story metrics, not 'bfloat16'"):
        roc_suite.score(STORIES, dtype="bfloat16")
    # no record of the config's own figures in int8: refused, before anything scores
    assert roc_suite.int8_problem() == ("dtype='int8' is not offered for story_quality roc: its combined score in int8 was not measured; "
                                        "score it in float32")
    with pytest.raises(ValueError, match="^dtype='int8' is not offered for story_quality roc"):
        roc_suite.score(STORIES, dtype="int8")
    # a base config names its part the int8 rule refuses, with that part's own figures, in one line; with every part
    # offered, its own record decides (roc-base's parts hold the rule, its combined score misses one modern-text figure)
    for config in ("roc-base", "wp-base"):
        folders = suite_module.story_part_folders(config)
        problem = suite_module.suite_int8_problem(config, folders)
        part = next((p for folder in folders.values() if (p := int8_runtime.checkpoint_int8_problem(folder)) is not None), None)
        if part is not None:
            assert problem.startswith(f"story_quality {config} scores in int8 through its story metrics, and is not offered for ")
            assert part.removeprefix("dtype='int8' ").removesuffix("; score it in float32 or bfloat16") in problem
            assert problem.endswith("; score it in float32")
        elif problem is not None:
            assert problem.startswith(f"dtype='int8' is not offered for story_quality {config}: its combined score in int8 ")
            assert suite_module.INT8_FIDELITY[config].problem() in problem
        assert problem is None or "\n" not in problem
    if not int8_runtime.cpu_has_int8_dot_product() or importlib.util.find_spec("openvino") is None:
        return
    measured = suite_module.SuiteInt8Fidelity(0.001, "h.json", 0, 40, "m.json")
    monkeypatch.setitem(suite_module.INT8_FIDELITY, "roc", measured)
    low, full = roc_suite.score(STORIES, dtype="int8"), roc_suite.score(STORIES)
    assert "_int8_" in low["settings"] and "_fp32_" in full["settings"]
    assert low["union"] == pytest.approx(full["union"], abs=0.05) and low["union"] != full["union"]
    with_contexts = roc_suite.score(CONTINUATIONS, contexts=CONTEXTS, dtype="int8")
    assert with_contexts["continuation_quality_overall"] == roc_suite.score(CONTINUATIONS, contexts=CONTEXTS)["continuation_quality_overall"]
