"""Continuation quality: features on hand-worked examples, the n-gram LM, PMI, data, model and metric."""
import json
import math
from pathlib import Path

import evaluate
import numpy as np
import pytest
import torch

from storyeval.models.continuation.cooccurrence import CooccurrenceStats
from storyeval.models.continuation.features import FeatureExtractor, idf_features, idf_words, length_features, mention_features
from storyeval.models.continuation.model import CRITERIA, ContinuationModel
from storyeval.models.continuation.ngram_lm import NgramLM
from storyeval_training.data import continuation_data
from storyeval_training.data.builders import InputFormatError

METRIC_DIR = str(Path(__file__).resolve().parent.parent / "metrics" / "continuation_quality")
CONTEXT = "[MALE] went to the store with his dog . he bought milk .".split()
CORPUS = [s.split() for s in [
    "the cat sat on the mat .", "the dog sat on the log .", "a cat ate the fish .", "the dog ate the bone .",
    "[MALE] went to the store .", "he bought milk for the cat .", "she walked the dog in the park .",
] * 5]


def save_tiny_statistics(folder: Path) -> Path:
    """The LM and co-occurrence files a continuation training run reuses (``--resources-dir``), fitted on CORPUS."""
    folder.mkdir(exist_ok=True)
    NgramLM(order=2).fit(CORPUS).save(folder / "lm.npz")
    CooccurrenceStats(windows=(10, 25, 50), min_pair_count=1, min_word_count=1).fit(CORPUS).save(folder / "cooccurrence.npz")
    return folder


def test_reusing_the_contexts_people_gives_old_mentions_and_new_names_do_not():
    old = mention_features(CONTEXT, "he gave the milk to the dog .".split())
    assert old == [1.0, 3.0, 0.0, 0.0, 0.0, 0.0]  # he, milk, dog: all old
    new = mention_features(CONTEXT, "[FEMALE] saw a tiger at the zoo .".split())
    assert new == [0.0, 0.0, 1.0, 3.0, 1.0, 1.0]  # [FEMALE] (a new name), tiger, zoo
    assert mention_features(["amy", "left", "."], ["amy", "returned", "."])[:2] == [1.0, 1.0]  # a name seen before


def test_length_and_idf():
    assert length_features("a b c d .".split(), "e f .".split()) == [2.0, 0.5]
    assert idf_features("the end .".split())[0] < idf_features("quantum chromodynamics .".split())[0]


def test_idf_rejoins_clitics_from_feature_version_2():
    # wordfreq counts "didn't", not "n't", which on its own is as rare as "chromodynamics"
    assert idf_words("[MALE] 's dog ca n't swim , he did n't .".split()) == ["dog", "can't", "swim", "he", "didn't"]
    negated, plain = "he did n't go .".split(), "he did go .".split()
    assert idf_features(negated, version=1)[0] > idf_features(plain, version=1)[0] + 1.2
    assert abs(idf_features(negated)[0] - idf_features(plain)[0]) < 0.4


def test_pmi_counts_only_the_words_its_statistics_hold_from_feature_version_2():
    stats = CooccurrenceStats(windows=(10, 25, 50), min_pair_count=1, min_word_count=1).fit(
        [["dog", "bone", "cat", "fish"]] * 10)
    context = "[MALE] 's dog found 5 bones .".split()
    extractors = {version: FeatureExtractor(cooccurrence=stats, groups=("pmi",), version=version) for version in (1, 2)}
    plain, padded = "the cat ate the fish .".split(), "[FEMALE] 's cat ate 3 fish .".split()
    assert extractors[2]([context], [plain]).tolist() == extractors[2]([context], [padded]).tolist()
    assert extractors[1]([context], [plain]).tolist() != extractors[1]([context], [padded]).tolist()
    with pytest.raises(ValueError, match="unknown feature version 3"):
        FeatureExtractor(groups=("length",), version=3)


def test_ngram_lm_is_normalised_and_prefers_fluent_text():
    lm = NgramLM(order=3).fit(CORPUS)
    for history in (["the", "cat"], ["zebra", "qq"]):
        ids = [lm.vocab.get(t, 1) for t in history]
        rows = np.array([ids + [w] for w in range(1, len(lm.vocab))])
        assert math.isclose(np.exp(lm.logprobs(rows)).sum(), 1.0, abs_tol=0.05)
    assert lm.score("the cat sat on the mat .".split()) > lm.score("mat the on sat cat the .".split())
    assert lm.score_batch([["the", "cat"], ["dog"]], [["on"], []]) == pytest.approx([lm.score(["the", "cat"], ["on"]), lm.score(["dog"])])


