"""across_pairs: each intact story against another story's broken copy that is at least as long, by the same kind of writer."""
import json

import datasets
import pytest

from storyeval_training.data import across_pairs
from storyeval_training.data.build_negatives import PAIR_FEATURES


def half_pair(story: str, words: int, writer: str) -> dict:
    intact = " ".join(f"{story}w{i}" for i in range(words))
    return {"id": f"{story}/wp/half", "context": "", "human": intact, "negative": " ".join(intact.split()[: words // 2]),
            "original": intact, "techniques": ["half", writer, "wp"]}


def save(folder, splits: dict) -> str:
    datasets.DatasetDict({split: datasets.Dataset.from_list(rows, features=PAIR_FEATURES) for split, rows in splits.items()}
                         ).save_to_disk(str(folder))
    return str(folder)


@pytest.fixture
def pairs(tmp_path):
    train = [half_pair("a", 10, "human"), half_pair("b", 20, "human"), half_pair("c", 24, "human"),
             half_pair("d", 10, "machine"), half_pair("e", 22, "machine"), half_pair("f", 200, "human")]
    return save(tmp_path / "half", {"train": train, "validation": [half_pair("g", 10, "human"), half_pair("h", 20, "human")]})


def test_partners_are_longer_copies_of_other_stories_by_the_same_kind_of_writer(pairs, tmp_path):
    out = tmp_path / "against"
    across_pairs.main(["--pairs", pairs, "--output-dir", str(out)])
    made = datasets.load_from_disk(str(out))
    train = made["train"]
    # a (10 words): b's and c's halves (10, 12 words) qualify, e's is a model's; d (10, a model's): only e's half (11)
    assert sorted(train["id"]) in (["a/wp/half/across/b", "d/wp/half/across/e"], ["a/wp/half/across/c", "d/wp/half/across/e"])
    for row in train:
        assert row["id"].split("/")[0] != row["id"].split("/")[-1]
        assert 1.0 <= len(row["negative"].split()) / len(row["human"].split()) <= 1.5
        assert row["techniques"][-1] == "across"
    # validation is paired within itself: g (10 words) against h's half (10 words)
    assert made["validation"]["id"] == ["g/wp/half/across/h"]
    record = json.loads((out / across_pairs.RECORD).read_text())
    assert record["pairs"] == {"train": 2, "validation": 1}
    assert record["intact_stories_without_partner"] == {"train": 4, "validation": 1}


def test_the_draw_is_seeded(pairs, tmp_path):
    runs = []
    for name in ("one", "two"):
        across_pairs.main(["--pairs", pairs, "--output-dir", str(tmp_path / name), "--seed", "7"])
        runs.append(datasets.load_from_disk(str(tmp_path / name))["train"]["id"])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("extra, message", [
    (["--min-length-ratio", "2", "--max-length-ratio", "1"], "--min-length-ratio must be above 0"),
    (["--min-length-ratio", "0"], "--min-length-ratio must be above 0"),
])
def test_bad_ratios_are_refused(pairs, tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit):
        across_pairs.main(["--pairs", pairs, "--output-dir", str(tmp_path / "out"), *extra])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_missing_input_and_existing_output_are_refused(pairs, tmp_path, capsys):
    with pytest.raises(SystemExit):
        across_pairs.main(["--pairs", str(tmp_path / "nowhere"), "--output-dir", str(tmp_path / "out")])
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "out").mkdir()
    with pytest.raises(SystemExit):
        across_pairs.main(["--pairs", pairs, "--output-dir", str(tmp_path / "out")])
    assert "exists: choose a new folder" in capsys.readouterr().err
