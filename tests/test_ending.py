"""An ending scorer completes a story checkpoint: one scorer, the story score mixed with the last sentences' score."""
import json

import pytest
from conftest import save_tiny_checkpoint

from storyeval.scoring.ending import EndingMixScorer, NeighbourMixScorer, OpeningEndingMixScorer, RunsMixScorer, lowest_mean, mixed
from storyeval.scoring.sequence import clear_loaded_scorers, load_scorer, load_story_classifier
from storyeval.text import (
    last_sentences,
    neighbouring_pairs,
    normalize_story,
    opening_and_ending,
    sentence_runs,
    sentences_with_words,
    window_starts,
)

STORIES = ["Ken went to the bar. He ordered a drink. He met a friend. They talked for hours. Ken went home happy.",
           "Ken went to the bar. He ordered a drink."]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("ending")
    story = save_tiny_checkpoint(root / "story")
    ending = save_tiny_checkpoint(root / "ending", ending_of=str(story), ending_weight=0.25, ending_sentences=2, window_stride=4)
    return story, ending


def test_the_score_is_the_story_score_mixed_with_the_last_two_sentences_score(folders):
    story_folder, ending_folder = folders
    clear_loaded_scorers()
    scorer = load_scorer("union", ending_folder)
    assert isinstance(scorer, EndingMixScorer) and scorer.weight == 0.25 and scorer.sentences == 2
    story, ending = load_story_classifier(story_folder), scorer.ending_scorer
    tails = [last_sentences(normalize_story(s), 2) for s in STORIES]
    assert tails[0] == "they talked for hours . [MALE] went home happy ."
    expected = [mixed(p, e, 0.25) for p, e in zip(story.score(STORIES), ending.score(tails))]
    assert scorer.score(STORIES) == pytest.approx(expected)
    assert scorer.settings().startswith(f"{ending_folder.name}_fp32_")


def test_the_settings_string_changes_with_the_weights_of_a_mix_or_its_part_not_with_its_records(tmp_path):
    import shutil

    from storyeval.checkpoints.resolution import scoring_digest

    story = save_tiny_checkpoint(tmp_path / "story")
    mix = save_tiny_checkpoint(tmp_path / "mix", ending_of=str(story), ending_weight=0.25, ending_sentences=2)
    clear_loaded_scorers()
    first = load_scorer("union", mix).settings()
    assert first.endswith(f"_weights-{scoring_digest(mix)}") and scoring_digest(mix) != scoring_digest(story)
    for folder in (story, mix):  # a new card or benchmark record scores as before
        (folder / "README.md").write_text("a card")
        (folder / "reference_scores.json").write_text("{}")
    clear_loaded_scorers()
    assert load_scorer("union", mix).settings() == first
    shutil.rmtree(story)
    save_tiny_checkpoint(story, window_stride=4)  # the part replaced under the same name
    clear_loaded_scorers()
    assert load_scorer("union", mix).settings() != first


def test_bad_input_is_refused_as_the_story_scorer_refuses_it(folders):
    clear_loaded_scorers()
    scorer = load_scorer("union", folders[1])
    with pytest.raises(ValueError, match=r"predictions\[1\] is empty or has no letters"):
        scorer.score(["A fine story. It ends well.", "..."])
    with pytest.raises(TypeError):
        scorer.score([3])


@pytest.mark.parametrize("mix", [EndingMixScorer, NeighbourMixScorer])
def test_a_part_that_reads_as_another_language_is_scored_since_the_story_passed_the_checks(folders, mix):
    # its last two sentences alone read as Spanish; the story as a whole is English, so it is scored, not refused
    story_text = ("Ken went to the bar with his friend. He ordered a drink and a sandwich for them. The barman said to them: "
                  "El perro y el gato de la casa. Los amigos de la familia y el perro.")
    story = load_story_classifier(folders[0])
    scorer = mix(story, story, 0.3) if mix is NeighbourMixScorer else mix(story, story, 0.3, 2)
    part = scorer.parts(story_text)[-1]
    with pytest.raises(ValueError, match="not English"):
        story.score([part])
    expected = mixed(story.score([story_text])[0], sum(story.score_checked(scorer.parts(story_text))) / len(scorer.parts(story_text)), 0.3)
    assert scorer.score([story_text]) == pytest.approx([expected])


