"""wp_extra: the WP builder's extra config, the machine-story builder and the human/machine pairs, on tiny files."""
import json

import datasets
import pytest

from storyeval_training.data.builders import InputFormatError, WritingPrompts, WritingPromptsMachine, prepare
from storyeval_training.data.builders.wp_extra import prompt_key, strip_preamble
from storyeval_training.data.wp_machine_pairs import build as build_machine_pairs
from storyeval_training.data.wp_machine_pairs import equal_length


def all_rows(builder):
    prepare(builder)
    return [row for name, info in builder.info.splits.items() if info.num_examples for row in builder.as_dataset(name)]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def human_row(i, prompt="", story=None):
    return {"id": f"wph{i:05d}", "prompt": prompt, "story": story or f"Anna walked home {i} . She was tired . " * 3}


def machine_row(i, human_id, generator="gpt2-xl", story=None):
    return {"id": f"wpm{i:05d}", "prompt": "", "story": story or "Anna walked home . The cat ate the moon . The moon ate it .",
            "generator": generator, "human_id": human_id, "source": "Fast-DetectGPT", "variant": "continuation_of_human_opening"}


@pytest.fixture
def wp_root(tmp_path, monkeypatch):
    """A data root: human/ with one judged WP item, a one-story plot-guided wp/, and wp_extra/."""
    human = tmp_path / "human" / "union_wp"
    human.mkdir(parents=True)
    (human / "ant_data.txt").write_text("0 ||| a judged prompt about dragons . the story . ||| 1 1 1\n")
    wp = tmp_path / "wp"
    wp.mkdir()
    (wp / "wp_valid.target").write_text("he sighed . </s> she left .\n")
    (wp / "wp_valid.source").write_text("sighed\t</s>\tshe\tleft\n")
    (wp / "manplts_prompt_valid.txt").write_text("A shared prompt . <EOL> left\t</s>\tsighed\n")
    (tmp_path / "wp_extra").mkdir()
    monkeypatch.setenv("STORYEVAL_DATA", str(tmp_path))
    return tmp_path


def test_extra_config_adds_the_human_stories_and_keeps_related_ones_together(wp_root, tmp_path):
    write_jsonl(wp_root / "wp_extra" / "human.jsonl", [
        human_row(1), human_row(2, prompt="A shared prompt."),  # joins the plot-guided story's split
        human_row(3, prompt="Same prompt here."), human_row(4, prompt="Same prompt here."),  # one split
        human_row(5, prompt="A judged prompt about dragons."),  # the leakage rule drops it
    ])
    default = all_rows(WritingPrompts(cache_dir=str(tmp_path / "c0"), data_dir=str(wp_root / "wp")))
    builder = WritingPrompts(cache_dir=str(tmp_path / "c1"), data_dir=str(wp_root / "wp"), config_name="extra")
    rows = all_rows(builder)
    assert {r["id"] for r in rows} == {default[0]["id"], "wph00001", "wph00002", "wph00003", "wph00004"}
    assert sum(builder.leakage_dropped().values()) == 1
    splits = {}
    for name, info in builder.info.splits.items():
        if info.num_examples:
            splits.update({r["id"]: name for r in builder.as_dataset(name)})
    assert splits["wph00002"] == splits[default[0]["id"]] and splits["wph00003"] == splits["wph00004"]
    no_prompt = next(r for r in rows if r["id"] == "wph00001")
    assert no_prompt["context"] == no_prompt["sentences"][0] == "[FEMALE] walked home 1 ."


def test_machine_stories_follow_their_human_story(wp_root, tmp_path):
    write_jsonl(wp_root / "wp_extra" / "human.jsonl", [human_row(i) for i in range(1, 30)])
    chat = "Sure! Here is a story about Anna:\nAnna walked home . She saw a dog ."
    write_jsonl(wp_root / "wp_extra" / "machine.jsonl",
                [machine_row(i, f"wph{i:05d}") for i in range(1, 30)] + [machine_row(99, "", "gpt-4", chat)])
    human = WritingPrompts(cache_dir=str(tmp_path / "c1"), data_dir=str(wp_root / "wp"), config_name="extra")
    prepare(human)
    human_split = {r["id"]: n for n, i in human.info.splits.items() if i.num_examples for r in human.as_dataset(n)}
    machine = WritingPromptsMachine(cache_dir=str(tmp_path / "c2"), data_dir=str(wp_root / "wp_extra"))
    prepare(machine)
    rows = {r["id"]: (n, r) for n, i in machine.info.splits.items() if i.num_examples for r in machine.as_dataset(n)}
    assert all(rows[f"wpm{i:05d}"][0] == human_split[f"wph{i:05d}"] for i in range(1, 30))
    split, chat_row = rows["wpm00099"]
    assert chat_row["preamble_stripped"] and chat_row["story"].startswith("[FEMALE] walked home") and chat_row["human_id"] == ""


