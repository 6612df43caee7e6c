"""System comparison: the statistics, matching systems' files, and `storyeval compare`."""
import json

import numpy as np
import pytest

from storyeval.analysis.compare import ComparisonInputError, compare_files, compare_systems
from storyeval.cli import main as cli

FAST = {"resamples": 999}


def paired_scores(items=60, gain=0.1, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.8, items)
    return base + gain + rng.normal(0, 0.03, items), base


def test_a_clearly_better_is_significant():
    better, worse = paired_scores()
    result = compare_systems({"better": better.tolist(), "worse": worse.tolist()}, **FAST)
    pair = result.pairs[0]
    assert (pair.a, pair.b) == ("better", "worse")
    assert pair.p_a_greater < 0.01 and pair.p_b_greater > 0.99
    assert pair.ci_low > 0 and pair.a_wins > 0.9
    assert pair.mean_difference == pytest.approx(np.mean(better - worse))
    system = result.systems[0]
    assert system.ci_low < system.mean < system.ci_high


def test_identical_systems_are_not_significant():
    scores, _ = paired_scores()
    result = compare_systems({"a": scores.tolist(), "b": scores.tolist()}, **FAST)
    pair = result.pairs[0]
    assert pair.p_a_greater == 1.0 and pair.p_b_greater == 1.0
    assert (pair.ci_low, pair.ci_high, pair.ties) == (0.0, 0.0, 1.0)


def test_noise_alone_is_not_significant():
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 80)
    result = compare_systems({"a": base + rng.normal(0, 0.05, 80), "b": base + rng.normal(0, 0.05, 80)}, **FAST)
    assert min(result.pairs[0].p_a_greater, result.pairs[0].p_b_greater) > 0.05


def test_seeded_resampling_repeats_exactly():
    better, worse = paired_scores()
    first = compare_systems({"a": better, "b": worse}, seed=3, **FAST)
    assert compare_systems({"a": better, "b": worse}, seed=3, **FAST) == first


def test_every_pair_in_order():
    a, b = paired_scores()
    result = compare_systems({"x": a, "y": b, "z": b}, **FAST)
    assert [(p.a, p.b) for p in result.pairs] == [("x", "y"), ("x", "z"), ("y", "z")]
    assert "p(A>B)" in result.table()


@pytest.mark.parametrize(
    "scores, error, message",
    [
        ({"only": [0.1, 0.2]}, ValueError, "at least two systems"),
        ({"a": [0.1, 0.2], "b": [0.1]}, ValueError, "lengths"),
        ({"a": [0.1], "b": [0.2]}, ValueError, "at least two items"),
        ({"a": [0.1, float("nan")], "b": [0.1, 0.2]}, ValueError, "not finite"),
        ({"a": [0.1, "x"], "b": [0.1, 0.2]}, TypeError, "must be a number"),
        ({"a": "0.1", "b": [0.1]}, TypeError, "list of numbers"),
        ([[0.1, 0.2], [0.1, 0.2]], TypeError, "map system names"),
    ],
)
def test_bad_scores_are_refused(scores, error, message):
    with pytest.raises(error, match=message):
        compare_systems(scores)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_files_matched_by_id_in_any_order(tmp_path):
    better, worse = paired_scores(items=30)
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": f"p{i}", "score": s} for i, s in enumerate(better)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": f"p{i}", "score": s} for i, s in reversed(list(enumerate(worse)))])
    result, scores, from_files = compare_files([a, b], **FAST)
    assert from_files and scores["b"] == pytest.approx(worse.tolist())
    assert result.pairs[0].a_wins > 0.9


def test_mismatched_ids_are_refused_with_rows(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": 1, "score": 0.1}, {"id": 2, "score": 0.2}, {"id": 3, "score": 0.3}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": 1, "score": 0.1}, {"id": 4, "score": 0.2}, {"id": 3, "score": 0.3}])
    with pytest.raises(ComparisonInputError) as error:
        compare_files([a, b])
    assert f"{a}:2: id 2 is not in {b}" in str(error.value)
    assert f"{b}:2: id 4 is not in {a}" in str(error.value)


