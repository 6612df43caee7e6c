"""ending_pairs: a story's last sentences against as many sentences before a cut in the same story."""
import random

import datasets
import pytest

from storyeval_training.data import ending_pairs

STORY_FEATURES = datasets.Features({name: datasets.Value("string") for name in ("unit", "kind", "origin", "text")})


def story(unit: str, sentences: int, kind: str = "intact", closing: str = ".") -> dict:
    text = " ".join(f"Sentence {unit} number {i} goes here." for i in range(sentences - 1))
    return {"unit": unit, "kind": kind, "origin": "machine", "text": f"{text} Sentence {unit} ends here{closing}"}


def test_both_sides_hold_as_many_sentences_and_come_from_the_same_story():
    sentences = [f"s{i} ." for i in range(9)]
    rng = random.Random(0)
    for _ in range(50):
        pair = ending_pairs.story_pair("a", sentences, 2, rng, "human")
        cut = int(pair["id"].split("/")[-1])
        assert 2 <= cut <= 8 and pair["human"] == "s7 . s8 ." and pair["negative"] == f"s{cut - 2} . s{cut - 1} ."
        assert pair["techniques"] == ["ending", "human", f"cut {cut} of 9"]


def test_with_the_opening_both_sides_begin_with_the_first_sentence_and_the_cut_never_takes_it():
    sentences = [f"s{i} ." for i in range(5)]
    rng = random.Random(0)
    for _ in range(50):
        pair = ending_pairs.story_pair("a", sentences, 2, rng, "human", opening=True)
        cut = int(pair["id"].split("/")[-1])
        assert 3 <= cut <= 4 and pair["human"] == "s0 . s3 . s4 ." and pair["negative"] == f"s0 . s{cut - 2} . s{cut - 1} ."
        assert len(pair["negative"].split(" . ")) == 3
    # without it, the draws are those the shipped ending scorer's pairs were built by
    rng, old = random.Random(0), random.Random(0)
    for _ in range(50):
        cut = len(sentences) // 2 if old.random() < 0.5 else old.randint(2, len(sentences) - 1)
        assert ending_pairs.story_pair("a", sentences, 2, rng, "human")["id"] == f"a/ending/{max(cut, 2)}"


def test_short_stories_and_stories_stopped_mid_sentence_are_left_out_and_counted():
    rows = datasets.Dataset.from_list([story("a", 6), story("b", 3), story("c", 6, closing=" and then"),
                                       story("a", 6, kind="shuffle")], features=STORY_FEATURES)
    pairs, left = ending_pairs.ending_pairs(rows, 2, seed=0)
    assert [row["id"].split("/")[0] for row in pairs] == ["a"]
    assert left == {"too_short": 1, "stopped_mid_sentence": 1}


def test_matched_lengths_keep_both_sides_within_the_ratio_and_prefer_the_half():
    sentences = ["a b c .", "a b c .", "a b c d e f g h i j .", "a b c .", "a b c .", "a b c .", "a b c d e f g h .", "a b c ."]
    rng = random.Random(0)
    cuts = []
    for _ in range(60):
        pair = ending_pairs.story_pair("a", sentences, 2, rng, "human", match_length=1.25)
        assert ending_pairs.length_ratio(pair["human"], pair["negative"]) <= 1.25
        cuts.append(int(pair["id"].split("/")[-1]))
    assert set(cuts) == {4, 7} and 15 < cuts.count(4) < 45  # the half (4) when drawn, else the nearest in words (7)
    assert ending_pairs.story_pair("a", ["a .", "a .", "a .", "a b c d e f g h i j ."], 2, rng, "human", match_length=1.5) is None


def test_only_texts_reaching_their_story_end_are_endings_and_unmatched_stories_are_counted():
    rows = datasets.Dataset.from_list([story("a", 6), story("a", 6, kind="half"), story("b", 6), story("b", 6, kind="shuffle")],
                                      features=STORY_FEATURES)
    pairs, left = ending_pairs.ending_pairs(rows, 2, seed=0, reaching_end=True)
    assert [row["id"].split("/")[0] for row in pairs] == ["a"] and left == {"stops_before_story_end": 1}
    short_end = {"unit": "c", "kind": "intact", "origin": "machine",
                 "text": "One two three four five six seven. One two three four five six seven. One two three four five six seven. Ends."}
    pairs, left = ending_pairs.ending_pairs(datasets.Dataset.from_list([short_end], features=STORY_FEATURES), 2, seed=0, match_length=1.25)
    assert len(pairs) == 0 and left == {"no_cut_of_matching_length": 1}