def test_a_story_with_a_part_too_long_for_the_second_scorer_is_refused_by_its_own_index_before_scoring(folders, monkeypatch):
    clear_loaded_scorers()
    scorer = load_scorer("union", folders[1])  # the ending scorer reads 16-token windows 4 apart; the story scorer 8 apart
    one_sentence = "ken " * 500 + "."
    scorer.story_scorer.windows(one_sentence)  # the story scorer alone would take it
    problem = r"has a part the ending scorer reads that is [\d,]+ tokens long and needs \d+ windows of 16 tokens"
    with pytest.raises(ValueError, match="^" + problem):  # what `storyeval score` checks a file's long stories by
        scorer.windows(one_sentence)
    monkeypatch.setattr(scorer.story_scorer, "score_checked", lambda *args, **kwargs: pytest.fail("the story was scored"))
    with pytest.raises(ValueError, match=r"^predictions\[1\] " + problem):
        scorer.score(["A fine story. It ends well.", one_sentence])


def test_a_last_sentence_of_punctuation_alone_gives_way_to_the_last_two_with_words():
    assert last_sentences("Ann sat.</s>Bob ran.</s>Cal hid.</s>...</s>!", 2) == "Bob ran. Cal hid."
    assert last_sentences("Ann sat. Bob ran. Cal hid. ...", 2) == "Cal hid. ..."  # as the ending scorer was trained
    assert last_sentences("Only one sentence here.", 2) == "Only one sentence here."


@pytest.mark.parametrize("fields, message", [
    ({"ending_of": "x", "ending_weight": 1.0, "ending_sentences": 2}, "ending_weight must be between 0 and 1"),
    ({"ending_of": "x", "ending_weight": 0.2, "ending_sentences": 0}, "ending_sentences must be at least 1"),
    ({"ending_of": "x", "ending_weight": 0.2, "ending_sentences": 2, "ending_reads": "words"}, "ending_reads must be"),
    ({"ending_of": "x", "ending_weight": 0.2, "ending_sentences": 2, "ending_lowest_share": 0.0}, "ending_lowest_share must be in"),
    ({"ending_of": "x", "ending_weight": 0.2, "ending_sentences": 1, "ending_reads": "runs"}, "at least 2 for runs of sentences"),
])
def test_an_ending_config_without_a_weight_or_a_sentence_count_is_refused(fields, message):
    from huggingface_hub.errors import StrictDataclassClassValidationError

    from storyeval.models import UnionConfig

    with pytest.raises(StrictDataclassClassValidationError, match=message):
        UnionConfig(**fields)


