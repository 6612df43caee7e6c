"""The modern-text check: one planted break per copy, its splits, the across-story AUC matched for length, the
no-regression rule, and the benchmark over a saved check."""
import json
import random

import datasets
import pytest

from benchmarks.agreement import modern_breaks as benchmark
from storyeval_training import selection
from storyeval_training.data import breaks, modern_breaks

STORY = ["Once upon a time, Mary lived in a small village by the sea.", "She had three brothers and a dog named Max.",
         "Every morning Mary walked to the river with Max.", "One day she found a golden key in the water.",
         "She took it home and showed her three brothers.", "They tried the key on every door in the village.",
         "At last it opened the old lighthouse."]
ANTONYMS = {"small": ["big"], "old": ["new"]}


def apply(kind, sentences, seed=0):
    rng = random.Random(seed)
    if kind == "insert":
        return breaks.insert(sentences, rng, "The spaceship landed on Mars.")
    if kind == "contradiction":
        return breaks.contradiction(sentences, rng, ANTONYMS)
    return getattr(breaks, kind)(sentences, rng)


@pytest.mark.parametrize("kind", [kind for kind in breaks.KINDS if kind != "shuffle"])
def test_each_break_leaves_the_opening_and_shows_where_it_is(kind):
    for seed in range(5):
        broken, at = apply(kind, STORY, seed)
        assert broken != STORY and broken[0] == STORY[0] and 1 <= at < len(broken)


def test_a_shuffle_reorders_the_whole_story_and_shows_where_it_first_differs():
    for seed in range(20):
        shuffled, at = apply("shuffle", STORY, seed)
        assert shuffled != STORY and sorted(shuffled) == sorted(STORY)
        assert shuffled[:at] == STORY[:at] and shuffled[at] != STORY[at]
    assert apply("shuffle", ["Same."] * 5) is None  # no order other than its own


def test_a_triple_says_one_body_sentence_three_times_in_a_row_and_a_half_keeps_the_first_half():
    for seed in range(10):
        tripled, at = apply("triple", STORY, seed)
        assert len(tripled) == len(STORY) + 2 and tripled[at - 1] == tripled[at] == tripled[at + 1] and at >= 2
        assert tripled[:at] + tripled[at + 2:] == STORY
    halved, at = apply("half", STORY)
    assert halved == STORY[:3] and at == 2
    assert apply("half", STORY[:4])[0] == STORY[:2]
    assert set(breaks.FIRST_CHECKS) <= set(breaks.KINDS) and set(breaks.ENDING_KINDS) == {"cut", "half"}


@pytest.mark.parametrize("kind", breaks.KINDS)
def test_a_story_of_fewer_than_four_sentences_carries_no_break(kind):
    assert apply(kind, STORY[:3]) is None


def test_each_break_is_exactly_one_change():
    swapped, at = apply("swap", STORY)
    assert sorted(swapped) == sorted(STORY) and sum(a != b for a, b in zip(swapped, STORY)) == 2
    repeated, at = apply("repeat", STORY)
    assert len(repeated) == len(STORY) + 1 and repeated[at] in STORY[:at]
    cut, at = apply("cut", STORY)
    assert cut == STORY[:len(cut)] and len(cut) == round(breaks.CUT_SHARE * len(STORY)) and at == len(cut) - 1
    moved, at = apply("move", STORY)
    assert sorted(moved) == sorted(STORY) and moved.index(moved[at]) != STORY.index(moved[at])
    inserted, at = apply("insert", STORY)
    assert inserted[at] == "The spaceship landed on Mars." and inserted[:at] + inserted[at + 1:] == STORY
    changed, at = apply("contradiction", STORY)
    assert len(changed) == len(STORY) and [i for i, (a, b) in enumerate(zip(changed, STORY)) if a != b] == [at]


def test_a_contradiction_renames_a_character_with_the_other_gender_or_changes_a_stated_number():
    for seed in range(8):
        changed, at = breaks.contradiction(STORY, random.Random(seed), {})
        new = changed[at]
        assert "Mary" not in new or "three" not in new  # the name or the number told earlier changed there
    told = ["Mary lived by the sea.", "The wind blew hard.", "A ship came in.", "Mary smiled at the sea."]
    from storyeval import text as textlib

    for seed in range(3):
        story, at = breaks.contradiction(told, random.Random(seed), {})
        assert at == 3 and story[:3] == told[:3]
        name = story[at].split()[0]
        assert textlib.name_gender(name, cased=True) == "[MALE]"  # Mary became a man's name: visible after delexicalising


def test_the_held_out_generator_and_the_builders_held_out_splits_are_test():
    assert modern_breaks.modern_split("train", modern_breaks.HELD_OUT_GENERATOR, "g1", 42) == "test"
    assert modern_breaks.modern_split("validation", "gpt-4", "g1", 42) == "test"
    splits = {modern_breaks.modern_split("train", "gpt-4", f"g{i}", 42) for i in range(50)}
    assert splits == {"train", "validation"}
    assert modern_breaks.human_split("test", "g1", 42) is None


def test_units_skip_short_stories_with_a_count_and_insert_from_another_prompt_of_the_same_generator():
    units = modern_breaks.Units(ANTONYMS, seed=1)
    units.collect_foreign("test", "gpt-4", "g1", STORY)
    units.collect_foreign("test", "gpt-4", "g2", ["Opening.", "A sentence from elsewhere entirely."])
    units.collect_foreign("test", "llama-2-70b", "g3", ["Opening.", "A llama sentence."])
    units.add("test", "s1/wp", "g1", "gpt-4", "machine", "wp", STORY, reaches_end=True)
    units.add("test", "s2/wp", "g2", "gpt-4", "machine", "wp", STORY[:3], reaches_end=True)
    rows = units.dataset()["test"]
    assert sorted(rows["kind"]) == sorted(["intact", *breaks.KINDS])
    inserted = next(r for r in rows if r["kind"] == "insert")
    assert "A sentence from elsewhere entirely." in inserted["text"]
    assert units.counts == {"skipped_too_short/machine/wp": 1}


def test_a_text_that_stops_before_its_story_ends_carries_no_cut_and_its_other_breaks_are_unchanged():
    def rows(reaches_end):
        units = modern_breaks.Units(ANTONYMS, seed=1)
        units.collect_foreign("test", "gpt-4", "g2", ["Opening.", "A sentence from elsewhere entirely."])
        units.add("test", "s1/roc", "g1", "gpt-4", "machine", "roc", STORY, reaches_end=reaches_end)
        return units, {r["kind"]: r["text"] for r in units.dataset()["test"]}

    whole, with_end = rows(True)
    window, without_end = rows(False)
    assert set(with_end) - set(without_end) == {"cut", "half"}
    assert {kind: text for kind, text in with_end.items() if kind not in ("cut", "half")} == without_end  # the same seeded breaks
    assert window.counts == {"view_before_story_end/machine/roc/cut": 1, "view_before_story_end/machine/roc/half": 1} and not whole.counts


def test_a_view_says_whether_it_reaches_its_story_end():
    import random

    long_story = [f"Sentence {i} has a few words in it." for i in range(40)]  # 320 words: the wp view stops before the end
    for seed in range(20):
        views = modern_breaks.views(long_story, random.Random(seed))
        wp, wp_end = views["wp"]
        window, window_end = views["roc"]
        assert not wp_end and len(wp) < len(long_story)
        assert window_end == (window[-1] == long_story[-1])
    (wp, wp_end), (window, window_end) = modern_breaks.views(STORY, random.Random(0)).values()
    assert wp_end and wp == STORY


def test_an_output_that_opens_like_a_human_judged_item_is_refused_with_the_count(monkeypatch):
    stories = datasets.DatasetDict({"test": datasets.Dataset.from_dict({"text": ["Ken went to the bar. He sat.", "Other."]})})
    monkeypatch.setattr(modern_breaks, "human_judged_keys", lambda _: frozenset({modern_breaks.textlib.leakage_key("Ken went to the bar.")}))
    with pytest.raises(ValueError, match="^1 stories open like a human-judged item"):
        modern_breaks.check_leakage(stories)


def test_a_shuffled_copy_that_opens_like_a_human_judged_item_is_dropped_and_counted():
    kept = modern_breaks.Units(ANTONYMS, seed=0)
    kept.add("train", "u", "g", "gen", "human", "wp", STORY, True)
    rows = kept.rows["train"]
    opening = rows["sentences"][rows["kind"].index("shuffle")][0]
    assert opening != STORY[0]
    dropping = modern_breaks.Units(ANTONYMS, seed=0, judged_keys=frozenset({modern_breaks.textlib.leakage_key(opening)}))
    dropping.add("train", "u", "g", "gen", "human", "wp", STORY, True)
    assert dropping.rows["train"]["kind"] == [kind for kind in rows["kind"] if kind != "shuffle"]
    assert dropping.counts - kept.counts == {"leakage_dropped_breaks/human/wp/shuffle": 1}


def test_the_across_story_auc_skips_the_same_prompt_and_stories_of_other_lengths():
    intact = ([0.9, 0.2], [100, 100], ["a", "b"])
    broken = ([0.5, 0.1, 0.0], [100, 105, 300], ["a", "a", "b"])
    # a's intact story meets only b's broken copy, of another length: no comparison; b's meets a's two copies
    auc, compared = selection.across_story_auc(intact, broken)
    assert compared == 2 and auc == 0.5
    assert selection.across_story_auc(([1.0], [10], ["a"]), ([0.0], [100], ["b"])) == (None, 0)
    assert selection.within_pair_accuracy([1, 0, 2], [0, 1, 2]) == pytest.approx(0.5)


