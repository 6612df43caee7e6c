"""The ROC and WP builders on tiny files in both formats, plus their error messages."""
import csv
from collections import Counter

import pytest

from storyeval_training.data.builders import InputFormatError, ROCStories, WritingPrompts, assign_split, load_split, prepare

ROC_LINE = "camping trip <EOT> tobias planned\tcamping trip\t#\tasked <EOL> </s> tobias planned a trip . </s> he asked his wife . @"


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A data root with an empty-ish human/ folder, used by the leakage filter."""
    human = tmp_path / "human" / "union_roc"
    human.mkdir(parents=True)
    (human / "ant_data.txt").write_text("0 ||| [MALE] was out jogging one morning . he ran . ||| 1 1 1 1 1 1 1\n")
    monkeypatch.setenv("STORYEVAL_DATA", str(tmp_path))
    return tmp_path


def write_roc_plot_guided(folder, lines):
    folder.mkdir(exist_ok=True)
    (folder / "rocstories_train.txt").write_text("\n".join(lines) + "\n")
    (folder / "manplts_train.txt").write_text("\n".join("tobias\t#\tasked" for _ in lines) + "\n")


def all_rows(builder):
    """Every row of a prepared builder (tiny inputs leave some splits empty)."""
    builder.download_and_prepare()
    return [row for name, info in builder.info.splits.items() if info.num_examples for row in builder.as_dataset(name)]


def test_roc_plot_guided_fields(data_root, tmp_path):
    write_roc_plot_guided(data_root / "roc", [ROC_LINE])
    builder = ROCStories(cache_dir=str(tmp_path / "cache"), data_dir=str(data_root / "roc"))
    builder.download_and_prepare()
    [row] = all_rows(builder)
    assert row["title"] == "camping trip"
    assert row["context"] == "[MALE] planned a trip ."
    assert row["sentences"] == ["[MALE] planned a trip .", "he asked his wife ."]
    assert row["story"] == "[MALE] planned a trip . he asked his wife ."
    assert row["plot"] == [["tobias planned", "camping trip"], ["asked"]]
    assert row["manipulated_plot"] == [["tobias"], ["asked"]]


def test_roc_official_csv_and_switches(data_root, tmp_path):
    path = tmp_path / "ROCStories.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["storyid", "storytitle"] + [f"sentence{i}" for i in range(1, 6)])
        writer.writerow(["s1", "Trip", "Tobias didn't plan.", "He left.", "Amy stayed.", "It rained.", "The end."])
    raw = all_rows(ROCStories(cache_dir=str(tmp_path / "c1"), data_files=[str(path)], tokenize=False, delexicalize=False))
    assert raw[0]["id"] == "s1" and raw[0]["sentences"][0] == "Tobias didn't plan."
    builder = ROCStories(cache_dir=str(tmp_path / "c2"), data_files=[str(path)])
    builder.download_and_prepare()
    [row] = all_rows(builder)
    assert row["sentences"][:3] == ["[MALE] did n't plan .", "he left .", "[FEMALE] stayed ."]
    assert row["plot"] == []


def test_leakage_filter_drops_stories_that_open_a_judged_item(data_root, tmp_path, caplog):
    leaked = "jog <EOT> x <EOL> </s> Ken was out jogging one morning . </s> he ran . @"
    write_roc_plot_guided(data_root / "roc", [ROC_LINE, leaked])
    builder = ROCStories(cache_dir=str(tmp_path / "cache"), data_dir=str(data_root / "roc"))
    with caplog.at_level("WARNING"):
        builder.download_and_prepare()
    assert [r["title"] for r in all_rows(builder)] == ["camping trip"]
    assert "dropped 1 stories" in caplog.text
    unfiltered = ROCStories(cache_dir=str(tmp_path / "c2"), data_dir=str(data_root / "roc"), drop_human_judged=False)
    unfiltered.download_and_prepare()
    assert len(all_rows(unfiltered)) == 2


def test_leakage_filter_reads_the_human_sets_beside_the_given_data_dir(data_root, tmp_path, monkeypatch):
    leaked = "jog <EOT> x <EOL> </s> Ken was out jogging one morning . </s> he ran . @"
    other = tmp_path / "other-root"
    (other / "human").mkdir(parents=True)  # judges nothing
    write_roc_plot_guided(other / "roc", [ROC_LINE, leaked])
    monkeypatch.setenv("STORYEVAL_DATA", str(tmp_path / "nonexistent"))  # the default root is not consulted
    builder = ROCStories(cache_dir=str(tmp_path / "cache"), data_dir=str(other / "roc"))
    builder.download_and_prepare()
    assert len(all_rows(builder)) == 2
    # an explicit human_dir wins
    explicit = ROCStories(cache_dir=str(tmp_path / "c2"), data_dir=str(other / "roc"), human_dir=str(data_root / "human"))
    explicit.download_and_prepare()
    assert [r["title"] for r in all_rows(explicit)] == ["camping trip"]
    # a human_dir that is not there is an error naming it, not a build without the leakage rule
    missing = ROCStories(cache_dir=str(tmp_path / "c3"), data_dir=str(other / "roc"), human_dir=str(tmp_path / "no-human"))
    with pytest.raises(FileNotFoundError, match="human-judgment folder not found: .*no-human"):
        missing.download_and_prepare()


def test_build_negatives_records_the_leakage_count(data_root, tmp_path, shared_data):
    import json

    from storyeval_training.data import build_negatives

    (data_root / "lexicon").symlink_to(shared_data / "lexicon")
    stories = [ROC_LINE.replace("planned a trip", f"planned trip number {i}") for i in range(12)]
    leaked = "jog <EOT> x <EOL> </s> Ken was out jogging one morning . </s> he ran . @"
    write_roc_plot_guided(data_root / "roc", stories + [leaked])
    build_negatives.main(["--dataset", "roc", "--splits", "train", "--output-dir", str(tmp_path / "pairs"),
                          "--cache-dir", str(tmp_path / "cache"), "--num-proc", "1", "--data-dir", str(data_root)])
    stats = json.loads((tmp_path / "pairs" / "negatives_stats.json").read_text())
    assert stats["leakage_dropped_stories_all_splits"] == 1
    assert stats["train"]["leakage_dropped_stories"] in (0, 1)
    # training from the folder learns its corpus from it, for the model card
    from storyeval_training.recipes import train_union

    args = train_union.parse_args(["--pairs-dir", str(tmp_path / "pairs"), "--output-dir", str(tmp_path / "run")])
    train_union.load_pairs(args)
    assert stats["dataset"] == args.dataset == "roc" and args.negative_seeds == [stats["seed"]] == [42]


def test_wp_official_pairs_newlines_and_truncation(data_root, tmp_path):
    (tmp_path / "valid.wp_source").write_text("[ WP ] A dragon wakes up .\n")
    body = " ".join(f"Sentence number {i} is here ." for i in range(60))
    (tmp_path / "valid.wp_target").write_text(f"Maria woke . <newline> <newline> {body}\n")
    builder = WritingPrompts(cache_dir=str(tmp_path / "cache"), data_files=[str(tmp_path / "valid.wp_target")])
    builder.download_and_prepare()
    [row] = all_rows(builder)
    assert row["context"] == "a dragon wakes up ."
    assert row["sentences"][0] == "[FEMALE] woke ."
    words = sum(1 for s in row["sentences"] for t in s.split() if t.isalnum())
    assert 190 <= words <= 200  # about 200 words, cut at a sentence boundary
    assert row["story"].endswith("is here .")


def test_wp_plot_guided(data_root, tmp_path):
    wp = data_root / "wp"
    wp.mkdir()
    (wp / "wp_valid.target").write_text("he sighed . </s> she left .\n")
    (wp / "wp_valid.source").write_text("sighed\t</s>\tshe\tleft\n")
    (wp / "manplts_prompt_valid.txt").write_text("A prompt . <EOL> left\t</s>\tsighed\n")
    builder = WritingPrompts(cache_dir=str(tmp_path / "cache"), data_dir=str(wp))
    builder.download_and_prepare()
    [row] = all_rows(builder)
    assert row["context"] == "a prompt ."
    assert row["plot"] == [["sighed"], ["she", "left"]]
    assert row["manipulated_plot"] == [["left"], ["sighed"]]


def test_split_is_deterministic_seeded_and_90_5_5():
    ids = [f"story-{i}" for i in range(20000)]
    counts = Counter(assign_split(i, seed=42) for i in ids)
    assert abs(counts["train"] / 20000 - 0.90) < 0.01
    assert abs(counts["validation"] / 20000 - 0.05) < 0.005
    assert [assign_split(i, 42) for i in ids[:50]] == [assign_split(i, 42) for i in ids[:50]]
    assert [assign_split(i, 7) for i in ids[:200]] != [assign_split(i, 42) for i in ids[:200]]


@pytest.mark.parametrize(
    "line, problem",
    [("no markers here", "expected 'title <EOT>"), ("t <EOT> plot <EOL> </s> @", "empty story")],
)
def test_malformed_roc_line_names_file_and_line(data_root, tmp_path, line, problem):
    write_roc_plot_guided(data_root / "roc", [ROC_LINE, line])
    builder = ROCStories(cache_dir=str(tmp_path / "cache"), data_dir=str(data_root / "roc"))
    with pytest.raises(InputFormatError) as info:
        prepare(builder)
    assert "rocstories_train.txt:2:" in str(info.value) and problem in str(info.value)


def test_missing_files_are_named(data_root, tmp_path):
    with pytest.raises(FileNotFoundError, match="no ROCStories files"):
        ROCStories(cache_dir=str(tmp_path / "c1"), data_dir=str(tmp_path / "nowhere")).download_and_prepare()
    (tmp_path / "x.wp_target").write_text("a story .\n")
    with pytest.raises(FileNotFoundError, match="x.wp_source"):
        WritingPrompts(cache_dir=str(tmp_path / "c2"), data_files=[str(tmp_path / "x.wp_target")]).download_and_prepare()


def test_real_wp_release_loads(shared_data, tmp_path):
    train = load_split(WritingPrompts, "train", cache_dir=str(tmp_path), data_dir=str(shared_data / "wp"))
    assert 2000 < len(train) < 2399
    assert all(1 <= len(row["sentences"]) for row in train.select(range(50)))


def test_the_negatives_builder_refuses_an_existing_folder_and_ends_a_missing_data_folder_in_one_line(tmp_path, monkeypatch, capsys):
    from storyeval_training.data import build_negatives

    (tmp_path / "pairs").mkdir()
    with pytest.raises(SystemExit) as stopped:
        build_negatives.main(["--dataset", "roc", "--output-dir", str(tmp_path / "pairs")])
    assert stopped.value.code == 2 and "exists: choose a new folder" in capsys.readouterr().err
    assert list((tmp_path / "pairs").iterdir()) == []
    monkeypatch.setenv("STORYEVAL_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit) as stopped:
        build_negatives.main(["--dataset", "roc", "--splits", "train", "--output-dir", str(tmp_path / "new"), "--cache-dir", str(tmp_path / "c")])
    assert str(stopped.value.code).startswith("error: storyeval data folder not found at") and "STORYEVAL_DATA" in str(stopped.value.code)
    assert not (tmp_path / "new").exists()