def test_the_bundled_mixes_name_the_story_checkpoints_they_complete():
    from storyeval.checkpoints import resolution
    from storyeval.checkpoints.registry import metric_spec

    config = json.loads((resolution.HUB_CARDS / "union-wp-base-ending" / "config.json").read_text())
    assert config["ending_of"] == "storyeval/union-wp-base" and config["ending_weight"] == 0.2 and config["ending_sentences"] == 2
    config = json.loads((resolution.HUB_CARDS / "union-wp-base-ending-neighbours" / "config.json").read_text())
    assert config["ending_of"] == "storyeval/union-wp-base-ending" and config["ending_weight"] == 0.2
    assert config["ending_lowest_share"] == 0.5  # E5: the mean of the lower half of its pair scores
    assert config["ending_reads"] == "neighbours"
    config = json.loads((resolution.HUB_CARDS / "union-wp-base-complete" / "config.json").read_text())
    assert config["ending_of"] == "storyeval/union-wp-base-ending-neighbours" and config["ending_weight"] == 0.3
    assert config["ending_reads"] == "last_sentences" and config["ending_sentences"] == 2 and config["ending_lowest_share"] == 1.0
    for name, of, weight in (("union-wp-base-ordered", "storyeval/union-wp-base-complete", 0.3),
                             ("union-wp-ordered", "storyeval/union-wp-neighbours", 0.3)):
        config = json.loads((resolution.HUB_CARDS / name / "config.json").read_text())
        assert config["ending_of"] == of and config["ending_weight"] == weight  # E11, F7: one order scorer, two mixes
        assert config["ending_reads"] == "runs" and config["ending_sentences"] == 5 and config["ending_lowest_share"] == 1.0
    for name, of in (("union-wp-complete", "storyeval/union-wp-ordered"), ("union-roc-complete", "storyeval/union-roc-neighbours")):
        config = json.loads((resolution.HUB_CARDS / name / "config.json").read_text())
        assert config["ending_of"] == of and config["ending_weight"] == 0.5  # F8, F9: complete's ending scorer
        assert config["ending_reads"] == "last_sentences" and config["ending_sentences"] == 2
        assert ((resolution.HUB_CARDS / name / "model.safetensors").read_bytes()
                == (resolution.HUB_CARDS / "union-wp-base-complete" / "model.safetensors").read_bytes())  # one file in the clone
    assert metric_spec("union").default == "wp-base-complete"


def test_int8_is_refused_for_a_mix_before_any_model_loads(folders):
    from storyeval.scoring.int8.runtime import checkpoint_int8_problem

    problem = checkpoint_int8_problem(folders[1])
    assert problem.startswith(f"dtype='int8' is not offered for {folders[1].name}: it mixes {folders[0]} with an ending scorer")
    assert "\n" not in problem


def test_a_neighbour_mix_mixes_in_the_mean_score_of_every_two_neighbouring_sentences(folders):
    story = load_story_classifier(folders[0])
    scorer = NeighbourMixScorer(story, story, 0.3, name="n")
    pairs = neighbouring_pairs(normalize_story(STORIES[0]))
    assert len(pairs) == 4 and pairs[0] == "[MALE] went to the bar . he ordered a drink ."
    expected = mixed(story.score(STORIES[:1])[0], sum(story.score(pairs)) / 4, 0.3)
    assert scorer.score(STORIES[:1]) == pytest.approx([expected])


def test_the_lowest_mean_counts_its_share_in_fractions_of_a_score():
    assert lowest_mean([0.9, 0.2, 0.8]) == pytest.approx(1.9 / 3)
    assert lowest_mean([5, 1, 4, 2, 3, 6, 7, 8, 9, 10], 0.25) == pytest.approx((1 + 2 + 0.5 * 3) / 2.5)
    assert lowest_mean([0.9, 0.1, 0.8, 0.7], 0.25) == pytest.approx(0.1) and lowest_mean([0.4], 0.25) == pytest.approx(0.4)


def test_a_neighbour_mix_with_a_lowest_share_mixes_in_the_mean_of_its_lowest_pairs(folders, tmp_path):
    story = load_story_classifier(folders[0])
    pairs = neighbouring_pairs(normalize_story(STORIES[0]))
    expected = mixed(story.score(STORIES[:1])[0], lowest_mean(story.score(pairs), 0.5), 0.3)
    assert NeighbourMixScorer(story, story, 0.3, lowest_share=0.5).score(STORIES[:1]) == pytest.approx([expected])
    with pytest.raises(ValueError, match="the lowest share must be in"):
        NeighbourMixScorer(story, story, 0.3, lowest_share=1.5)
    clear_loaded_scorers()
    folder = save_tiny_checkpoint(tmp_path / "quarter", ending_of=str(folders[0]), ending_weight=0.3, ending_sentences=2,
                                  ending_reads="neighbours", ending_lowest_share=0.5, window_stride=4)
    loaded = load_scorer("union", folder)
    assert loaded.lowest_share == 0.5 and load_scorer("union", folders[1]).lowest_share == 1.0