def test_the_no_regression_rule_names_every_measure_that_falls_more_than_its_tolerance():
    assert selection.regressions({"a": 0.80, "b": 0.70, "c": None}, {"a": 0.81, "b": 0.75, "c": 0.9}) == {"b": 0.05}
    assert selection.regressions({"a": 0.9}, {"a": 0.9}) == {}
    assert selection.regressions({"a": 0.8133}, {"a": 0.8333}) == {}  # exactly 0.02 (3 of 150), whatever floats make of it


def saved_check(folder):
    units = modern_breaks.Units(ANTONYMS, seed=3)
    stories = [(f"s{i}", f"g{i}", "gpt-4" if i % 2 else modern_breaks.HELD_OUT_GENERATOR,
                [f"Story {i} opens here.", *STORY[1:]]) for i in range(4)]
    for unit, group, generator, sentences in stories:
        units.collect_foreign("test", generator, group, sentences)
    for unit, group, generator, sentences in stories:
        for view in ("wp", "roc"):
            units.add("test", f"{unit}/{view}", group, generator, "machine", view, sentences, reaches_end=True)
    datasets.DatasetDict({"test": units.dataset()["test"]}).save_to_disk(str(folder / "stories"))  # empty splits cannot be read back
    return folder


def test_the_benchmark_reports_both_measures_per_kind_view_and_generator(tmp_path, tiny_checkpoint, monkeypatch):
    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    check = saved_check(tmp_path / "check")
    benchmark.main(["--breaks-dir", str(check), "--checkpoint", f"a={tiny_checkpoint}", "--checkpoint", f"b={tiny_checkpoint}",
                    "--baseline", "a", "--output", "out"])
    payload = json.loads((tmp_path / "out.json").read_text())
    result = payload["checkpoints"]["a"]["views"]
    assert set(result) == {"wp", "roc"}
    assert set(result["wp"]["per_kind"]) == set(breaks.KINDS) and set(result["wp"]["worst"]) == {"within", "auc"}
    assert result["wp"]["held_out_generator"] == modern_breaks.HELD_OUT_GENERATOR
    assert set(result["wp"]["generators"]) == {"gpt-4", modern_breaks.HELD_OUT_GENERATOR}
    assert payload["checkpoints"]["b"]["regressions_against_baseline"] == {}  # the same checkpoint holds against itself
    assert payload["checkpoints"]["b"]["chance_of_a_fall_if_equal"]["chance"] == 0.0  # and errs on no other story


def test_a_cut_is_measured_on_the_stories_that_reach_their_end_and_every_other_kind_on_the_view_sample(tmp_path):
    units = modern_breaks.Units(ANTONYMS, seed=3)
    stories = [(f"s{i}", f"g{i}", [f"Story {i} opens here.", *STORY[1:]]) for i in range(12)]
    for unit, group, sentences in stories:
        units.collect_foreign("test", "gpt-4", group, sentences)
    for i, (unit, group, sentences) in enumerate(stories):
        units.add("test", f"{unit}/roc", group, "gpt-4", "machine", "roc", sentences, reaches_end=i % 3 == 0)
    datasets.DatasetDict({"test": units.dataset()["test"]}).save_to_disk(str(tmp_path / "stories"))

    rows = benchmark.read_stories(tmp_path, "test", ["roc"], max_units=5, seed=42)
    intact = {r["unit"]: r["sides"] for r in rows if r["kind"] == "intact"}
    ending = {f"s{i}/roc" for i in range(0, 12, 3)}
    cut = {r["unit"] for r in rows if r["kind"] == "cut"}
    shared = {r["unit"] for r in rows if r["kind"] == "swap"}
    assert cut == ending and len(shared) == 5  # all four carriers (fewer than five); five of the twelve for the rest
    assert {u for u, sides in intact.items() if "cut" in sides} == ending
    assert {u for u, sides in intact.items() if "swap" in sides} == shared
    # the view's sample is the one drawn before a cut needed its story's end
    assert shared == set(__import__("random").Random(42).sample(sorted(f"s{i}/roc" for i in range(12)), 5))

    only_cut = benchmark.read_stories(tmp_path, "test", ["roc"], max_units=5, seed=42, kinds=("cut",))
    assert {r["kind"] for r in only_cut} == {"intact", "cut"} and {r["unit"] for r in only_cut} == ending
    score_of = {r["text"]: -r["words"] for r in rows}  # shorter is better: every cut copy wins within its pair
    assert benchmark.measure(only_cut, score_of)["per_kind"]["cut"]["within"] == 0.0


def test_a_revised_kind_takes_the_place_of_the_earlier_figures_and_the_worst_is_taken_again():
    def figures(within, auc):
        return {"within": within, "auc": auc, "pairs": 10, "across_comparisons": 5}

    earlier = {"roc": {"per_kind": {"cut": figures(0.3, 0.3), "swap": figures(0.6, 0.5)}, "worst": {"within": 0.3, "auc": 0.3},
                       "units": 150, "length_spearman": 0.1, "held_out_generator": "c",
                       "generators": {"c": {"per_kind": {"cut": figures(0.2, 0.2), "swap": figures(0.7, 0.6)},
                                            "worst": {"within": 0.2, "auc": 0.2}, "units": 50}}}}
    revised = {"roc": {"per_kind": {"cut": figures(0.9, 0.8)}, "generators": {"c": {"per_kind": {"cut": figures(0.95, 0.85)}}}}}
    merged = benchmark.with_kinds(earlier, revised)["roc"]
    assert merged["worst"] == {"within": 0.6, "auc": 0.5} and merged["revised_kinds"] == ["cut"]
    assert merged["generators"]["c"]["worst"] == {"within": 0.7, "auc": 0.6}
    assert benchmark.flat({"roc": merged})["roc/c/cut/auc"] == 0.85
    # a figure on fewer pairs or comparisons than --min-count is too thin for the no-regression rule to read
    thin = benchmark.flat({"roc": merged}, min_count=8)
    assert "roc/c/cut/within" in thin and "roc/c/cut/auc" not in thin and "roc/swap/auc" not in thin
    assert benchmark.with_kinds(earlier, {}) == earlier


def test_a_kinds_run_keeps_an_earlier_files_figures_for_the_kinds_it_did_not_measure(tmp_path, tiny_checkpoint, monkeypatch):
    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    check = saved_check(tmp_path / "check")
    # an experiment's run, in its log's folder; --earlier finds it by its bare name too (a recorded command's)
    benchmark.main(["--breaks-dir", str(check), "--checkpoint", f"a={tiny_checkpoint}", "--output", "modern_text/whole"])
    whole = json.loads((tmp_path / "experiments" / "modern_text" / "whole.json").read_text())["checkpoints"]["a"]["views"]
    benchmark.main(["--breaks-dir", str(check), "--checkpoint", f"a={tiny_checkpoint}", "--kinds", "cut",
                    "--earlier", "whole", "--output", "revised"])
    revised = json.loads((tmp_path / "revised.json").read_text())["checkpoints"]["a"]
    assert revised["measured_now"] == {"roc": ["cut"], "wp": ["cut"]}
    assert {view: r["per_kind"] for view, r in revised["views"].items()} == {view: r["per_kind"] for view, r in whole.items()}
    with pytest.raises(SystemExit):
        benchmark.main(["--breaks-dir", str(check), "--checkpoint", f"a={tiny_checkpoint}", "--earlier", "nope"])
    # a candidate against a row measured before: the same checkpoint falls nowhere
    benchmark.main(["--breaks-dir", str(check), "--checkpoint", f"b={tiny_checkpoint}", "--earlier", "modern_text/whole", "--baseline", "a",
                    "--output", "against"])
    assert json.loads((tmp_path / "against.json").read_text())["checkpoints"]["b"]["regressions_against_baseline"] == {}


@pytest.mark.parametrize("argv, message", [
    (["--baseline", "nope"], "--baseline nope: not one of the labels"),
    (["--max-units-per-view", "0"], "--max-units-per-view must be positive"),
    (["--min-count", "-1"], "--min-count must not be negative"),
    (["--suite", "sq"], "--suite expects label=config[:combination]"),
])
def test_the_benchmark_refuses_bad_options_before_scoring(tmp_path, tiny_checkpoint, capsys, argv, message):
    with pytest.raises(SystemExit):
        benchmark.main(["--breaks-dir", str(tmp_path), "--checkpoint", f"a={tiny_checkpoint}", *argv])
    assert message in capsys.readouterr().err


def test_the_across_story_loss_orders_intact_stories_above_other_stories_copies_only_among_marked_pairs():
    import torch

    from storyeval_training.recipes import train_ranker

    higher, lower = torch.tensor([2.0, 0.0, 5.0]), torch.tensor([1.0, -1.0, -5.0])
    across = torch.tensor([True, True, False])
    expected = (torch.nn.functional.softplus(-torch.tensor(2.0 - -1.0)) + torch.nn.functional.softplus(-torch.tensor(0.0 - 1.0))) / 2
    assert train_ranker.across_story_loss(higher, lower, across).item() == pytest.approx(expected.item())
    assert train_ranker.across_story_loss(higher, lower, torch.tensor([True, False, False])).item() == 0.0


