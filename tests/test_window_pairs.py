"""window_pairs: every window of a story's sentences against the same sentences shuffled, or with a stray sentence."""
import datasets
import pytest

from storyeval.text import normalize_story, split_sentences
from storyeval_training.data import window_pairs

WORDS = "apple bread cheese dough eggs flour grapes honey ice jam".split()
STORY_FEATURES = datasets.Features({name: datasets.Value("string") for name in ("unit", "kind", "origin", "view", "text")})


def story(unit: str, sentences: int, view: str = "wp", kind: str = "intact", first: int = 0) -> dict:
    text = " ".join(f"{unit} says {WORDS[i]}." for i in range(first, first + sentences))
    return {"unit": f"{unit}/{view}", "kind": kind, "origin": "machine", "view": view, "text": text}


def rows(stories: list[dict]) -> datasets.Dataset:
    return datasets.Dataset.from_list(stories, features=STORY_FEATURES)


def test_windows_start_every_stride_and_the_last_ends_where_the_story_ends():
    sentences = [str(i) for i in range(10)]
    assert [start for start, _ in window_pairs.windows(sentences, 5, 2)] == [0, 2, 4, 5]
    assert [start for start, _ in window_pairs.windows(sentences[:9], 5, 2)] == [0, 2, 4]
    assert window_pairs.windows(sentences[:5], 5, 2) == [(0, sentences[:5])]
    assert window_pairs.windows(sentences[:4], 5, 2) == []


def test_each_window_is_paired_with_its_own_sentences_in_another_order():
    pairs, left = window_pairs.window_pairs(rows([story("ann", 9), story("bob", 3), story("ann", 9, kind="shuffle")]),
                                            seed=0, size=5, stride=2)
    assert len(pairs) == 3 and left == {"too_short": 1}  # bob: three sentences; the broken copy is not read
    sentences = split_sentences(normalize_story(story("ann", 9)["text"]))
    for row in pairs:
        start = int(row["id"].split("/")[-1])
        assert row["human"] == row["original"] == " ".join(sentences[start:start + 5])
        negative = split_sentences(row["negative"])
        assert sorted(negative) == sorted(sentences[start:start + 5]) and negative != sentences[start:start + 5]
        assert row["techniques"][:3] == ["window-shuffle", "machine", "wp"]


def test_a_stray_pair_holds_a_sentence_of_another_story_by_the_same_kind_of_writer_among_the_windows_first():
    people = {**story("cat", 6), "origin": "human"}  # another kind of writer: never the stray sentence's story
    pairs, left = window_pairs.window_pairs(rows([story("ann", 9), story("bob", 5), people]), seed=0, size=5, stride=2,
                                            negative="stray")
    assert len(pairs) == 3 + 1 and left == {"no_other_story": 2}  # cat's two windows: no other story by a person
    sentences = {name: set(split_sentences(normalize_story(story(name, n)["text"]))) for name, n in (("ann", 9), ("bob", 5))}
    assert not sentences["ann"] & sentences["bob"]
    for row in pairs:
        own = split_sentences(row["human"])
        negative = split_sentences(row["negative"])
        stray = [sentence for sentence in negative if sentence not in own]
        assert len(negative) == 5 and len(stray) == 1 and negative.index(stray[0]) > 0
        assert [sentence for sentence in negative if sentence in own] == own[:4]
        assert stray[0] in sentences["bob" if row["id"].startswith("ann") else "ann"]
        assert row["techniques"][0] == "window-stray" and "/window-stray/" in row["id"]


def test_a_window_the_split_already_holds_is_trained_on_once():
    # the check saves a story at WP length and as a ROC-length window of it
    split = rows([story("ann", 9), story("ann", 5, view="roc", first=2)])
    pairs, left = window_pairs.window_pairs(split, seed=0, size=5, stride=2)
    assert len(pairs) == 3 and left == {"window_seen": 1}
    assert len(set(pairs["human"])) == 3


@pytest.mark.parametrize("argv, message", [(["--sentences", "3"], "--sentences must be at least 4"),
                                           (["--stride", "0"], "--stride must be at least 1")])
def test_bad_options_stop_in_one_line(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit):
        window_pairs.parse_args(["--stories", str(tmp_path), "--output-dir", str(tmp_path / "out"), *argv])
    assert message in capsys.readouterr().err