def test_a_story_of_one_sentence_scores_as_its_story_scorer_does(folders):
    story = load_story_classifier(folders[0])
    assert NeighbourMixScorer(story, story, 0.3).score(["Ken went to the bar."]) == pytest.approx(story.score(["Ken went to the bar."]))


def test_a_neighbour_checkpoint_completes_a_mix_and_loads_as_a_neighbour_mix(folders, tmp_path):
    clear_loaded_scorers()
    neighbours = save_tiny_checkpoint(tmp_path / "neighbours", ending_of=str(folders[1]), ending_weight=0.1, ending_sentences=2,
                                      ending_reads="neighbours", window_stride=4)
    scorer = load_scorer("union", neighbours)
    assert isinstance(scorer, NeighbourMixScorer) and isinstance(scorer.story_scorer, EndingMixScorer)
    pairs = neighbouring_pairs(normalize_story(STORIES[0]))
    expected = mixed(scorer.story_scorer.score(STORIES[:1])[0], sum(scorer.ending_scorer.score(pairs)) / len(pairs), 0.1)
    assert scorer.score(STORIES[:1]) == pytest.approx([expected])


def test_a_mix_of_a_mix_checks_and_tokenizes_each_story_once(folders, tmp_path, monkeypatch):
    from storyeval.scoring import ending, sequence

    clear_loaded_scorers()
    neighbours = save_tiny_checkpoint(tmp_path / "once", ending_of=str(folders[1]), ending_weight=0.1, ending_sentences=2,
                                      ending_reads="neighbours", window_stride=4)
    scorer = load_scorer("union", neighbours)  # neighbours over an ending over a story scorer, as the default
    expected = scorer.score(STORIES)
    checks, tokenized = [], []
    for module in (ending, sequence):
        real_check = module.check_texts
        monkeypatch.setattr(module, "check_texts", lambda texts, *a, real_check=real_check: checks.append(len(texts)) or real_check(texts, *a))
    base = scorer.story_scorer.story_scorer
    real_windows = base.windows
    monkeypatch.setattr(base, "windows", lambda text: tokenized.append(text) or real_windows(text))
    assert scorer.score(STORIES) == expected
    assert checks == [len(STORIES)] and [text for text in tokenized if text in STORIES] == STORIES


def test_the_opening_and_ending_is_the_first_sentence_and_the_last_two_after_it():
    assert opening_and_ending("A sat. B ran. C hid. D ate. E slept.", 2) == "A sat. D ate. E slept."
    assert opening_and_ending("A sat. B ran. C hid.", 2) == "A sat. B ran. C hid."  # three sentences: read whole
    assert opening_and_ending("A sat. B ran.", 2) == "A sat. B ran." and opening_and_ending("A sat.", 2) == "A sat."
    assert opening_and_ending("A sat.</s>B ran.</s>C hid.</s>...</s>!", 2) == "A sat. B ran. C hid."  # the last with words


def test_an_opening_ending_checkpoint_mixes_in_its_score_of_the_first_and_last_two_sentences(folders, tmp_path):
    clear_loaded_scorers()
    part = save_tiny_checkpoint(tmp_path / "opening", ending_of=str(folders[0]), ending_weight=0.3, ending_sentences=2,
                                ending_reads="opening_ending", window_stride=4)
    scorer = load_scorer("union", part)
    assert isinstance(scorer, OpeningEndingMixScorer) and scorer.reads == "opening-and-ending"
    read = scorer.tail(STORIES[0])
    assert read == "[MALE] went to the bar . they talked for hours . [MALE] went home happy ."
    story = load_story_classifier(folders[0])
    expected = mixed(story.score(STORIES[:1])[0], scorer.ending_scorer.score_checked([read])[0], 0.3)
    assert scorer.score(STORIES[:1]) == pytest.approx([expected])