def test_line_counts_that_differ_are_refused(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text("one story .\nanother story .\n")
    b = tmp_path / "b.txt"
    b.write_text("one story .\n")
    with pytest.raises(ComparisonInputError, match=rf"{a}:2 has no counterpart in {b}"):
        compare_files([a, b], scorer=lambda: pytest.fail("must not load a scorer"))


@pytest.mark.parametrize(
    "records_a, records_b, message",
    [
        ([{"id": 1, "score": 0.1}, {"id": 1, "score": 0.2}], [{"id": 1, "score": 0.1}], "repeats line 1"),
        ([{"id": 1, "score": 0.1}, {"score": 0.2}], [{"id": 1, "score": 0.1}], "no 'id' field, but other records"),
        ([{"id": 1, "score": 0.1}], [{"score": 0.1}], "give every file ids or none"),
        ([{"score": 0.1}, {"story": "a tale ."}], [{"score": 0.1}, {"score": 0.2}], "some records have a 'score'"),
        ([{"score": 0.1}, {"score": 0.2}], [{"story": "a tale ."}, {"story": "another ."}], "carry 'score' fields"),
        ([{"score": True}], [{"score": 0.1}], "finite number"),
        ([{"story": "   "}], [{"score": 0.1}], "'story' is empty or has no letters"),
        ([{"note": "no story"}], [{"score": 0.1}], "no 'score' number and no 'story'"),
        ([{"story": "12345 67890"}, {"story": "a tale ."}], [{"score": 0.1}, {"score": 0.2}], "a.jsonl:1: 'story' is empty or has no letters"),
        ([{"story": "Der alte Mann ging jeden Morgen mit seinem Hund in den Park."}], [{"score": 0.1}], "'story' is not English"),
        ([{"id": [1], "score": 0.1}], [{"score": 0.1}], "string or an integer"),
    ],
)
def test_bad_files_are_refused(tmp_path, records_a, records_b, message):
    a = write_jsonl(tmp_path / "a.jsonl", records_a)
    b = write_jsonl(tmp_path / "b.jsonl", records_b)
    with pytest.raises(ComparisonInputError, match=message):
        compare_files([a, b], scorer=lambda: pytest.fail("must not load a scorer"))


def test_one_system_is_refused(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", [{"score": 0.1}, {"score": 0.2}])
    with pytest.raises(ComparisonInputError, match="at least two"):
        compare_files([a])
    assert cli.main(["compare", str(a)]) == 1
    assert "storyeval: error: need at least two" in capsys.readouterr().err


def test_missing_file_and_same_file_twice(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"score": 0.1}, {"score": 0.2}])
    with pytest.raises(ComparisonInputError, match="not found"):
        compare_files([a, tmp_path / "nope.jsonl"])
    with pytest.raises(ComparisonInputError, match="same file"):
        compare_files([a, a])