def test_ngram_lm_round_trips(tmp_path):
    lm = NgramLM(order=4).fit(CORPUS)
    lm.save(tmp_path / "lm.npz")
    assert NgramLM.load(tmp_path / "lm.npz").score("the dog sat .".split()) == pytest.approx(lm.score("the dog sat .".split()))


def test_pmi_counts_only_frequent_pairs_and_normalises_by_both_lengths(tmp_path):
    docs = [["dog", "bark", "loud"]] * 20 + [["cat", "meow"]] * 20 + [["dog", "meow"]] * 5
    stats = CooccurrenceStats(windows=(2,), min_pair_count=10, min_word_count=1).fit(docs)
    one = stats.scores([["dog"]], [["bark"]])[2][0]
    assert one > 0
    assert stats.scores([["dog"]], [["meow"]])[2][0] == 0  # seen 5 times: below the threshold
    assert stats.scores([["dog", "cat"]], [["bark"]])[2][0] == pytest.approx(one / 2)
    stats.save(tmp_path / "c.npz")
    assert CooccurrenceStats.load(tmp_path / "c.npz").scores([["dog"]], [["bark"]])[2][0] == pytest.approx(one)


def test_a_rare_word_does_not_cut_the_pmi_window():
    # "cat" and "dog" always share a story, two words apart; the word between them is too rare for the vocabulary
    documents = [["cat", f"rare{i}", "dog"] for i in range(20)]
    stats = CooccurrenceStats(windows=(10, 25, 50), min_pair_count=1, min_word_count=5).fit(documents)
    assert "rare0" not in stats.vocab and stats.scores([["cat"]], [["dog"]])[10][0] > 0


def test_pmi_and_ppmi_sum_every_context_and_continuation_word_pair_repeats_included():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    documents = [list(rng.choice(words, size=8)) for _ in range(300)]
    stats = CooccurrenceStats(windows=(2, 5), min_pair_count=3, min_word_count=1).fit(documents)
    contexts = [["w1", "w2", "w1", "unseen"], [], ["w3"], ["unseen"]]
    continuations = [["w4", "w4", "w5"], ["w1"], [], ["w2"]]
    signed, positive = stats.pair_scores(contexts, continuations)
    for window, matrix in stats.pmi.items():
        dense = matrix.toarray()
        for i, (context, continuation) in enumerate(zip(contexts, continuations)):
            values = [float(dense[stats.vocab[u], stats.vocab[v]]) for u in context for v in continuation if u in stats.vocab and v in stats.vocab]
            norm = max(len(context) * len(continuation), 1)
            assert signed[window][i] == pytest.approx(sum(values) / norm)
            assert positive[window][i] == pytest.approx(sum(max(x, 0.0) for x in values) / norm)
        assert list(stats.scores(contexts, continuations, positive=True)[window]) == list(positive[window])
    assert signed[2][0] != 0 and list(signed[2][1:]) == [0, 0, 0]


def test_feature_switches_drive_the_columns():
    lm = NgramLM(order=3).fit(CORPUS)
    extractor = FeatureExtractor(lm=lm, groups=("length", "lm"))
    assert extractor.names == ["length", "relative_length", "lm_score"]
    assert extractor([CONTEXT], ["he left .".split()]).shape == (1, 3)
    with pytest.raises(KeyError, match="unknown feature groups"):
        FeatureExtractor(groups=("length", "magic"))
    # names follow the columns, which come in one fixed order whatever the order of the groups
    reordered = FeatureExtractor(lm=lm, groups=("lm", "length"))
    assert reordered.names == extractor.names
    assert reordered([CONTEXT], ["he left .".split()]).tolist() == extractor([CONTEXT], ["he left .".split()]).tolist()
    with pytest.raises(ValueError, match="feature groups repeat"):
        FeatureExtractor(groups=("length", "length"))
    with pytest.raises(ValueError, match="needs fitted CooccurrenceStats"):
        FeatureExtractor(groups=("pmi",))