def test_the_length_term_penalises_ranking_pairs_by_length_and_nothing_else(tiny_checkpoint):
    import torch

    from storyeval.scoring.sequence import load_story_classifier
    from storyeval_training.recipes import train_ranker

    longer_by = torch.tensor([5, -3, 8, -1])  # cut pairs: the higher story is longer; insert pairs: shorter
    assert train_ranker.length_correlation(0.5 * longer_by.float(), longer_by).item() == pytest.approx(1.0)
    assert train_ranker.length_correlation(torch.tensor([1.0, 2.0, 1.0, 2.0]), torch.tensor([1, 1, -1, -1])).item() == pytest.approx(0.0)
    assert train_ranker.length_correlation(torch.ones(4), longer_by).item() == 0.0  # no spread: no correlation, no NaN
    assert train_ranker.length_correlation(torch.tensor([1.0, 2.0]), torch.tensor([1, 2])).item() == 0.0
    # in the loss: W times the squared correlation of the batch's margins with the token counts' differences
    model = load_story_classifier(tiny_checkpoint).model
    ids = torch.tensor([[101, 2000, 2001, 2002, 102], [101, 2003, 102, 0, 0], [101, 2004, 2005, 102, 0],
                        [101, 2006, 102, 0, 0], [101, 2007, 2008, 2009, 102], [101, 2010, 2011, 102, 0]])
    mask = (ids != 0).long()
    plain = train_ranker.PairwiseRanker(model)(ids, mask)
    weighed = train_ranker.PairwiseRanker(model, length_weight=2.0)(ids, mask)
    tokens = mask.sum(dim=1)
    expected = 2.0 * train_ranker.length_correlation(plain.margins, tokens[:3] - tokens[3:]).pow(2)
    assert (weighed.loss - plain.loss).item() == pytest.approx(expected.item(), abs=1e-6)


def tiny_ranker_run(tmp_path, kind_names, steps, *extra):
    """A ranker run's argv on a tiny start checkpoint and two small kinds (four validation pairs each), and the start's
    folder and the kinds' folders: what the ranker-run tests below share; ``extra``: their own options."""
    from conftest import save_tiny_checkpoint
    from test_wp_kinds import kind_folder

    start = save_tiny_checkpoint(tmp_path / "start", max_length=32, window_stride=16)
    kinds = {name: kind_folder(tmp_path / name, validation=4) for name in kind_names}
    argv = [*[arg for name, folder in kinds.items() for arg in ("--pairs", f"{name}={folder}")], "--model-name-or-path", str(start),
            "--max-length", "32", "--max-train-pairs-per-kind", "4", "--max-train-steps", str(steps), "--eval-steps", "2",
            "--per-device-train-batch-size", "2", *extra]
    return argv, start, kinds


def test_a_ranker_with_across_story_kinds_selects_on_the_worst_of_accuracies_and_aucs(tmp_path):
    from storyeval_training.recipes import train_ranker

    argv, _, _ = tiny_ranker_run(tmp_path, ("origin", "wp-swap"), 4, "--across-story-kinds", "wp-swap", "--across-story-weight", "0.5",
                                 "--max-train-pairs", "origin=6", "--output-dir", str(tmp_path / "run"))
    results = train_ranker.train(train_ranker.parse_args(argv))
    assert results["selected_by"] == "worst_kind_measure"
    assert {name: counts["train"] for name, counts in results["pairs_per_kind"].items()} == {"origin": 6, "wp-swap": 4}
    for metrics in results["history"]:
        assert "across_story_auc_wp-swap" in metrics and "across_story_auc_origin" not in metrics
        assert metrics["worst_kind_measure"] == min(metrics["pair_accuracy_origin"], metrics["pair_accuracy_wp-swap"],
                                                    metrics["across_story_auc_wp-swap"])


@pytest.mark.parametrize("argv, message", [
    (["--across-story-kinds", "nope"], "--across-story-kinds nope: not a --pairs kind"),
    (["--across-story-weight", "1"], "needs --across-story-kinds"),
    (["--raw-kinds", "nope"], "--raw-kinds nope: not a --pairs kind"),
    (["--validation-techniques", "nope=machine"], "no --pairs set is named 'nope'"),
    (["--validation-techniques", "a"], "expected NAME=T1,T2"),
    (["--max-train-pairs", "a=0"], "--max-train-pairs a=0: expected a positive whole number"),
    (["--max-train-pairs", "b=5"], "no --pairs set is named 'b'"),
    (["--length-decorrelation-weight", "-1"], "--length-decorrelation-weight must not be negative"),
])
def test_across_story_options_name_what_is_wrong(tmp_path, capsys, argv, message):
    from test_wp_kinds import kind_folder

    from storyeval_training.recipes import train_ranker

    good = kind_folder(tmp_path / "good")
    with pytest.raises(SystemExit):
        train_ranker.parse_args(["--pairs", f"a={good}", "--output-dir", str(tmp_path / "run"), *argv])
    assert message in capsys.readouterr().err


def test_validation_techniques_narrow_selection_to_the_pairs_the_check_tests_and_refuse_a_kind_left_empty(tmp_path):
    from test_wp_kinds import kind_folder

    from storyeval_training.recipes import train_ranker

    folder = kind_folder(tmp_path / "mixed", validation=4)
    pairs = datasets.load_from_disk(str(folder))
    tags = [["swap", "human"], ["swap", "machine"], ["swap", "human"], ["swap", "machine"]]
    pairs["validation"] = pairs["validation"].remove_columns("techniques").add_column("techniques", tags)
    pairs.save_to_disk(str(tmp_path / "tagged"))
    argv = ["--pairs", f"a={tmp_path / 'tagged'}", "--output-dir", str(tmp_path / "run")]
    kinds = train_ranker.load_kinds(train_ranker.parse_args([*argv, "--validation-techniques", "a=machine"]))
    assert kinds["a"]["validation"]["id"] == ["101", "103"] and len(kinds["a"]["train"]) == 6  # training pairs untouched
    with pytest.raises(ValueError, match=r"a \(validation, --validation-techniques a=nobody\)"):
        train_ranker.load_kinds(train_ranker.parse_args([*argv, "--validation-techniques", "a=nobody"]))
    for bad in (["--validation-techniques", "a=nobody"], ["--pairs", f"b={tmp_path / 'none'}"]):  # as a user meets them: one line
        with pytest.raises(SystemExit) as stopped:
            train_ranker.main([*argv, *bad])
        assert str(stopped.value.code).startswith("error: ")
    assert not (tmp_path / "run").exists()


def test_explain_cases_from_the_check_target_both_sentences_of_a_swap_and_both_copies_of_a_repeat(tmp_path):
    from benchmarks.agreement.explain_hit_rate import break_cases

    check = saved_check(tmp_path / "check")
    cases = break_cases(check, "roc", per_kind=2, seed=0)
    assert {c["kind"] for c in cases} == set(breaks.KINDS) - {"shuffle"}  # no one sentence to blame
    for case in cases:
        assert case["targets"] and all(1 <= t < len(case["sentences"]) for t in case["targets"])
        if case["kind"] in ("swap", "repeat"):
            assert len(case["targets"]) == 2
        if case["kind"] == "triple":
            assert len(case["targets"]) == 3


@pytest.mark.parametrize("folder, argv, message", [
    ("new", ["--max-human-stories", "-1"], "--max-human-stories must not be negative"),
    ("new", ["--max-human-test-stories", "-2"], "--max-human-test-stories must not be negative"),
    (".", [], "exists: choose a new folder"),
])
def test_the_builder_refuses_bad_options_before_reading_anything(tmp_path, capsys, folder, argv, message):
    with pytest.raises(SystemExit):
        modern_breaks.parse_args(["--output-dir", str(tmp_path / folder), *argv])
    assert message in capsys.readouterr().err


