"""neighbour_pairs: two neighbouring sentences of a story against the first of them and another story's sentence."""
import datasets
import pytest

from storyeval.text import normalize_story, split_sentences
from storyeval_training.data import neighbour_pairs

STORY_FEATURES = datasets.Features({name: datasets.Value("string") for name in ("unit", "kind", "origin", "view", "text")})


def story(unit: str, sentences: int, origin: str = "machine", kind: str = "intact") -> dict:
    text = " ".join(f"{unit} says thing {i}." for i in range(sentences))
    return {"unit": unit, "kind": kind, "origin": origin, "view": "wp", "text": text}


def rows(stories: list[dict]) -> datasets.Dataset:
    return datasets.Dataset.from_list(stories, features=STORY_FEATURES)


def test_both_sides_are_two_sentences_and_the_stray_one_comes_from_another_story_by_the_same_kind_of_writer():
    split = rows([story("ann", 6), story("bob", 5), story("cal", 7, origin="human"), story("ann", 6, kind="shuffle")])
    pairs, left = neighbour_pairs.neighbour_pairs(split, seed=0)
    by_story = {row["id"].split("/")[0]: row for row in pairs}
    assert set(by_story) == {"ann", "bob"} and left == {"no_other_story": 1}  # cal: the only person's story
    for name, other in (("ann", "bob"), ("bob", "ann")):
        row = by_story[name]
        at = int(row["id"].split("/")[-1])
        sentences = split_sentences(normalize_story(story(name, 7)["text"]))  # the story as the scorers prepare it
        assert row["human"] == f"{sentences[at - 1]} {sentences[at]}"
        stray = row["negative"].removeprefix(f"{sentences[at - 1]} ")
        assert stray in split_sentences(normalize_story(story(other, 7)["text"]))
        assert row["techniques"][:3] == ["neighbour", "machine", "wp"]


def test_with_repeats_each_story_also_gives_its_sentence_said_twice_and_the_stray_pairs_stay_the_same():
    split = rows([story("ann", 6), story("bob", 5), story("dan", 8)])
    plain, _ = neighbour_pairs.neighbour_pairs(split, seed=3)
    both, _ = neighbour_pairs.neighbour_pairs(split, seed=3, repeats=True)
    assert [row for row in both if row["techniques"][0] == "neighbour"] == list(plain)
    for row in (row for row in both if row["techniques"][0] == "repeat"):
        first = row["human"][:row["human"].index(".") + 1]
        assert row["negative"] == f"{first} {first}" and row["id"].split("/")[1] == "repeat"
    assert len(both) == 2 * len(plain) and len({row["id"] for row in both}) == len(both)


def test_with_swaps_each_story_also_gives_its_two_neighbours_in_the_wrong_order():
    split = rows([story("ann", 6), story("bob", 5), story("dan", 8)])
    plain, _ = neighbour_pairs.neighbour_pairs(split, seed=3, repeats=True)
    both, _ = neighbour_pairs.neighbour_pairs(split, seed=3, repeats=True, swaps=True)
    assert [row for row in both if row["techniques"][0] != "swap"] == list(plain)
    for row in (row for row in both if row["techniques"][0] == "swap"):
        first, second = row["human"][:row["human"].index(".") + 1], row["human"][row["human"].index(".") + 2:]
        assert row["negative"] == f"{second} {first}"
    assert len(both) == 3 * len(split) and len({row["id"] for row in both}) == len(both)


def test_short_stories_are_left_out_and_counted():
    pairs, left = neighbour_pairs.neighbour_pairs(rows([story("ann", 3), story("bob", 5), story("cal", 5)]), seed=0)
    assert len(pairs) == 2 and left == {"too_short": 1}
    # a split of short stories alone has no pairs: an empty split of the pair format, not an error
    pairs, left = neighbour_pairs.neighbour_pairs(rows([story("ann", 3)]), seed=0)
    assert len(pairs) == 0 and "negative" in pairs.column_names and left == {"too_short": 1}


@pytest.mark.parametrize("tool", ["ending_pairs", "neighbour_pairs", "window_pairs"])
def test_the_shared_options_are_refused_before_anything_is_written(tmp_path, capsys, tool):
    import importlib

    main = importlib.import_module(f"storyeval_training.data.{tool}").main
    stories = tmp_path / "stories"
    datasets.DatasetDict({"train": rows([story("ann", 6)])}).save_to_disk(str(stories))
    for extra, message in ((["--stories", str(tmp_path / "nowhere")], "no such folder"),
                           (["--stories", str(stories), "--output-dir", str(stories)], "exists: choose a new folder")):
        argv = extra if "--output-dir" in extra else [*extra, "--output-dir", str(tmp_path / "out")]
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit, match="has no split validation"):
        main(["--stories", str(stories), "--output-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("tool", ["ending_pairs", "neighbour_pairs", "window_pairs"])
def test_a_folder_that_is_not_the_checks_stories_is_refused_in_one_line_before_anything_is_written(tmp_path, tool):
    import importlib

    folder = tmp_path / "pairs"
    datasets.DatasetDict({"train": datasets.Dataset.from_list([{"id": "a", "human": "x", "negative": "y"}])}).save_to_disk(str(folder))
    with pytest.raises(SystemExit, match=f"^{tool}: --stories {folder}: no .*column: not modern_breaks' stories$"):
        importlib.import_module(f"storyeval_training.data.{tool}").main(["--stories", str(folder), "--output-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