def test_rated_pairs_loader_checks_shape_and_ranges(tmp_path):
    good = tmp_path / "pairs.jsonl"
    good.write_text(json.dumps({"context": "Ken went out.", "continuation": "He came back.", "overall": 7, "relevance": 9, "interestingness": 2}) + "\n")
    rows = continuation_data.read_rated_pairs(good)
    assert rows[0]["context"] == "[MALE] went out ." and rows[0]["relevance"] == 9
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"context": "a", "continuation": "b", "overall": 11, "relevance": 1, "interestingness": 1}) + "\n")
    with pytest.raises(InputFormatError, match=r"bad.jsonl:1: overall must be in \[1, 10\]"):
        continuation_data.read_rated_pairs(bad)


def test_deltascore_stories_keep_raw_text_and_every_aspect_and_name_a_bad_row(tmp_path):
    good = {"title": "Ken went out.", "story": "He came back.", "fluency": 4, "coherence": 3, "relatedness": 5,
            "logicality": 2, "interestingness": 1}
    path = tmp_path / "rated.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "logicality": None}) + "\n")
    with pytest.raises(InputFormatError, match="rated.jsonl:2: logicality must be a number"):
        continuation_data.read_deltascore_stories(path)
    path.write_text(json.dumps(good) + "\n")
    stories, ratings = continuation_data.read_deltascore_stories(path)
    assert stories == ["Ken went out. He came back."] and ratings["logicality"] == [2.0] and len(ratings) == 5


def test_grouped_split_keeps_each_context_on_one_side(shared_data):
    rated = continuation_data.read_deltascore(shared_data / "continuation" / "deltascore_crowdsource_roc.jsonl")
    splits = continuation_data.grouped_split(rated)
    sides = [set(s["context"]) for s in splits.values()]
    assert not (sides[0] & sides[1] or sides[0] & sides[2] or sides[1] & sides[2])
    assert sum(len(s) for s in splits.values()) == len(rated) == 120


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cq")
    lm = NgramLM(order=3).fit(CORPUS)
    stats = CooccurrenceStats(windows=(10, 25, 50), min_pair_count=1, min_word_count=1).fit(CORPUS)
    extractor = FeatureExtractor(lm=lm, cooccurrence=stats)
    torch.manual_seed(0)
    ContinuationModel(num_features=len(extractor.names), dim=8, hidden=8, buckets=64).save(folder)
    lm.save(folder / "lm.npz")
    stats.save(folder / "cooccurrence.npz")
    (folder / "scorer_config.json").write_text(json.dumps({"feature_groups": list(extractor.groups), "criteria": list(CRITERIA)}))
    return folder


def test_a_checkpoint_names_its_feature_version_and_one_without_it_has_version_1(tiny_checkpoint, tmp_path):
    from storyeval.scoring.continuation import ContinuationScorer

    assert ContinuationScorer(tiny_checkpoint).extractor.version == 1  # scorer_config.json from before versions
    newer = tmp_path / "newer"
    newer.mkdir()
    for path in tiny_checkpoint.iterdir():
        (newer / path.name).write_bytes(path.read_bytes())
    config = json.loads((tiny_checkpoint / "scorer_config.json").read_text())
    (newer / "scorer_config.json").write_text(json.dumps({**config, "feature_version": 9}))
    with pytest.raises(ValueError, match="unknown feature version 9.*upgrade"):
        ContinuationScorer(newer)