@pytest.mark.parametrize("row, problem", [
    ({"generator": ""}, "names no generator"),
    ({"human_id": "wph99999"}, "unknown human id 'wph99999'"),
])
def test_bad_machine_rows_name_the_row(wp_root, tmp_path, row, problem):
    write_jsonl(wp_root / "wp_extra" / "human.jsonl", [human_row(1)])
    write_jsonl(wp_root / "wp_extra" / "machine.jsonl", [machine_row(1, "wph00001"), {**machine_row(2, "wph00001"), **row}])
    with pytest.raises(InputFormatError, match=f"machine.jsonl:2: .*{problem}"):
        prepare(WritingPromptsMachine(cache_dir=str(tmp_path / "c"), data_dir=str(wp_root / "wp_extra")))


def test_machine_pairs_are_cut_to_equal_length_and_hold_out_generators(wp_root, tmp_path):
    write_jsonl(wp_root / "wp_extra" / "human.jsonl", [human_row(i) for i in range(1, 40)])
    write_jsonl(wp_root / "wp_extra" / "machine.jsonl", [
        machine_row(100 * g + i, f"wph{i:05d}", generator) for g, generator in enumerate(["gpt2-xl", "opt-2.7b", "gpt-neox-20b", "gpt-4"])
        for i in range(1, 40)
    ])
    folders, counts = build_machine_pairs(str(wp_root / "wp_extra"), ["gpt2-xl", "opt-2.7b"], ["gpt-neox-20b"], str(tmp_path / "c"))
    pairs = datasets.concatenate_datasets([folders["pairs"][s] for s in folders["pairs"]])
    assert len(pairs) == 4 * 39
    assert all(len(r["human"].split()) == len(r["negative"].split()) for r in pairs)
    assert {r["techniques"][0] for r in folders["selection"]["validation"]} == {"gpt-neox-20b"}
    candidates = folders["candidates"]["train"]
    assert all(len(c) == 2 for c in candidates["candidates"])  # the held-out and strong generators are never negatives
    assert not set(candidates["id"]) & {r["human"] for r in folders["selection"]["validation"]}
    with pytest.raises(ValueError, match="unknown generators"):
        build_machine_pairs(str(wp_root / "wp_extra"), ["gpt-5"], ["gpt-neox-20b"], str(tmp_path / "c"))


def test_preamble_prompt_key_and_equal_length():
    assert strip_preamble("Title: Moon\nThe moon rose.") == ("The moon rose.", True)
    assert strip_preamble("Here is a 5 sentence story: The moon rose.") == ("The moon rose.", True)
    assert strip_preamble("Sure enough, the moon rose over the hills and kept rising.") == (
        "Sure enough, the moon rose over the hills and kept rising.", False)
    assert prompt_key("[WP] You're a dragon!") == prompt_key("wp you re a dragon")
    assert equal_length("a b c d", "a b") == ["a b", "a b"]


def test_a_broken_jsonl_line_is_named_with_its_position(wp_root, tmp_path):
    (wp_root / "wp_extra" / "human.jsonl").write_text(json.dumps(human_row(1)) + "\n{\"id\": \"wph2\", \n")
    write_jsonl(wp_root / "wp_extra" / "machine.jsonl", [machine_row(1, "wph00001")])
    with pytest.raises(InputFormatError, match=r"human.jsonl:2: not JSON \(.*: column \d+\)"):
        prepare(WritingPromptsMachine(cache_dir=str(tmp_path / "c"), data_dir=str(wp_root / "wp_extra")))


def test_machine_pairs_refuse_bad_options_before_writing(wp_root, tmp_path, capsys):
    from storyeval_training.data import wp_machine_pairs

    existing = tmp_path / "out"
    existing.mkdir()
    with pytest.raises(SystemExit):
        wp_machine_pairs.parse_args(["--output-dir", str(existing)])
    assert "exists" in capsys.readouterr().err and list(existing.iterdir()) == []
    with pytest.raises(SystemExit):
        wp_machine_pairs.parse_args(["--output-dir", str(tmp_path / "new"), "--extra-validation-percent", "100"])
    with pytest.raises(ValueError, match="both negative and held out: \\['gpt2-xl'\\]"):
        build_machine_pairs(str(wp_root / "wp_extra"), ["gpt2-xl"], ["gpt2-xl"], str(tmp_path / "c"))


def test_build_negatives_names_the_configs_of_an_unknown_one(wp_root):
    from storyeval_training.data.build_negatives import story_builder

    with pytest.raises(KeyError, match=r"unknown config 'extras' of dataset 'wp'; choose from \['default', 'extra'\]"):
        story_builder("wp", "extras", data_dir=str(wp_root))