def test_cli_scores_stories_and_writes_json(tiny_checkpoint, tmp_path, capsys):
    stories = [f"[MALE] went to the shop number {i} . he bought {'a lot of ' * (i % 3)}bread ." for i in range(12)]
    a = write_jsonl(tmp_path / "ours.jsonl", [{"id": i, "story": s} for i, s in enumerate(stories)])
    b = write_jsonl(tmp_path / "base.jsonl", [{"id": i, "story": s + " the end ."} for i, s in enumerate(stories)])
    out = tmp_path / "comparison.json"
    code = cli.main(["compare", str(a), str(b), "--config", str(tiny_checkpoint), "--json", str(out), "--resamples", "199"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "ours" in captured.out and "p(A>B)" in captured.out
    payload = json.loads(out.read_text())
    assert [s["name"] for s in payload["systems"]] == ["ours", "base"] and payload["systems"][0]["items"] == 12
    assert payload["pairs"][0]["a"] == "ours"


def test_cli_json_to_stdout(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", [{"score": 0.1}, {"score": 0.3}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"score": 0.2}, {"score": 0.2}])
    assert cli.main(["compare", str(a), str(b), "--json", "-", "--resamples", "99"]) == 0
    assert json.loads(capsys.readouterr().out)["resamples"] == 99


def test_cli_refuses_bad_outputs_before_reading(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", [{"score": 0.1}, {"score": 0.3}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"score": 0.2}, {"score": 0.2}])
    assert cli.main(["compare", str(a), str(b), "--json", str(a)]) == 1
    assert "is one of the inputs" in capsys.readouterr().err
    assert cli.main(["compare", str(a), str(b), "--plot", str(tmp_path / "missing" / "p.png")]) == 1
    assert "folder does not exist" in capsys.readouterr().err
    assert cli.main(["compare", str(a), str(b), "--plot", str(tmp_path / "p.jpg")]) == 1
    assert ".png, .pdf or .svg" in capsys.readouterr().err
    assert a.read_text().count("score") == 2
    taken = tmp_path / "taken.json"
    taken.write_text("mine")
    assert cli.main(["compare", str(a), str(b), "--json", str(taken)]) == 1
    assert "exists; pass --overwrite" in capsys.readouterr().err and taken.read_text() == "mine"
    assert cli.main(["compare", str(a), str(b), "--json", str(taken), "--overwrite"]) == 0
    assert json.loads(taken.read_text())["systems"]


def test_cli_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    better, worse = paired_scores(items=40)
    a = write_jsonl(tmp_path / "a.jsonl", [{"score": s} for s in better])
    b = write_jsonl(tmp_path / "b.jsonl", [{"score": s} for s in worse])
    plot = tmp_path / "comparison.png"
    assert cli.main(["compare", str(a), str(b), "--plot", str(plot), "--resamples", "199"]) == 0, capsys.readouterr().err
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_two_items_a_system_warn_with_the_reason_and_the_minimum(tmp_path, capsys):
    from storyeval.analysis.compare import MIN_ITEMS, FewItemsWarning

    with pytest.warns(FewItemsWarning, match=r"only 2 items per system; below 10 .* smallest p-value is 1/2\^2 = 0.25"):
        result = compare_systems({"a": [0.9, 0.8], "b": [0.1, 0.2]}, **FAST)
    assert result.pairs[0].p_a_greater == 0.25 and result.warnings and MIN_ITEMS == 10
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"score": s}) + "\n" for s in (0.9, 0.8)))
    b.write_text("".join(json.dumps({"score": s}) + "\n" for s in (0.1, 0.2)))
    code = cli.main(["compare", str(a), str(b), "--resamples", "99", "--json", "-"])
    captured = capsys.readouterr()
    assert code == 0 and captured.err.startswith("storyeval: warning: only 2 items per system") and len(captured.err.splitlines()) == 1
    assert json.loads(captured.out)["warnings"] == result.warnings


def test_enough_items_warn_nothing():
    import warnings

    better, worse = paired_scores(items=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compare_systems({"better": better.tolist(), "worse": worse.tolist()}, **FAST).warnings == []


def test_the_analysis_modules_are_reachable_from_import_storyeval(monkeypatch):
    import sys

    import storyeval
    from storyeval import analysis

    for name in ("compare", "explain"):  # as in a fresh interpreter after `import storyeval`: not imported yet
        monkeypatch.delattr(analysis, name, raising=False)
        monkeypatch.delitem(sys.modules, f"storyeval.analysis.{name}", raising=False)
    assert storyeval.analysis.compare.compare_systems.__name__ == "compare_systems"
    assert storyeval.analysis.explain.explain.__name__ == "explain"
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        storyeval.analysis.nothing  # noqa: B018