def test_metric_through_evaluate_load(tiny_checkpoint):
    metric = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    results = metric.compute(predictions=["He gave the milk to the dog.", "A tiger appeared."], contexts=["Ken went to the store.", "Ken went to the store."])
    assert set(results) == set(CRITERIA) | {f"mean_{c}" for c in CRITERIA} | {"settings"}
    assert results["settings"].startswith(f"{tiny_checkpoint.name}_fp32_storyeval-")
    assert len(results["relevance"]) == 2 and results["mean_overall"] == pytest.approx(sum(results["overall"]) / 2)
    with pytest.raises(ValueError, match="predictions is empty: no continuations to score"):
        metric.compute(predictions=[], contexts=[])
    # queued pairs are scored by a compute() without inputs, as with any evaluate metric
    metric.add_batch(predictions=["He gave the milk to the dog."], contexts=["Ken went to the store."])
    metric.add(prediction="A tiger appeared.", context="Ken went to the store.")
    assert metric.compute()["overall"] == pytest.approx(results["overall"], abs=1e-5)
    with pytest.raises(ValueError, match="same length"):
        metric.add_batch(predictions=["a ."], contexts=["b .", "c ."])
    # an option the metric does not take is refused before the queued pairs are consumed
    metric.add_batch(predictions=["He gave the milk to the dog."], contexts=["Ken went to the store."])
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['beam_size'\]"):
        metric.compute(beam_size=4)
    with pytest.raises(ValueError, match="unsupported dtype 'int8'"):  # int8 runs the story classifiers only
        metric.compute(dtype="int8")
    assert metric.compute()["overall"] == pytest.approx(results["overall"][:1], abs=1e-5)
    # the same runtime options as the story metrics: dtype runs a lower-precision copy
    half = metric.compute(predictions=["He gave the milk to the dog."], contexts=["Ken went to the store."], dtype="bfloat16")
    assert half["overall"] == pytest.approx(results["overall"][:1], abs=0.1) and "_bf16_" in half["settings"]
    metric.add_batch(predictions=[], contexts=[])
    with pytest.raises(ValueError, match="predictions is empty"):
        metric.compute()


@pytest.mark.parametrize(
    "predictions, contexts, error, message",
    [
        (["a ."], ["b .", "c ."], ValueError, "same length"),
        (["a ."], None, TypeError, "contexts must be a list"),
        (["a ."], [""], ValueError, r"contexts\[0\] is empty"),
        ([None], ["b ."], TypeError, r"predictions\[0\]"),
    ],
)
def test_metric_bad_input(tiny_checkpoint, predictions, contexts, error, message):
    metric = evaluate.load(METRIC_DIR, str(tiny_checkpoint))
    with pytest.raises(error, match=message):
        metric.compute(predictions=predictions, contexts=contexts)


def test_bundled_checkpoint_scores_are_pinned(shared_data):
    metric = evaluate.load(METRIC_DIR, "deltascore")
    context = "[MALE] went to the store with his dog . he bought milk ."
    results = metric.compute(predictions=["he gave the milk to the dog .", "a tiger ate the moon ."], contexts=[context, context])
    assert results["overall"] == pytest.approx([6.2928, 1.4690], abs=2e-3)
    assert results["relevance"] == pytest.approx([6.1647, 0.9347], abs=2e-3)
    assert results["interestingness"] == pytest.approx([2.3480, 2.4746], abs=2e-3)


def test_cloze_pairs_mix_contradicted_and_other_story_endings():
    import datasets

    stories = datasets.Dataset.from_dict({"sentences": [
        ["a .", "b .", "c .", "d .", "he was happy with the gift ."],
        ["e .", "f .", "g .", "h .", "she did n't like the cake ."],
        ["i .", "j .", "k .", "l .", "the end ."],
        ["only four .", "b .", "c .", "d ."],  # not a five-sentence story: skipped
    ]})
    pairs = continuation_data.cloze_pairs(stories, seed=0, contradiction_share=1.0)
    assert len(pairs) == 3
    by_right = {p["right"]: p for p in pairs}
    assert by_right["he was happy with the gift ."]["wrong"] in {"he was not happy with the gift .", "he was n't happy with the gift ."}
    assert by_right["she did n't like the cake ."]["wrong"] == "she liked the cake ."
    assert by_right["the end ."]["kind"] == "other_story"  # nothing to negate: another story's ending
    assert all(p["wrong"] != p["right"] for p in pairs)
    assert {p["kind"] for p in continuation_data.cloze_pairs(stories, seed=0, contradiction_share=0.0)} == {"other_story"}


def test_cloze_pairs_without_contradictions_draw_only_the_other_story():
    """Share 0 must replay the off-topic-only sampler that built the bundled checkpoint's pairs."""
    import random

    import datasets

    endings = [f"ending number {i} ." for i in range(40)]
    stories = datasets.Dataset.from_dict({"sentences": [["a .", "b .", "c .", "d .", e] for e in endings]})
    rng = random.Random(7)
    expected = []
    for index in range(len(endings)):
        other = rng.randrange(len(endings) - 1)
        expected.append(endings[other + (other >= index)])
    assert continuation_data.cloze_pairs(stories, seed=7, contradiction_share=0.0)["wrong"] == expected