def test_explain_names_a_breaks_folder_that_is_not_a_check(tmp_path, capsys):
    from benchmarks.agreement import explain_hit_rate

    with pytest.raises(SystemExit):
        explain_hit_rate.main(["--breaks-dir", str(tmp_path)])
    assert "no stories/ (a modern_breaks output folder)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--suite", "s=wp-base"], "no stories/ (a modern_breaks output folder holds"),
    (["--suite", "s=nope"], "unknown story_quality config 'nope'"),
    (["--suite", "s=roc-base:median"], "unknown combination 'median'"),
    (["--suite", "s=roc:learned"], "story_quality config 'roc' has no learned weights"),
    (["--suite", "s=roc", "--suite", "s=wp"], "--suite label 's' is given twice"),
])
def test_the_check_benchmark_names_a_folder_that_is_not_a_check_or_an_unknown_suite(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stopped:
        benchmark.main(["--breaks-dir", str(tmp_path), *argv])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_raw_kinds_are_normalised_as_scoring_normalises_and_the_builders_pairs_are_left_as_they_are():
    from storyeval.text import normalize_story
    from storyeval_training.recipes import train_ranker

    raw = datasets.Dataset.from_dict({"human": ['Tom said "hello." He left.'], "negative": ['Tom said "bye." He left.']})
    out = train_ranker.normalised(raw, delexicalize=True)[0]
    assert out["human"] == normalize_story('Tom said "hello." He left.') and out["human"].startswith("[MALE] said ``")
    # why only raw kinds: a normalised closing quote read again turns into an opening one
    assert normalize_story(out["human"]) != out["human"]


def test_the_no_regression_rule_makes_an_evaluation_that_gave_up_a_kind_ineligible():
    from storyeval_training.recipes.train_ranker import KIND_MEASURES
    from storyeval_training.selection import with_rule

    start = {"pair_accuracy_a": 0.80, "pair_accuracy_b": 0.50, "across_story_auc_b": 0.40, "worst_kind_measure": 0.40, "loss": 0.6}
    lifted = {"pair_accuracy_a": 0.78, "pair_accuracy_b": 0.60, "across_story_auc_b": 0.55, "worst_kind_measure": 0.55, "loss": 0.5}
    kept = with_rule(lifted, start, "worst_kind_measure", KIND_MEASURES)
    assert kept["regressions_from_start"] == {} and kept["worst_measure_without_regression"] == 0.55  # a fall of 0.02 is allowed
    gave_up = with_rule({**lifted, "pair_accuracy_a": 0.70}, start, "worst_kind_measure", KIND_MEASURES)
    assert gave_up["regressions_from_start"] == {"pair_accuracy_a": 0.1} and gave_up["worst_measure_without_regression"] == -1.0


def test_pairs_over_the_window_are_refused_or_with_skip_over_length_left_out_and_counted(tmp_path):
    from conftest import save_tiny_checkpoint

    from storyeval_training.data.build_negatives import PAIR_FEATURES
    from storyeval_training.recipes import train_ranker

    def pairs(lengths):
        return {name: [row[name] for row in ({"id": str(i), "context": "", "human": "word " * n, "negative": "other " * n,
                                              "original": "", "techniques": ["x"]} for i, n in enumerate(lengths))]
                for name in PAIR_FEATURES}

    folder = tmp_path / "kind"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(pairs([3, 3, 40, 3, 40, 3]), features=PAIR_FEATURES),
                          "validation": datasets.Dataset.from_dict(pairs([3, 40, 3]), features=PAIR_FEATURES)}).save_to_disk(str(folder))
    start = save_tiny_checkpoint(tmp_path / "start", max_length=32, window_stride=16)
    argv = ["--pairs", f"a={folder}", "--model-name-or-path", str(start), "--max-length", "16", "--max-train-steps", "1",
            "--per-device-train-batch-size", "2", "--output-dir", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as refused:  # one line naming the way out, and no run folder written
        train_ranker.main(argv)
    assert str(refused.value.code) == ("error: --pairs a (train): 2 of 6 pairs have a story over --max-length 16 (longest 42 "
                                       "tokens): raise --max-length within the model's window, or give --skip-over-length to "
                                       "leave them out")
    assert not (tmp_path / "run").exists()
    results = train_ranker.train(train_ranker.parse_args([*argv, "--skip-over-length", "--output-dir", str(tmp_path / "run2")]))
    assert results["pairs_per_kind"]["a"] == {"train": 4, "validation": 2, "over_length": {"train": 2, "validation": 1}}
    long_only = tmp_path / "long"
    datasets.DatasetDict({split: datasets.Dataset.from_dict(pairs([40, 40]), features=PAIR_FEATURES)
                          for split in ("train", "validation")}).save_to_disk(str(long_only))
    with pytest.raises(ValueError, match=r"--pairs a \(train\): every pair has a story over --max-length 16: nothing left to train on"):
        train_ranker.train(train_ranker.parse_args([*argv[:1], f"a={long_only}", *argv[2:], "--skip-over-length",
                                                    "--output-dir", str(tmp_path / "run3")]))


def test_a_ranker_run_under_the_no_regression_rule_measures_the_start_first_and_resumes_with_it(tmp_path):
    from storyeval_training.recipes import train_ranker
    from storyeval_training.selection import with_rule

    argv, _, _ = tiny_ranker_run(tmp_path, ("origin", "wp-swap"), 4, "--checkpointing-steps", "2", "--across-story-kinds", "wp-swap",
                                 "--no-regression", "--output-dir", str(tmp_path / "run"), "--export-dir", str(tmp_path / "export"))
    results = train_ranker.train(train_ranker.parse_args([*argv, "--stop-after-steps", "2"]))
    first_start = json.loads((tmp_path / "run" / "start_validation.json").read_text())
    assert results["selected_by"] == "worst_measure_without_regression" and results["start_validation"] == first_start
    for metrics in results["history"]:
        rule = with_rule(metrics, first_start, "worst_kind_measure", train_ranker.KIND_MEASURES)
        assert metrics["worst_measure_without_regression"] == rule["worst_measure_without_regression"]
    assert results["beats_start"] == (results["best_validation"]["worst_measure_without_regression"] > first_start["worst_kind_measure"])
    assert (tmp_path / "export").exists() == results["beats_start"]
    # resumed: the start is read back, not measured again on weights that have trained
    (tmp_path / "run" / "start_validation.json").write_text(json.dumps({**first_start, "marker": 1}))
    resumed = train_ranker.train(train_ranker.parse_args([*argv, "--resume-from-checkpoint", "latest"]))
    assert resumed["start_validation"]["marker"] == 1 and resumed["completed_steps"] == 4


def test_a_suite_is_measured_by_its_default_combination_or_the_one_named():
    from benchmarks.agreement.story_scores import parse_suites

    assert parse_suites(["sq=roc-base", "mean=roc-base:mean", "fit=wp-base:learned", "d=default"]) == {
        "sq": ("roc-base", None), "mean": ("roc-base", "mean"), "fit": ("wp-base", "learned"), "d": ("roc-base", None)}  # the suite's default


def test_the_anchor_loss_keeps_anchored_stories_near_the_starting_logits_and_ignores_the_others(tiny_checkpoint):
    import torch

    from storyeval.scoring.sequence import load_story_classifier
    from storyeval_training.recipes import train_ranker

    model = load_story_classifier(tiny_checkpoint).model
    ids = torch.tensor([[101, 2000, 102], [101, 2001, 102], [101, 2002, 102], [101, 2003, 102]])
    mask = torch.ones_like(ids)
    logits = model(input_ids=ids, attention_mask=mask).logits.float().detach()
    plain = train_ranker.PairwiseRanker(model)(ids, mask).loss.item()
    ranker = train_ranker.PairwiseRanker(model, anchor_weight=2.0)
    assert ranker(ids, mask, anchor=logits.clone()).loss.item() == pytest.approx(plain)  # at the start: nothing added
    assert ranker(ids, mask, anchor=torch.full((4,), float("nan"))).loss.item() == pytest.approx(plain)  # no pair anchored
    moved = logits.clone()
    moved[0] += 1.0  # one anchored story one logit away; the other pair's stories not anchored
    moved[[1, 3]] = float("nan")
    assert ranker(ids, mask, anchor=moved).loss.item() == pytest.approx(plain + 2.0 * 1.0 / 2)


def test_a_ranker_run_with_anchor_kinds_anchors_their_training_stories_to_the_start(tmp_path, monkeypatch):
    from storyeval.scoring.sequence import load_story_classifier
    from storyeval_training.recipes import train_ranker

    argv, start, kinds = tiny_ranker_run(tmp_path, ("union", "wp-cut"), 2, "--anchor-kinds", "union", "--anchor-weight", "1.0",
                                         "--output-dir", str(tmp_path / "run"))
    seen = {}
    real = train_ranker.anchor_logits

    def recording(model, rows, *args):
        seen["rows"], seen["logits"] = len(rows), real(model, rows, *args)
        return seen["logits"]

    monkeypatch.setattr(train_ranker, "anchor_logits", recording)
    args = train_ranker.parse_args(argv)
    results = train_ranker.train(args)
    assert seen["rows"] == 4 and results["completed_steps"] == 2  # the union kind's four training pairs, none of wp-cut's
    # they are the start's own logits of those stories, each scored alone
    from transformers import AutoTokenizer

    model, tokenizer = load_story_classifier(start).model, AutoTokenizer.from_pretrained(start)
    stories = train_ranker.sample(datasets.load_from_disk(str(kinds["union"]))["train"], 4, args.seed)["human"]
    alone = [model(**tokenizer(story, return_tensors="pt")).logits.float().item() for story in stories]
    assert seen["logits"]["human_anchor"] == pytest.approx(alone, abs=1e-4)


def test_intact_anchors_keep_the_higher_story_only_and_other_kinds_stay_free():
    import math

    from storyeval_training.recipes import train_ranker

    kind_of = [0, 1, 2, 1]  # kind 0 anchored both ways, 1 on its intact side only, 2 not anchored
    found = {"human_anchor": [0.5, 1.5, 2.5], "negative_anchor": [-0.5, -1.5, -2.5]}
    columns = train_ranker.anchor_columns(kind_of, [0, 1, 3], found, intact_only={1})
    assert columns["human_anchor"][:2] == [0.5, 1.5] and columns["human_anchor"][3] == 2.5
    assert columns["negative_anchor"][0] == -0.5
    assert all(math.isnan(columns["negative_anchor"][i]) for i in (1, 2, 3)) and math.isnan(columns["human_anchor"][2])


def test_a_ranker_run_with_intact_anchors_trains(tmp_path):
    from storyeval_training.recipes import train_ranker

    argv, _, _ = tiny_ranker_run(tmp_path, ("union", "wp-cut"), 2, "--anchor-kinds", "union", "--anchor-intact-kinds", "wp-cut",
                                 "--anchor-weight", "1.0", "--output-dir", str(tmp_path / "run"))
    assert train_ranker.train(train_ranker.parse_args(argv))["completed_steps"] == 2


@pytest.mark.parametrize("extra, message", [
    (["--anchor-kinds", "nope", "--anchor-weight", "1"], "--anchor-kinds nope: not a --pairs kind"),
    (["--anchor-intact-kinds", "nope", "--anchor-weight", "1"], "--anchor-intact-kinds nope: not a --pairs kind"),
    (["--anchor-intact-kinds", "a"], "give it with --anchor-kinds or --anchor-intact-kinds"),
    (["--anchor-kinds", "a", "--anchor-intact-kinds", "a", "--anchor-weight", "1"], "both name a"),
    (["--anchor-kinds", "a"], "give it with --anchor-kinds"),
    (["--anchor-weight", "1"], "give it with --anchor-kinds"),
    (["--anchor-kinds", "a", "--anchor-weight", "-1"], "must not be negative"),
])
def test_anchor_options_are_checked(tmp_path, capsys, extra, message):
    from storyeval_training.recipes import train_ranker

    with pytest.raises(SystemExit):
        train_ranker.parse_args(["--pairs", f"a={tmp_path}", "--output-dir", str(tmp_path / "run"), *extra])
    assert message in capsys.readouterr().err


def fitted_report(tmp_path, tiny_checkpoint, weights):
    """A fit_suite report of ``roc`` whose fit with an added part weighs two copies of the tiny checkpoint."""
    import shutil

    from storyeval.analysis import percentiles

    folders = {name: tmp_path / name for name in ("first", "second")}
    for name, folder in folders.items():
        shutil.copytree(tiny_checkpoint, folder)
        entry = percentiles.build_reference("union", "roc", {"score": [i / 50 - 1 for i in range(100)]},
                                            {"builder": "ROCStories", "split": "test", "items": 100})
        percentiles.write_reference(folder, "union", {"roc": entry}, {"commit": "abc1234"})
    parts = [f"union:{folders['first']}", "continuation_quality:deltascore", f"second=union:{folders['second']}"]
    report = {"config": "roc", "fits": {"own": {"parts": parts[:2], "without_contexts": {"weights": {"union": 1.0}}},
                                        "with_added": {"parts": parts, "without_contexts": {"weights": weights}}}}
    (tmp_path / "fit.json").write_text(json.dumps(report))
    return tmp_path / "fit.json"


def test_a_fitted_suite_is_its_parts_percentiles_weighted_as_the_report_fitted_them(tmp_path, tiny_checkpoint):
    from benchmarks.agreement.story_scores import StoryScores, parse_fitted_suites
    from storyeval.analysis.percentiles import load_reference
    from storyeval.scoring.sequence import load_story_classifier

    report = fitted_report(tmp_path, tiny_checkpoint, {"union": 0.25, "second": 0.75})
    entry = parse_fitted_suites([f"cand={report}"])["cand"]
    assert [part.name for part in entry["parts"]] == ["union", "second"]  # continuation quality weighs nothing on whole stories
    stories = ["[MALE] went to the store . he bought milk .", "she sat down . the dog barked at the mailman ."]
    combined, fields = StoryScores(stories, 4, progress_bar=False).fitted_suite(entry)
    percentile = load_reference(tmp_path / "first", "roc").percentile(load_story_classifier(str(tmp_path / "first")).score(stories))
    assert [combined[s] for s in stories] == pytest.approx(percentile)  # both parts are the same model: any weights give its percentile
    assert fields["combination"] == "fitted" and fields["weights"] == {"union": 0.25, "second": 0.75}
    assert all(not part.split(":", 1)[1].startswith(str(tmp_path)) for part in fields["parts"])  # no path of this machine


@pytest.mark.parametrize("value, message", [
    ("cand", "--fitted-suite expects label=report"),
    ("cand=/nowhere/fit.json", "no report at /nowhere/fit.json"),
    ("a=REPORT", "--fitted-suite label 'a' is given twice"),
    ("b=NOT_A_REPORT", "is not a fit_suite report"),
])
def test_a_fitted_suite_that_cannot_be_measured_is_refused_before_scoring(tmp_path, tiny_checkpoint, capsys, value, message):
    report = fitted_report(tmp_path, tiny_checkpoint, {"union": 0.5, "second": 0.5})
    (tmp_path / "other.json").write_text(json.dumps({"config": "roc", "fits": {}}))
    value = value.replace("NOT_A_REPORT", str(tmp_path / "other.json")).replace("REPORT", str(report))
    with pytest.raises(SystemExit) as stopped:
        benchmark.main(["--breaks-dir", str(tmp_path), "--checkpoint", f"a={tiny_checkpoint}", "--fitted-suite", value])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_a_fitted_suite_is_a_row_of_the_check_beside_the_checkpoints(tmp_path, tiny_checkpoint, monkeypatch):
    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    report = fitted_report(tmp_path, tiny_checkpoint, {"union": 0.5, "second": 0.5})
    benchmark.main(["--breaks-dir", str(saved_check(tmp_path / "check")), "--checkpoint", f"a={tiny_checkpoint}",
                    "--fitted-suite", f"cand={report}", "--baseline", "a", "--output", "out"])
    row = json.loads((tmp_path / "out.json").read_text())["checkpoints"]["cand"]
    assert row["combination"] == "fitted" and set(row["views"]) == {"wp", "roc"} and "regressions_against_baseline" in row


def test_a_fitted_suites_human_rows_are_its_combined_score_on_its_corpus_sets_only(tmp_path, tiny_checkpoint, monkeypatch):
    import numpy as np

    from benchmarks.agreement import story_quality_correlation as sqc
    from benchmarks.agreement.story_scores import parse_fitted_suites

    stories = ["[MALE] went to the store . he bought milk .", "she sat down . the dog barked .", "it rained . we stayed in ."]
    monkeypatch.setattr(sqc, "story_sets", lambda: {"union_roc": ("roc", stories, np.array([3.0, 1.0, 2.0])),
                                                    "union_wp": ("wp", stories, np.array([1.0, 2.0, 3.0]))})
    fitted = parse_fitted_suites([f"cand={fitted_report(tmp_path, tiny_checkpoint, {'union': 0.5, 'second': 0.5})}"])
    rows = sqc.fitted_rows(fitted, batch_size=4)
    assert set(rows["cand"]["sets"]) == {"union_roc"}  # a roc suite on the roc sets only
    assert rows["cand"]["sets"]["union_roc"]["n"] == 3 and "spearman" in rows["cand"]["sets"]["union_roc"]["correlations"]["combined_fitted"]


def test_a_fall_comes_with_a_paired_interval_that_reaches_zero_when_the_stories_drawn_could_make_it():
    rows = []
    for i in range(40):
        unit = f"s{i}"
        rows.append({"unit": unit, "view": "roc", "generator": "gpt-4", "kind": "intact", "text": f"{unit}-intact",
                     "words": 100, "group": f"g{i}", "sides": ["swap"]})
        rows.append({"unit": unit, "view": "roc", "generator": "gpt-4", "kind": "swap", "text": f"{unit}-swap",
                     "words": 100, "group": f"g{i}"})
    # the baseline misses stories 30-32, the candidate 0, 10, 20 and 30: one story more of 40 (a fall of 0.025, which the
    # rule names) that the draw of stories can make; a candidate that misses every story falls beyond any draw
    def missing(units):
        return {r["text"]: float((r["kind"] == "intact") != (int(r["unit"][1:]) in units)) for r in rows}

    baseline, candidate, every = missing({30, 31, 32}), missing({0, 10, 20, 30}), missing(set(range(40)))
    low, high = benchmark.difference_interval(rows, candidate, baseline, "roc/swap/within")
    assert low < -0.025 < 0.0 < high
    assert benchmark.difference_interval(rows, every, baseline, "roc/swap/within")[1] < -0.8
    low, high = benchmark.difference_interval(rows, every, baseline, "roc/gpt-4/swap/auc")
    assert high < -0.7  # the baseline wins about 0.85 of the comparisons, this candidate none
    assert benchmark.difference_interval(rows, baseline, baseline, "roc/swap/auc") == [0.0, 0.0]
    with pytest.raises(ValueError, match="no pairs"):
        benchmark.difference_interval(rows, baseline, baseline, "roc/cut/within")
    # a story with no copy of the kind (no sentence to move, say) is still an intact side across stories, as measure()
    # counts it: the interval is of the figures' own difference
    rows = [r for r in rows if r["text"] != "s0-swap"]
    for measure_name in ("within", "auc"):
        observed = (benchmark.measure(rows, candidate)["per_kind"]["swap"][measure_name]
                    - benchmark.measure(rows, baseline)["per_kind"]["swap"][measure_name])
        low, high = benchmark.difference_interval(rows, candidate, baseline, f"roc/swap/{measure_name}")
        assert low <= observed <= high
    # only s0's intact story moves, below every copy: it has no copy, so within pairs nothing changes, across stories it
    # loses every comparison it won
    sunk = {**baseline, "s0-intact": -1.0}
    assert benchmark.difference_interval(rows, sunk, baseline, "roc/swap/within") == [0.0, 0.0]
    assert benchmark.difference_interval(rows, sunk, baseline, "roc/swap/auc")[0] < 0.0


def test_the_chance_of_a_fall_for_an_equal_candidate_grows_with_how_differently_it_errs_and_with_fewer_stories():
    import numpy as np

    def check(stories):
        rows = []
        for i in range(stories):
            unit, words = f"s{i}", 100 + i % 3
            rows.append({"unit": unit, "view": "roc", "generator": "gpt-4" if i % 2 else "claude-instant", "kind": "intact",
                         "text": f"{unit}-intact", "words": words, "group": f"g{i}", "sides": ["swap"]})
            rows.append({"unit": unit, "view": "roc", "generator": rows[-1]["generator"], "kind": "swap", "text": f"{unit}-swap",
                         "words": words, "group": f"g{i}"})
        return rows

    def noisy(rows, seed):  # intact stories a little above their copies, each checkpoint erring on its own stories
        rng = np.random.default_rng(seed)
        return {r["text"]: float(rng.normal(0.3 if r["kind"] == "intact" else 0.0, 1.0)) for r in rows}

    keys = ["roc/swap/within", "roc/swap/auc", "roc/claude-instant/swap/within", "roc/claude-instant/swap/auc"]
    few, many = check(40), check(400)

    def chance(rows, first, second, chosen=keys, **options):
        return benchmark.chance_of_a_fall(rows, noisy(rows, first), noisy(rows, second), chosen, resamples=200, **options)

    assert chance(few, 0, 0) == {"chance": 0.0, "tolerance_for_5_percent": 0.0, "figures": 4, "draws": 200}  # the same scores
    assert chance(many, 1, 2, keys[:1])["chance"] < chance(many, 1, 2)["chance"]  # more figures, more falls
    assert chance(few, 1, 2)["chance"] > 0.5  # 40 stories: mostly noise
    needed = chance(few, 1, 2)["tolerance_for_5_percent"]
    assert chance(many, 1, 2)["tolerance_for_5_percent"] < needed  # ten times the stories: a narrower tolerance will do
    assert chance(few, 1, 2, tolerance=needed)["chance"] == pytest.approx(0.05, abs=0.01)


def test_shuffled_copies_are_seeded_by_the_text_keep_every_sentence_and_never_the_texts_own_order():
    from benchmarks.agreement.self_contrast import shuffled_copies
    from storyeval.text import split_sentences

    text = " ".join(STORY)
    copies = shuffled_copies(text)
    assert copies == shuffled_copies(text) and len(copies) == 4
    assert all(copy != text and sorted(split_sentences(copy)) == sorted(STORY) for copy in copies)
    assert shuffled_copies("One. Two.") == ["Two. One."] * 4  # the only other order
    with pytest.raises(ValueError, match="1 sentence"):
        shuffled_copies("Only one sentence here.")


def test_self_contrast_is_the_logit_less_the_weighted_mean_logit_of_the_copies_clipped_at_0_and_1():
    from benchmarks.agreement.self_contrast import CLIP, contrasted, logit

    assert contrasted(0.5, [0.5, 0.5], 1.0) == 0.0
    assert contrasted(0.9, [0.5, 0.1], 1.0) == pytest.approx(logit(0.9) - (logit(0.5) + logit(0.1)) / 2)
    assert contrasted(0.9, [0.1], 0.5) == pytest.approx(logit(0.9) - 0.5 * logit(0.1))
    assert contrasted(1.0, [0.0], 1.0) == pytest.approx(2 * logit(1 - CLIP))  # exact 0 and 1 stay finite


def test_a_self_contrast_row_is_measured_beside_its_plain_checkpoint_and_its_copies_scored_once(tmp_path, tiny_checkpoint, monkeypatch):
    from benchmarks import common
    from storyeval.scoring.sequence import SequenceScorer

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    scored, real_score = [], SequenceScorer.score
    monkeypatch.setattr(SequenceScorer, "score", lambda self, texts, **kw: scored.append(len(texts)) or real_score(self, texts, **kw))
    benchmark.main(["--breaks-dir", str(saved_check(tmp_path / "check")), "--checkpoint", f"a={tiny_checkpoint}",
                    "--self-contrast", f"c1={tiny_checkpoint}:1", "--self-contrast", f"c05={tiny_checkpoint}:0.5",
                    "--baseline", "a", "--output", "out"])
    rows = json.loads((tmp_path / "out.json").read_text())["checkpoints"]
    assert rows["c05"]["self_contrast"] == {"copies": 4, "weight": 0.5} and set(rows["c1"]["views"]) == {"wp", "roc"}
    assert "regressions_against_baseline" in rows["c1"] and "above_own_shuffles" not in rows["a"]
    shuffles = rows["c05"]["above_own_shuffles"]  # of the story's margin over its shuffles, whatever the weight
    assert shuffles == rows["c1"]["above_own_shuffles"] and set(shuffles) == {"wp", "roc"} and shuffles["wp"]["stories"] == 4
    assert len(scored) == 2  # the stories once and their copies once, for all three rows


@pytest.mark.parametrize("argv, message", [
    (["--self-contrast", "c=somewhere"], "expects label=folder:weight"),
    (["--self-contrast", "c=somewhere:2"], "expects label=folder:weight with 0 < weight <= 1"),
    (["--self-contrast", "c=somewhere:0.5"], "--self-contrast c=somewhere: no checkpoint there"),
])
def test_self_contrast_options_are_refused_before_scoring(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stopped:
        benchmark.main(["--breaks-dir", str(tmp_path), *argv])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("other", [["--checkpoint", "a={}"], ["--suite", "a=roc"], ["--self-contrast", "a={}:0.5"]])
def test_a_self_contrast_label_may_not_repeat_another_rows(tmp_path, tiny_checkpoint, capsys, other):
    with pytest.raises(SystemExit):
        benchmark.main(["--breaks-dir", str(tmp_path), other[0], other[1].format(tiny_checkpoint),
                        "--self-contrast", f"a={tiny_checkpoint}:1"])
    assert "each row needs its own label" in capsys.readouterr().err


@pytest.mark.parametrize("option, field, target", [("--ending", "ending", "half"), ("--neighbours", "neighbours", "insert"),
                                                    ("--opening-ending", "opening_ending", "half"), ("--runs", "runs", "shuffle")])
def test_a_mix_row_scores_each_checkpoint_once_whatever_the_weight(tmp_path, tiny_checkpoint, monkeypatch, option, field, target):
    from benchmarks import common
    from storyeval.scoring.sequence import SequenceScorer

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    scored, real_score = [], SequenceScorer.score_checked  # every scoring call ends there, stories and parts alike
    monkeypatch.setattr(SequenceScorer, "score_checked", lambda self, texts, *a, **kw: scored.append(len(texts)) or real_score(self, texts, *a, **kw))
    benchmark.main(["--breaks-dir", str(saved_check(tmp_path / "check")), "--checkpoint", f"a={tiny_checkpoint}",
                    option, f"m1={tiny_checkpoint}+{tiny_checkpoint}:0.1", option, f"m5={tiny_checkpoint}+{tiny_checkpoint}:0.5",
                    option, f"q={tiny_checkpoint}+{tiny_checkpoint}:0.5", "--part-lowest-share", "q=0.25",
                    "--baseline", "a", "--targets", target, "--output", "out"])
    rows = json.loads((tmp_path / "out.json").read_text())["checkpoints"]
    assert rows["m5"][field]["weight"] == 0.5 and rows["m5"][field].get("last_sentences", 2) == 2
    assert "lowest_share" not in rows["m5"][field] and rows["q"][field]["lowest_share"] == 0.25
    assert "ship_rule" in rows["m1"] and set(rows["m1"]["views"]) == {"wp", "roc"}
    assert len(scored) == 2  # the stories once and their last sentences (or neighbouring pairs) once, for all four rows


@pytest.mark.parametrize("option, field, read", [("--ending", "ending", "last_sentences"), ("--runs", "runs", "sentences")])
def test_a_mix_rows_part_reads_the_sentences_part_sentences_names(tmp_path, tiny_checkpoint, monkeypatch, option, field, read):
    from benchmarks import common
    from storyeval.scoring.sequence import SequenceScorer

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    scored, real_score = [], SequenceScorer.score_checked
    monkeypatch.setattr(SequenceScorer, "score_checked", lambda self, texts, *a, **kw: scored.append(list(texts)) or real_score(self, texts, *a, **kw))
    benchmark.main(["--breaks-dir", str(saved_check(tmp_path / "check")), option, f"own={tiny_checkpoint}+{tiny_checkpoint}:0.3",
                    option, f"three={tiny_checkpoint}+{tiny_checkpoint}:0.3", "--part-sentences", "three=3", "--output", "out"])
    rows = json.loads((tmp_path / "out.json").read_text())["checkpoints"]
    assert rows["three"][field][read] == 3 and rows["own"][field].get(read, 2) != 3
    assert len(scored) == 3  # the stories once, and each count's parts once: two sets of texts
    assert scored[1] != scored[2] and max(len(t) for t in scored[2]) != max(len(t) for t in scored[1])
    assert rows["three"]["views"] != rows["own"]["views"]


def test_part_sentences_are_refused_for_a_neighbour_row_which_reads_two_by_what_it_is(tmp_path, tiny_checkpoint, capsys):
    with pytest.raises(SystemExit) as stopped:
        benchmark.main(["--breaks-dir", str(tmp_path), "--neighbours", f"n={tiny_checkpoint}+{tiny_checkpoint}:0.2",
                        "--part-sentences", "n=3"])
    assert stopped.value.code == 2 and "--part-sentences ['n']: a --neighbours row's part reads two neighbouring sentences" in capsys.readouterr().err


@pytest.fixture
def tiny_embedder(tmp_path):
    """A random one-layer BERT in a folder, as a sentence embedder's folder holds one."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from storyeval.checkpoints import resolution as checkpoints

    torch.manual_seed(0)
    BertModel(BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=64)).save_pretrained(tmp_path / "embedder")
    AutoTokenizer.from_pretrained(checkpoints.backbone_path()).save_pretrained(tmp_path / "embedder")
    return tmp_path / "embedder"


def test_a_topic_row_mixes_in_the_embedders_score_of_each_whole_story(tmp_path, tiny_checkpoint, tiny_embedder, monkeypatch):
    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    benchmark.main(["--breaks-dir", str(saved_check(tmp_path / "check")), "--checkpoint", f"a={tiny_checkpoint}",
                    "--topic", f"t={tiny_checkpoint}+{tiny_embedder}:0.2", "--baseline", "a", "--targets", "insert", "--output", "out"])
    rows = json.loads((tmp_path / "out.json").read_text())["checkpoints"]
    assert rows["t"]["topic"]["weight"] == 0.2 and "ship_rule" in rows["t"] and rows["t"]["views"] != rows["a"]["views"]


@pytest.mark.parametrize("option", [["--part-lowest-share", "t=0.5"], ["--part-sentences", "t=3"]])
def test_a_share_or_a_sentence_count_is_refused_for_a_topic_row_which_scores_the_whole_story(tmp_path, tiny_checkpoint, capsys, option):
    with pytest.raises(SystemExit) as stopped:
        benchmark.main(["--breaks-dir", str(tmp_path), "--topic", f"t={tiny_checkpoint}+{tiny_checkpoint}:0.2", *option])
    assert stopped.value.code == 2 and f"{option[0]} ['t']: a --topic row" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--ending", "e=somewhere:0.5"], "expects label=story_folder+ending_folder:weight"),
    (["--ending", "e=a+b:1"], "with 0 < weight < 1"),
    (["--ending", "e=a+b:0.5"], "--ending e=a: no checkpoint there"),
    (["--neighbours", "n=somewhere:0.5"], "expects label=story_folder+neighbour_folder:weight"),
    (["--neighbours", "n=a+b:0"], "with 0 < weight < 1"),
    (["--neighbours", "n=a+b:0.5"], "--neighbours n=a: no checkpoint there"),
    (["--part-lowest-share", "n=0"], "expects label=share with 0 < share <= 1"),
    (["--part-lowest-share", "n"], "expects label=share with 0 < share <= 1"),
    (["--opening-ending", "o=a+b:1"], "with 0 < weight < 1"),
    (["--opening-ending", "o=a+b:0.5"], "--opening-ending o=a: no checkpoint there"),
    (["--runs", "r=a+b"], "expects label=story_folder+order_folder:weight"),
    (["--runs", "r=a+b:0.5"], "--runs r=a: no checkpoint there"),
    (["--part-lowest-share", "n=0.5"], "--part-lowest-share ['n']: not the label of an --ending, --neighbours, --opening-ending or --runs row"),
    (["--part-sentences", "e=0"], "expects label=n with a whole n of at least 1"),
    (["--part-sentences", "e=2.5"], "expects label=n with a whole n of at least 1"),
])
def test_mix_options_are_refused_before_scoring(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stopped:
        benchmark.main(["--breaks-dir", str(tmp_path), *argv])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def _pairs_check(stories, kinds=("swap", "half")):
    rows = []
    for i in range(stories):
        unit, words = f"s{i}", 100 + i % 3
        rows.append({"unit": unit, "view": "roc", "generator": "gpt-4", "kind": "intact", "text": f"{unit}-intact",
                     "words": words, "group": f"g{i}", "sides": list(kinds)})
        rows += [{"unit": unit, "view": "roc", "generator": "gpt-4", "kind": kind, "text": f"{unit}-{kind}", "words": words,
                  "group": f"g{i}"} for kind in kinds]
    return rows


def _pairs_check_with_a_few_held_out(stories, kinds=("swap", "half")):
    """_pairs_check and four stories of the held-out generator, whose cells swing in a draw and widen the joint tolerance."""
    rows = _pairs_check(stories, kinds=kinds)
    return rows + [{**r, "unit": f"h{r['unit']}", "text": f"h{r['text']}", "group": f"h{r['group']}", "generator": "claude-instant"}
                   for r in _pairs_check(4, kinds=kinds)]


def _half_targeted_rule(rows, baseline):
    """The ship rule of a candidate that targets the half, against ``baseline``, on ``rows``."""
    flat_of = lambda s: benchmark.flat(benchmark.report(rows, s, "claude-instant"))  # noqa: E731
    return lambda candidate: benchmark.ship_rule(rows, candidate, baseline, flat_of(candidate), flat_of(baseline), ("half",), ["roc"])


def test_the_ship_rule_wants_a_rise_beyond_the_interval_on_the_targets_and_no_fall_beyond_the_joint_tolerance():
    import numpy as np

    rows = _pairs_check(300)
    rng = np.random.default_rng(0)
    noise = {r["text"]: float(rng.normal(0, 1)) for r in rows}
    baseline = {t: v + (0.3 if t.endswith("intact") else 0) for t, v in noise.items()}
    learnt = {t: v - (3.0 if t.endswith("-half") else 0) for t, v in baseline.items()}  # the half copies now score lower
    broke_swaps = {t: v + (3.0 if t.endswith("-swap") else 0) for t, v in learnt.items()}

    def rule(candidate):
        flat_of = lambda s: benchmark.flat(benchmark.report(rows, s, "claude-instant"))  # noqa: E731
        return benchmark.ship_rule(rows, candidate, baseline, flat_of(candidate), flat_of(baseline), ("half",), ["roc"])

    holds = rule(learnt)
    assert holds["holds"] and holds["targeted_means"]["within"]["rises"] and holds["targeted_means"]["within"]["interval"][0] > 0
    assert holds["tolerance"] >= 0.02 and not holds["falls"]
    fails = rule(broke_swaps)  # the same rise, but swaps fall far beyond the draw
    assert not fails["holds"] and "roc/swap/within" in fails["falls"]
    same = rule(baseline)  # nothing rises: an equal candidate does not replace the one it is equal to
    assert not same["holds"] and same["chance_an_equal_candidate_falls"] == 0.0


def test_the_ship_rule_names_an_across_story_fall_that_a_few_held_out_stories_widen_the_joint_tolerance_past():
    import numpy as np

    rows = _pairs_check_with_a_few_held_out(200)
    rng = np.random.default_rng(0)
    noise = {r["text"]: float(rng.normal(0, 1)) for r in rows}
    baseline = {t: v + (1.0 if t.endswith("intact") else 0) for t, v in noise.items()}
    learnt = {t: v - (3.0 if t.endswith("-half") else 0) for t, v in baseline.items()}
    swaps_closer = {t: v + (0.5 if t.endswith("-swap") else 0) for t, v in learnt.items()}
    rule = _half_targeted_rule(rows, baseline)

    holds, fails = rule(learnt), rule(swaps_closer)
    assert holds["holds"] and not holds["across_story_falls"] and holds["across_story_tolerance"] < holds["tolerance"]
    assert not fails["falls"]  # within the tolerance the held-out generator's four stories set
    assert not fails["holds"] and set(fails["across_story_falls"]) == {"roc/swap/auc"}
    assert 0 < fails["chance_an_equal_candidate_falls_across_stories"] <= 0.06


def test_the_ship_rule_names_a_fall_of_the_whole_checks_mean_that_is_spread_over_cells_each_inside_the_tolerance():
    import numpy as np

    kinds = ("half", "swap", "triple", "insert")
    rows = _pairs_check_with_a_few_held_out(60, kinds=kinds)
    rng = np.random.default_rng(0)
    noise = {r["text"]: float(rng.normal(0, 1)) for r in rows}
    baseline = {t: v + (1.5 if t.endswith("intact") else 0) for t, v in noise.items()}
    learnt = {t: v - (3.0 if t.endswith("-half") else 0) for t, v in baseline.items()}
    # every other kind's copies a little closer to their stories: each cell falls a little, the whole check a lot
    spread = {t: v + (0.45 if t.rsplit("-", 1)[1] in kinds[1:] else 0) for t, v in learnt.items()}
    rule = _half_targeted_rule(rows, baseline)

    holds, fails = rule(learnt), rule(spread)
    assert holds["holds"] and holds["whole_check_falls"] == {}
    assert not fails["falls"]  # no one cell falls beyond the joint tolerance (the across-story part sees AUCs alone)
    assert not fails["holds"] and "within" in fails["whole_check_falls"]
    within = fails["whole_check_means"]["within"]
    assert within["difference"] < -0.02 and within["interval"][1] < 0
    assert fails["chance_an_equal_candidate_fails"] > fails["chance_an_equal_candidate_falls"]


def test_the_ship_rule_reads_length_on_intact_stories_where_halves_ranked_low_raise_the_mixture_by_construction():
    import numpy as np

    rows = _pairs_check(300, kinds=("half",))
    for r in rows:
        r["words"] = 60 + int(r["unit"][1:]) % 90
        if r["kind"] == "half":
            r["words"] //= 2
    rng = np.random.default_rng(1)
    baseline = {r["text"]: float(rng.normal(0, 1)) for r in rows}
    learnt = {t: v - (3.0 if t.endswith("-half") else 0) for t, v in baseline.items()}  # halves below, stories unmoved
    words = {r["text"]: r["words"] for r in rows}
    longer = {t: v + (words[t] / 30 if t.endswith("intact") else 0) for t, v in learnt.items()}  # and long stories up

    def rule(candidate):
        flat_of = lambda s: benchmark.flat(benchmark.report(rows, s, "claude-instant"))  # noqa: E731
        return benchmark.ship_rule(rows, candidate, baseline, flat_of(candidate), flat_of(baseline), ("half",), ["roc"])

    before, after = (benchmark.report(rows, s, "claude-instant")["roc"] for s in (baseline, learnt))
    assert after["length_spearman"] > before["length_spearman"] + 0.2  # the mixture of stories and halves: up by construction
    assert after["length_spearman_intact"] == before["length_spearman_intact"]
    assert rule(learnt)["holds"] and rule(learnt)["length_rises"] == {}
    fails = rule(longer)
    assert not fails["holds"] and fails["length_rises"]["roc"] > benchmark.LENGTH_RISE_BOUND
    # beside the point figure, its paired interval: none where nothing moved, above 0 where long stories were lifted
    unmoved = rule(learnt)["length_rise_intervals"]
    assert unmoved["views"]["roc"] == {"rise": 0.0, "interval": [0.0, 0.0], "chance_an_equal_candidate_fails": 0.0}
    assert unmoved["chance_an_equal_candidate_fails"] == 0.0
    lifted = fails["length_rise_intervals"]["views"]["roc"]
    assert 0 < lifted["interval"][0] <= fails["length_rises"]["roc"] <= lifted["interval"][1]
    assert 0 <= lifted["chance_an_equal_candidate_fails"] < 0.5


@pytest.mark.skipif(not __import__("storyeval.scoring.int8.runtime", fromlist=["x"]).cpu_has_int8_dot_product(),
                    reason="this CPU has no int8 dot-product instructions")
def test_an_int8_row_is_measured_against_its_float32_checkpoint_with_every_figures_paired_interval(tmp_path, tiny_checkpoint, monkeypatch):
    for module in ("openvino", "nncf", "onnx"):
        pytest.importorskip(module)
    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setenv("STORYEVAL_CACHE", str(tmp_path / "cache"))
    check = saved_check(tmp_path / "check")
    benchmark.main(["--breaks-dir", str(check), "--checkpoint", f"f32={tiny_checkpoint}", "--int8-checkpoint", f"i8={tiny_checkpoint}",
                    "--output", "out"])
    payload = json.loads((tmp_path / "out.json").read_text())["checkpoints"]
    row = payload["i8"]
    assert row["dtype"] == "int8" and row["scheme"] == "weights_int8" and "_int8_" in row["settings"]
    fidelity = row["every_interval"]
    assert fidelity["float32_row"] == "f32" and fidelity["figures"] == len(fidelity["intervals"]) > 0
    assert fidelity["outside_interval"] == sorted(key for key, (low, high) in fidelity["intervals"].items() if low > 0 or high < 0)


@pytest.mark.parametrize("second", ["--ending", "--neighbours", "--opening-ending", "--runs"])
def test_a_mix_row_may_not_repeat_a_mix_rows_label(tmp_path, tiny_checkpoint, capsys, second):
    mix = f"m={tiny_checkpoint}+{tiny_checkpoint}:0.1"
    with pytest.raises(SystemExit):
        benchmark.main(["--breaks-dir", str(tmp_path), "--neighbours", mix, second, mix])
    assert "each row needs its own label: --ending, --neighbours, --opening-ending, --runs and --topic labels ['m', 'm']" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--int8-checkpoint", "a=nowhere"], "--int8-checkpoint a=nowhere: no checkpoint there"),
    (["--int8-checkpoint", "a=hub_cards/union-roc"], "each row needs its own label"),
    (["--int8-scheme", "union-roc=weights_int8"], "--int8-scheme goes with --int8-checkpoint or --int8-suite"),
    (["--int8-checkpoint", "b=hub_cards/union-roc", "--int8-scheme", "union-roc=int4"], "unknown int8 scheme"),
    (["--int8-checkpoint", "b=hub_cards/union-roc"], "int8 rows ['b'] need the float32 row of the same folder"),
    (["--int8-suite", "b=roc"], "int8 rows ['b'] need the float32 row of the same folder (--checkpoint) or config (--suite)"),
    (["--int8-suite", "b=nope"], "unknown story_quality config"),
])
def test_int8_rows_refuse_bad_options_before_scoring(tmp_path, tiny_checkpoint, capsys, argv, message):
    with pytest.raises(SystemExit):
        benchmark.main(["--breaks-dir", str(tmp_path), "--checkpoint", f"a={tiny_checkpoint}", *argv])
    assert message in capsys.readouterr().err


def test_an_equal_candidate_falls_at_most_one_time_in_twenty_at_its_own_tolerance_where_draws_pile_up_on_one_value():
    # three stories: every drawn difference is a multiple of a third, so the 5% quantile lies on a value many draws
    # share; those draws fall exactly the tolerance, which the rule (rounding a fall to four places) lets pass
    rows = []
    for i in range(3):
        rows.append({"unit": f"s{i}", "view": "roc", "generator": "gpt-4", "kind": "intact", "text": f"s{i}-intact",
                     "words": 100, "group": f"g{i}", "sides": ["swap"]})
        rows.append({"unit": f"s{i}", "view": "roc", "generator": "gpt-4", "kind": "swap", "text": f"s{i}-swap", "words": 100,
                     "group": f"g{i}"})
    baseline = {f"s{i}-{kind}": (1.0 if kind == "intact" else 0.0) for i in range(3) for kind in ("intact", "swap")}
    candidate = {**baseline, "s0-intact": -1.0}  # below its own copy: within pairs 2/3 against 3/3
    keys = ["roc/swap/within"]
    tolerance = benchmark.chance_of_a_fall(rows, candidate, baseline, keys, resamples=400)["tolerance_for_5_percent"]
    assert tolerance == pytest.approx(1 / 3, abs=1e-4)
    assert benchmark.chance_of_a_fall(rows, candidate, baseline, keys, tolerance=tolerance, resamples=400)["chance"] <= 0.05


def test_the_ending_length_diagnostic_reports_what_an_ending_score_follows_per_view(tmp_path, tiny_checkpoint, monkeypatch, capsys):
    from benchmarks import common
    from benchmarks.agreement import ending_length

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    units = modern_breaks.Units(ANTONYMS, seed=3)
    stories = [(f"s{i}", f"g{i}", [f"Story {i} opens here.", *STORY[1:i % 3 + 4]]) for i in range(6)]
    for unit, group, sentences in stories:
        units.collect_foreign("test", "gpt-4", group, sentences)
    for i, (unit, group, sentences) in enumerate(stories):
        units.add("test", f"{unit}/roc", group, "gpt-4", "machine", "roc", sentences, reaches_end=i % 2 == 0)
    datasets.DatasetDict({"test": units.dataset()["test"]}).save_to_disk(str(tmp_path / "check" / "stories"))
    ending_length.main(["--breaks-dir", str(tmp_path / "check"), "--split", "test", "--checkpoint", f"e={tiny_checkpoint}", "--output", "out"])
    roc = json.loads((tmp_path / "out.json").read_text())["checkpoints"]["e"]["roc"]
    assert roc["stories"] == 6 and roc["share_reaching_end"] == 0.5
    assert set(roc["score_with"]) == {"story_words", "ending_words", "reaches_end"}
    with pytest.raises(SystemExit):
        ending_length.main(["--breaks-dir", str(tmp_path), "--checkpoint", f"e={tiny_checkpoint}", "--output", "out2"])
    assert "no stories/" in capsys.readouterr().err and not (tmp_path / "out2.json").exists()
    # a shipped mix is no ending checkpoint on its own: one line, nothing written
    from conftest import save_tiny_checkpoint

    mix = save_tiny_checkpoint(tmp_path / "mix", ending_of=str(tiny_checkpoint), ending_weight=0.25, ending_sentences=2)
    with pytest.raises(SystemExit):
        ending_length.main(["--breaks-dir", str(tmp_path / "check"), "--split", "test", "--checkpoint", f"e={mix}", "--output", "out3"])
    assert "is a shipped ending mix already" in capsys.readouterr().err and not (tmp_path / "out3.json").exists()


def test_the_length_part_counts_a_rise_only_beyond_both_005_and_the_joint_tolerance_as_a_fall_is_counted():
    """On 50 stories, intact stories' scores moved at random lift the length Spearman by 0.055 by the draw alone: the
    revised length part (first_checks.md) does not count it, and fails an equal candidate about one time in twenty."""
    import numpy as np

    rows = _pairs_check(50, kinds=("half",))
    for r in rows:
        r["words"] = 60 + int(r["unit"][1:]) * 3 % 90
        if r["kind"] == "half":
            r["words"] //= 2
    rng = np.random.default_rng(3)
    baseline = {r["text"]: float(rng.normal(0, 1)) for r in rows}
    jittered = {t: v - (3.0 if t.endswith("-half") else 0) + (float(rng.normal(0, 0.5)) if t.endswith("intact") else 0)
                for t, v in baseline.items()}
    flat_of = lambda s: benchmark.flat(benchmark.report(rows, s, "claude-instant"))  # noqa: E731
    rule = benchmark.ship_rule(rows, jittered, baseline, flat_of(jittered), flat_of(baseline), ("half",), ["roc"])
    length = rule["length_rise_intervals"]
    assert length["views"]["roc"]["rise"] > benchmark.LENGTH_RISE_BOUND  # the point figure alone would have failed it
    assert length["bound"] == length["tolerance_for_5_percent"] > length["views"]["roc"]["rise"]
    assert rule["length_rises"] == {} and rule["holds"]
    assert length["chance_an_equal_candidate_fails"] <= 0.06 < length["chance_at_the_point_bound"]
    # three parts of about 5% each and the whole check's two means of at most 2.5% each, their draws taken apart (an
    # overstatement where they share figures)
    assert rule["chance_an_equal_candidate_falls_across_stories"] <= 0.06 and rule["chance_an_equal_candidate_fails"] < 0.21