def test_more_sentences_than_a_short_storys_cut_keeps_leave_short_stories_out_counted():
    rows = datasets.Dataset.from_list([story("a", 6), story("b", 5), story("c", 4)], features=STORY_FEATURES)
    pairs, left = ending_pairs.ending_pairs(rows, 5, seed=0)
    assert [row["id"].split("/")[0] for row in pairs] == ["a"] and left == {"too_short": 2}
    pair = pairs[0]
    assert pair["human"].count(".") == pair["negative"].count(".") == 5  # both sides five sentences: the cut at the earliest


def test_bad_options_are_refused_before_anything_is_written(tmp_path, capsys):
    stories = tmp_path / "stories"
    datasets.DatasetDict({"train": datasets.Dataset.from_list([story("a", 6)], features=STORY_FEATURES)}).save_to_disk(str(stories))
    # the options it shares with neighbour_pairs: test_neighbour_pairs.py, for both tools
    with pytest.raises(SystemExit):
        ending_pairs.main(["--stories", str(stories), "--sentences", "0", "--output-dir", str(tmp_path / "out")])
    assert "--sentences must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ending_pairs.main(["--stories", str(stories), "--match-length", "1", "--output-dir", str(tmp_path / "out")])
    assert "--match-length must be above 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    ending_pairs.main(["--stories", str(stories), "--output-dir", str(tmp_path / "out"), "--splits", "train"])
    assert len(datasets.load_from_disk(str(tmp_path / "out"))["train"]) == 1


def test_several_cuts_per_story_take_the_half_and_distinct_others_all_sharing_the_ending():
    sentences = [f"s{i} ." for i in range(10)]
    pairs = ending_pairs.pairs_of_story("a", sentences, 2, 4, random.Random(0), "machine")
    cuts = [int(pair["id"].split("/")[-1]) for pair in pairs]
    assert len(set(cuts)) == 4 and 5 in cuts and all(2 <= c <= 9 for c in cuts)
    assert {pair["human"] for pair in pairs} == {"s8 . s9 ."}
    assert len(ending_pairs.pairs_of_story("a", sentences[:5], 2, 8, random.Random(0), "machine")) == 3  # fewer cuts than asked: all of them
    # with matched lengths, only the cuts within the ratio; none: no pair
    uneven = ["a b c .", "a b c .", "a b c d e f g h i j .", "a b c .", "a b c .", "a b c .", "a b c d e f g h .", "a b c ."]
    pairs = ending_pairs.pairs_of_story("a", uneven, 2, 8, random.Random(0), "machine", match_length=1.25)
    assert sorted(int(p["id"].split("/")[-1]) for p in pairs) == [3, 4, 7]
    assert all(ending_pairs.length_ratio(p["human"], p["negative"]) <= 1.25 for p in pairs)


def test_one_cut_per_story_draws_the_pairs_the_shipped_scorers_were_built_from():
    rows = datasets.Dataset.from_list([story(u, 8) for u in "abcdef"], features=STORY_FEATURES)
    one, _ = ending_pairs.ending_pairs(rows, 2, seed=3)
    rng = random.Random(3)
    assert one["id"] == [ending_pairs.story_pair(u, ending_pairs.textlib.split_sentences(ending_pairs.textlib.normalize_story(
        story(u, 8)["text"])), 2, rng, "machine")["id"] for u in "abcdef"]
    several, left = ending_pairs.ending_pairs(rows, 2, seed=3, cuts=3)
    assert len(several) == 18 and not left


def test_cuts_per_story_below_one_is_refused(tmp_path, capsys):
    stories = tmp_path / "stories"
    datasets.DatasetDict({"train": datasets.Dataset.from_list([story("a", 6)], features=STORY_FEATURES)}).save_to_disk(str(stories))
    with pytest.raises(SystemExit):
        ending_pairs.main(["--stories", str(stories), "--cuts-per-story", "0", "--output-dir", str(tmp_path / "out")])
    assert "--cuts-per-story must be at least 1, got 0" in capsys.readouterr().err and not (tmp_path / "out").exists()