def test_training_seed_does_not_move_the_heldout_split():
    from storyeval_training.recipes import train_continuation

    args = train_continuation.parse_args(["--output-dir", "unused", "--seed", "43"])
    assert args.seed == 43 and args.split_seed == continuation_data.HELDOUT_SPLIT_SEED


def test_statistics_files_load_without_pickle(tmp_path):
    """Checkpoints may come from any Hub repo: a pickled vocabulary must be refused, not unpickled."""
    lm = NgramLM(order=2).fit(CORPUS)
    lm.save(tmp_path / "lm.npz")
    assert np.load(tmp_path / "lm.npz", allow_pickle=False)["vocab"].dtype == np.uint8
    arrays = dict(np.load(tmp_path / "lm.npz"))
    arrays["vocab"] = np.array(list(lm.vocab), dtype=object)
    np.savez(tmp_path / "pickled.npz", **arrays)
    with pytest.raises(ValueError, match="pickled object array"):
        NgramLM.load(tmp_path / "pickled.npz")


def test_bad_device_or_batch_size_changes_nothing(tiny_checkpoint):
    from storyeval.scoring.continuation import ContinuationScorer

    scorer = ContinuationScorer(tiny_checkpoint, device="cpu")
    expected = scorer.score(["Ken went to the store."], ["He bought milk."])
    for options, error in (({"device": "gpu"}, ValueError), ({"device": "cuda:99"}, ValueError), ({"batch_size": 0}, ValueError),
                           ({"batch_size": "2"}, TypeError)):
        with pytest.raises(error):
            scorer.score(["Ken went to the store."], ["He bought milk."], **options)
    assert scorer.device.type == "cpu"
    assert scorer.score(["Ken went to the store."], ["He bought milk."]) == expected
    # another device scores with a copy: the scorer, cached and shared by every metric instance, stays put
    assert scorer.score(["Ken went to the store."], ["He bought milk."], device="cpu:1") == expected
    assert scorer.device == torch.device("cpu") and next(scorer.model.parameters()).device == torch.device("cpu")


@pytest.mark.parametrize("bad", [["--epochs", "0"], ["--batch-size", "0"], ["--features", "lm", "bogus"], ["--contradiction-share", "2"],
                                 ["--lm-order", "5"], ["--lm-order", "0"],
                                 # the reused LM has its own order: one given as well would be ignored
                                 ["--lm-order", "3", "--resources-dir", "lm-folder"]])
def test_training_options_are_checked_before_anything_is_written(bad, tmp_path, capsys):
    from storyeval_training.recipes import train_continuation

    with pytest.raises(SystemExit):
        train_continuation.parse_args(["--output-dir", str(tmp_path / "run"), *bad])
    assert not (tmp_path / "run").exists()


def test_output_folders_that_cannot_be_written_are_refused_before_fitting(tmp_path, capsys):
    from storyeval_training.recipes import train_continuation

    (tmp_path / "a-file").write_text("")
    for folder in (tmp_path / "a-file", tmp_path / "a-file" / "statistics"):
        with pytest.raises(SystemExit):
            train_continuation.parse_args(["--output-dir", str(tmp_path / "run"), "--save-statistics", str(folder)])
        assert f"{tmp_path / 'a-file'} is not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_continuation.parse_args(["--output-dir", str(tmp_path / "a-file" / "run")])
    assert "--output-dir" in capsys.readouterr().err
    assert train_continuation.parse_args(["--output-dir", str(tmp_path / "run"), "--save-statistics", str(tmp_path / "new" / "statistics")])
    assert not (tmp_path / "new").exists() and not (tmp_path / "run").exists()


