"""order_pairs: two intact stories of different lengths, by the same kind of writer, in the order a scorer gives them."""
import datasets
import pytest

from storyeval_training.data import order_pairs
from storyeval_training.data.build_negatives import PAIR_FEATURES


def half_pair(story: str, words: int, writer: str, kind: str = "half") -> dict:
    intact = " ".join(f"{story}w{i}" for i in range(words))
    return {"id": f"{story}/wp/{kind}", "context": "", "human": intact, "negative": " ".join(intact.split()[: words // 2]),
            "original": intact, "techniques": [kind, writer, "wp"]}


def rows(pairs: list[dict]) -> datasets.Dataset:
    return datasets.Dataset.from_list(pairs, features=PAIR_FEATURES)


def test_each_story_once_and_its_partner_differs_in_length_and_follows_the_scores():
    split = rows([half_pair("a", 10, "human"), half_pair("a", 10, "human", "cut"), half_pair("b", 20, "human"),
                  half_pair("c", 11, "human"), half_pair("d", 30, "machine")])
    stories = order_pairs.intact_stories(split)
    assert [story_id.split("/")[0] for story_id in stories["id"]] == ["a", "b", "c", "d"]
    scores = [0.9, 0.2, 0.4, 0.5]
    made, counts = order_pairs.order_pairs(stories, scores, min_ratio=1.25, seed=0)
    by_id = {row["id"]: row for row in made}
    # a (10 words) pairs with b (20), not c (11); b with a or c; c with b; d, the one model's story, with none
    assert {"a/order/b", "c/order/b"} <= set(by_id) and len(by_id) == 3 and ({"b/order/a", "b/order/c"} & set(by_id))
    for row in made:  # the story scored higher is the pair's higher one: a 0.9 > c 0.4 > b 0.2
        assert row["negative"].startswith("bw")
    assert by_id["c/order/b"]["techniques"] == ["order", "human", "wp"]
    assert counts == {"without_partner": 1, "tied": 0}  # d, the one model's story


def test_tied_scores_are_left_out_and_counted():
    stories = order_pairs.intact_stories(rows([half_pair("a", 10, "human"), half_pair("b", 20, "human")]))
    made, counts = order_pairs.order_pairs(stories, [0.5, 0.5], min_ratio=1.25, seed=0)
    assert len(made) == 0 and counts == {"without_partner": 0, "tied": 2}


def test_bad_options_are_refused_before_anything_loads(tmp_path, capsys):
    pairs = tmp_path / "pairs"
    datasets.DatasetDict({"train": rows([half_pair("a", 10, "human")])}).save_to_disk(str(pairs))
    cases = [
        (["--pairs", str(pairs), "--checkpoint", str(tmp_path), "--min-length-ratio", "0.5"], "--min-length-ratio must be at least 1"),
        (["--pairs", str(tmp_path / "nowhere"), "--checkpoint", str(tmp_path)], "no such folder"),
        (["--pairs", str(pairs), "--checkpoint", str(tmp_path / "nowhere")], "--checkpoint"),
        (["--pairs", str(pairs), "--checkpoint", str(tmp_path), "--output-dir", str(pairs)], "exists: choose a new folder"),
    ]
    for extra, message in cases:
        argv = extra if "--output-dir" in extra else [*extra, "--output-dir", str(tmp_path / "out")]
        with pytest.raises(SystemExit):
            order_pairs.main(argv)
        assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_only_the_asked_splits_are_scored_and_a_missing_one_is_refused(tmp_path, monkeypatch):
    pairs = tmp_path / "pairs"
    split = [half_pair("a", 10, "human"), half_pair("b", 20, "human")]
    datasets.DatasetDict({name: rows(split) for name in ("train", "validation", "test")}).save_to_disk(str(pairs))
    scored = []

    class Scorer:
        def score(self, texts, **kwargs):
            scored.append(list(texts))
            return [float(len(text)) for text in texts]

    monkeypatch.setattr("storyeval.scoring.sequence.load_story_classifier", lambda *args, **kwargs: Scorer())
    order_pairs.main(["--pairs", str(pairs), "--checkpoint", str(tmp_path), "--output-dir", str(tmp_path / "out")])
    assert len(scored) == 2 and set(datasets.load_from_disk(str(tmp_path / "out"))) == {"train", "validation"}
    with pytest.raises(SystemExit, match="has no split dev"):
        order_pairs.main(["--pairs", str(pairs), "--checkpoint", str(tmp_path), "--output-dir", str(tmp_path / "out2"),
                          "--splits", "train", "dev"])
    assert not (tmp_path / "out2").exists()