def test_runs_of_sentences_overlap_by_one_and_the_last_ends_where_the_story_ends():
    story = " ".join(f"S{i} ran." for i in range(1, 13))
    assert sentence_runs(story, 5) == ["S1 ran. S2 ran. S3 ran. S4 ran. S5 ran.", "S5 ran. S6 ran. S7 ran. S8 ran. S9 ran.",
                                       "S8 ran. S9 ran. S10 ran. S11 ran. S12 ran."]
    assert sentence_runs("A sat. B ran.", 5) == ["A sat. B ran."] and sentence_runs("...", 5) == []  # short: read whole
    assert sentence_runs(story, 2) == neighbouring_pairs(story)  # two-sentence runs are the neighbour scorer's pairs
    with pytest.raises(ValueError, match="at least two sentences"):
        sentence_runs(story, 1)


def test_a_runs_checkpoint_mixes_in_the_mean_score_of_every_run_of_sentences(folders, tmp_path):
    clear_loaded_scorers()
    order = save_tiny_checkpoint(tmp_path / "order", ending_of=str(folders[0]), ending_weight=0.2, ending_sentences=3,
                                 ending_reads="runs", window_stride=4)
    scorer = load_scorer("union", order)
    assert isinstance(scorer, RunsMixScorer) and scorer.reads == "order" and scorer.sentences == 3
    runs = sentence_runs(normalize_story(STORIES[0]), 3)
    assert len(runs) == 2 and runs[1].startswith("he met a friend .")
    story = load_story_classifier(folders[0])
    expected = [mixed(story.score(STORIES[:1])[0], sum(scorer.ending_scorer.score_checked(runs)) / 2, 0.2),
                mixed(story.score(STORIES[1:])[0], scorer.ending_scorer.score_checked([normalize_story(STORIES[1])])[0], 0.2)]
    assert scorer.score(STORIES) == pytest.approx(expected)


@pytest.mark.parametrize("reads", ["last_sentences", "neighbours", "runs"])
def test_a_part_is_read_as_cut_from_the_prepared_story_never_normalised_again(folders, tmp_path, reads):
    # normalising twice turns a closing quote '' into an opening one ``: the parts' scorers were trained on text
    # normalised once, so the second scorer must read a part as the mix cut it
    clear_loaded_scorers()
    part_folder = save_tiny_checkpoint(tmp_path / reads, ending_of=str(folders[0]), ending_weight=0.3, ending_sentences=2,
                                       ending_reads=reads, window_stride=4)
    scorer = load_scorer("union", part_folder)
    story_text = 'Ken went to the bar. "Oh yeah?" he said. They talked for hours. Ken went home. "Never again!" he said.'
    parts = scorer.parts(story_text)
    assert any("''" in part for part in parts) and all(normalize_story(part) != part for part in parts if "''" in part)
    assert not scorer.ending_scorer.preprocess and scorer.story_scorer.preprocess
    story = load_story_classifier(folders[0])
    reader = story.reading_as_given()
    assert reader.model is story.model and story.preprocess and not reader.preprocess  # the loaded scorer is untouched
    as_cut = sum(scorer.ending_scorer.score_checked(parts)) / len(parts)
    expected = mixed(load_story_classifier(folders[0]).score([story_text])[0], as_cut, 0.3)
    assert scorer.score([story_text]) == pytest.approx([expected])


def test_window_starts_are_one_every_stride_and_the_last_ends_where_the_items_end():
    assert window_starts(12, 5, 4) == [0, 4, 7] and window_starts(9, 5, 4) == [0, 4]
    assert window_starts(5, 5, 2) == [0] and window_starts(4, 5, 2) == []
    assert sentences_with_words("A sat. B ran.") == ["A sat.", "B ran."] and sentences_with_words("...") == []