def test_missing_rated_pairs_leave_no_output_folder(tmp_path):
    from storyeval_training.recipes import train_continuation

    with pytest.raises(OSError):
        train_continuation.train(train_continuation.parse_args(
            ["--output-dir", str(tmp_path / "run"), "--rated-pairs", str(tmp_path / "none.jsonl")]))
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_training_smoke_run_keeps_its_best_epoch_and_writes_a_loadable_checkpoint(tmp_path):
    from storyeval.scoring.continuation import ContinuationScorer
    from storyeval_training.recipes import train_continuation
    from storyeval_training.selection import best_by

    resources = save_tiny_statistics(tmp_path / "resources")
    animals = ["cat", "dog", "fish", "bird", "horse", "goat", "sheep", "mouse", "frog", "duck"]
    rows = []  # 30 contexts, so the grouped split puts some on every side
    for i in range(30):
        context = f"[MALE] saw a {animals[i % 10]} number {i} at the park ."
        rows.append({"context": context, "continuation": f"he fed the {animals[i % 10]} some bread .",
                     "overall": 7, "relevance": 8, "interestingness": 4 + i % 3})
        rows.append({"context": context, "continuation": "the stock market fell sharply today .", "overall": 3, "relevance": 1, "interestingness": 2 + i % 2})
    rated = tmp_path / "rated.jsonl"
    rated.write_text("".join(json.dumps(row) + "\n" for row in rows))

    results = train_continuation.train(train_continuation.parse_args([
        "--output-dir", str(tmp_path / "run"), "--rated-pairs", str(rated), "--resources-dir", str(resources),
        "--cloze-pairs", "0", "--epochs", "3", "--batch-size", "8"]))
    assert len(results["history"]) == 3 and results["corpus_stories"] is None
    assert results["args"]["lm_order"] == 2  # the reused LM's order, which the model card states
    assert results["best_validation"] == best_by(results["history"], "validation_mean_spearman")
    assert results["train_pairs"] + results["validation_pairs"] + results["test_pairs"] == len(rows)
    assert json.loads((tmp_path / "run" / "training_results.json").read_text())["best_validation"]["epoch"] == results["best_validation"]["epoch"]
    scorer = ContinuationScorer(tmp_path / "run", device="cpu")
    assert json.loads((tmp_path / "run" / "scorer_config.json").read_text())["feature_version"] == scorer.extractor.version == 2
    scores = scorer.score(["Ken saw a cat at the park."], ["He fed the cat some bread."])
    assert set(scores) == set(CRITERIA) and all(len(v) == 1 for v in scores.values())


def test_the_lm_has_seen_a_sentence_follow_a_full_stop():
    from storyeval_training.recipes.train_continuation import fit_resources

    lm, _ = fit_resources([["ken went home .", "he slept ."], ["amy went home .", "she slept ."]] * 10, 3)
    after_context = lm.score_batch([["he", "slept", "."]], [["ken", "went", "home", "."]])[0]
    alone = lm.score_batch([["he", "slept", "."]], [[]])[0]
    assert after_context > alone - 1.0  # a sentence-level LM put an unseen ". he" here, many nats below


def test_a_continuation_of_placeholders_alone_takes_the_mean_idf(tiny_checkpoint):
    from storyeval.scoring.continuation import ContinuationScorer

    assert math.isnan(idf_features(["[FEMALE]", "."])[0])  # missing, not 0: rarer than any word by far
    scores = ContinuationScorer(tiny_checkpoint, device="cpu").score(["John went to the store."], ["Mary."])
    assert all(math.isfinite(v[0]) for v in scores.values())


def test_feature_scaling_ignores_missing_values_and_survives_one_row():
    from storyeval_training.recipes.train_continuation import feature_scaling

    mean, std = feature_scaling(torch.tensor([[1.0, float("nan")], [3.0, 4.0]]))
    assert mean.tolist() == [2.0, 4.0] and std.tolist() == [1.0, pytest.approx(1e-6)]
    mean, std = feature_scaling(torch.tensor([[5.0, float("nan")]]))  # one row; a column with no value
    assert mean.tolist() == [5.0, 0.0] and not torch.isnan(std).any()


@pytest.mark.slow
def test_cloze_features_come_from_statistics_that_never_saw_their_story(monkeypatch, tmp_path):
    import datasets

    from storyeval_training.recipes import train_continuation

    roc = [[f"[MALE] went to town {i} .", f"he saw item {i} .", "he liked it .", f"he paid {i} dollars .", f"he took item {i} home ."]
           for i in range(40)]
    wp = [["a prompt .", "a long story about dragons ."]] * 3
    monkeypatch.setattr(train_continuation, "corpus_stories", lambda cache_dir=None: (roc, wp))
    monkeypatch.setattr(train_continuation, "load_split", lambda builder, split, cache_dir=None: datasets.Dataset.from_dict({"sentences": roc}))
    from storyeval_training.data.negatives import substitution

    monkeypatch.setattr(substitution.KeywordLexicon, "from_data_dir", lambda root: None)  # only contradicting endings use it
    fitted, featurised = [], []  # the stories each fit saw; the extractor and contexts of each featurisation
    real_fit, real_featurize = train_continuation.fit_resources, train_continuation.featurize

    def recording_fit(stories, order):
        fitted.append([" ".join(s) for s in stories])
        return real_fit(stories, order)

    def recording_featurize(extractor, contexts, continuations):
        featurised.append((extractor, list(contexts)))
        return real_featurize(extractor, contexts, continuations)

    monkeypatch.setattr(train_continuation, "fit_resources", recording_fit)
    monkeypatch.setattr(train_continuation, "featurize", recording_featurize)
    rated = tmp_path / "rated.jsonl"
    rated.write_text("".join(json.dumps({"context": f"Ken saw a cat number {i}.", "continuation": "He fed it.", "overall": 1 + i % 5,
                                         "relevance": 3, "interestingness": 2}) + "\n" for i in range(30)))
    results = train_continuation.train(train_continuation.parse_args(
        ["--output-dir", str(tmp_path / "run"), "--rated-pairs", str(rated), "--cloze-pairs", "40", "--epochs", "1", "--batch-size", "8",
         "--save-statistics", str(tmp_path / "statistics")]))
    assert results["cloze_cross_fitted_folds"] == 2 and 30 <= results["cloze_pairs"] <= 40  # up to 20 a fold
    full, *out_of_fold = fitted
    assert len(full) == 43 and len(out_of_fold) == 2
    # the cloze featurisations (right endings, then wrong ones, per fold) after the rated splits'
    cloze_calls = featurised[-4:]
    for fold, fold_stories in enumerate(out_of_fold):
        for extractor, contexts in cloze_calls[2 * fold : 2 * fold + 2]:
            assert contexts and not any(story.startswith(context) for context in contexts for story in fold_stories)
            assert all(story in fold_stories for story in (" ".join(s) for s in wp))  # WP never gives a cloze pair

    # the saved statistics, folds included, serve a later run without refitting; without the folds, a clear error
    fitted.clear()
    again = train_continuation.train(train_continuation.parse_args(
        ["--output-dir", str(tmp_path / "run2"), "--rated-pairs", str(rated), "--cloze-pairs", "40", "--epochs", "1", "--batch-size", "8",
         "--resources-dir", str(tmp_path / "statistics")]))
    assert not fitted and again["cloze_pairs"] == results["cloze_pairs"]
    import shutil

    shutil.rmtree(tmp_path / "statistics" / "fold1")
    with pytest.raises(FileNotFoundError, match="fold1'\\]: no statistics for the cross-fitted cloze pairs"):
        train_continuation.train(train_continuation.parse_args(
            ["--output-dir", str(tmp_path / "run3"), "--rated-pairs", str(rated), "--resources-dir", str(tmp_path / "statistics")]))
    assert not (tmp_path / "run3").exists()


def test_the_features_alone_head_has_no_charagram_embeddings_and_round_trips(tmp_path, capsys):
    from storyeval.models.continuation.model import ContinuationModel
    from storyeval_training.recipes import train_continuation

    torch.manual_seed(0)
    model = ContinuationModel(num_features=4, input_mode="features", hidden=8).eval()
    assert not any(name.startswith("embeddings") for name, _ in model.named_parameters())
    features = torch.tensor([[1.0, 2.0, float("nan"), 0.5], [0.0, 1.0, 2.0, 3.0]])
    with torch.no_grad():
        scores = model(["a ."] * 2, ["b ."] * 2, features)
        model.save(tmp_path / "head")
        again = ContinuationModel.load(tmp_path / "head")(["other text ."] * 2, ["changes nothing ."] * 2, features)
    assert scores.shape == (2, 3) and torch.allclose(scores, again, atol=1e-2)  # fp16 on disk
    with pytest.raises(SystemExit):
        train_continuation.parse_args(["--output-dir", str(tmp_path / "run"), "--input-mode", "features", "--features"])
    assert "reads the features alone" in capsys.readouterr().err
