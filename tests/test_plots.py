"""Plot extraction, the plot manipulations and the build-plots command, on hand-made plots and tiny files."""
import json
import random
from collections import Counter

import datasets
import pytest

from storyeval_training.data.plots import build_plots, manipulation
from storyeval_training.data.plots.extraction import extract_storyline, extract_verb_argument_plot, verb_argument_plot
from storyeval_training.data.plots.manipulation import (
    REORDER_FALLBACK,
    TECHNIQUES,
    PlotLexicon,
    apply_technique,
    insert_contradiction,
    insert_repetition,
    manipulate_plot,
    reorder_nonlogically,
    substitute_randomly,
    swap_sentence_plots,
)

# The first story of the plot-guided ROC dev file, as the builder gives it.
ROC_STORY = [
    "bob was trying to fall asleep when the phone rang .",
    "it was the fedex man calling from his apartment lobby .",
    "he told him he had a package for him .",
    "bob tried to control his anger and not yell .",
    "he asked as calmly as possible why fedex did n't just bring it to him .",
]
PLOT = [["made breakfast", "kitchen"], ["happy"], ["ate breakfast"], ["left", "school bus"]]
ANTONYMS = (
    "happy|||/r/Antonym|||sad unhappy frown\nhappy|||/r/NotDesires|||cry\n"
    "win|||/r/Antonym|||lose lost\nup|||/r/Antonym|||down\n"
)
TRIPLES = [
    ("HasPrerequisite", "eat breakfast", "make breakfast", "train"),
    ("Causes", "wake up", "get out of bed", "train"),
    ("NotCapableOf", "cat", "fly", "valid"),
    ("AtLocation", "cat", "house", "test"),  # not a relation the manipulations use
]
POOL = [["dog", "barked"], ["rain", "fell"], ["won", "lottery"]]


def write_lexicon(root, selected=True):
    folder = root / "lexicon" / "conceptnet100k"
    folder.mkdir(parents=True, exist_ok=True)
    (root / "lexicon" / "conceptnet_antonym.txt").write_text(ANTONYMS)
    if selected:
        (folder / "selected_relations_all_splits.tsv").write_text("".join("\t".join(t) + "\n" for t in TRIPLES))
    else:
        for split in ("train", "valid", "test"):
            rows = [t[:3] for t in TRIPLES if t[3] == split]
            (folder / f"{split}.txt").write_text("".join("\t".join(t) + "\n" for t in rows))


@pytest.fixture(scope="module")
def lexicon(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_lexicon(root)
    return PlotLexicon.from_data_dir(root)


def phrases(plot):
    return Counter(p for sentence in plot for p in sentence)


# ---- extraction -----------------------------------------------------------


def test_storyline_keywords_come_from_their_sentence():
    storyline = extract_storyline(ROC_STORY, max_keywords_per_sentence=3)
    assert len(storyline) == len(ROC_STORY)
    for sentence, keywords in zip(ROC_STORY, storyline):
        assert 1 <= len(keywords) <= 3
        for keyword in keywords:
            assert f" {keyword} " in f" {sentence} "  # a phrase of the sentence, word for word
            assert keyword not in ("was", "the", "it", "he")
    assert "phone rang" in storyline[0] and "apartment lobby" in storyline[1]
    assert extract_storyline(ROC_STORY, max_keywords_per_sentence=3) == storyline  # deterministic


def test_storyline_skips_name_placeholders_and_honours_the_limit():
    storyline = extract_storyline(["[MALE] asked [FEMALE] for help with the heavy boxes ."], max_keywords_per_sentence=1)
    assert len(storyline[0]) == 1
    assert not any("male" in keyword for keyword in storyline[0])
    assert extract_storyline(["", "."]) == [[], []]


def test_verb_argument_plot_has_the_release_shape():
    assert verb_argument_plot("Maria hit the voicemail button on her answering machine .") == ["Maria", "hit", "the voicemail button"]
    plot = verb_argument_plot("i wanted to let you know our office received a crank call from this number .")
    # "you" is ARG1 of "let" and ARG0 of "know": written once
    assert plot == ["i", "wanted", "let", "you", "know", "our office", "received", "a crank call"]
    assert extract_verb_argument_plot(["It was green .", "We pushed our spacecraft to their limits ."]) == [[], ["We", "pushed", "our spacecraft"]]


def test_a_name_placeholder_is_never_taken_for_a_verb():
    # the tagger called "[FEMALE]" a verb here, which made it a plot item of its own
    assert verb_argument_plot("[MALE] and [FEMALE] went to the store .") == ["[FEMALE]", "went", "the store"]
    assert verb_argument_plot("then [FEMALE] smiled at [MALE] .") == ["[FEMALE]", "smiled", "[MALE]"]


def test_a_release_plot_is_cut_where_its_kept_story_ends_not_by_sentence_count():
    from storyeval_training.data.plots.build_plots import cut_to_story

    # the release put two of the story's sentences in one chunk, so the plot has more parts than sentences
    plot = [["Maria", "received", "a call"], ["sighed"], ["fix", "six years of disability"], ["dragons", "flew"]]
    sentences = ["[FEMALE] received a call .", "'' [FEMALE] sighed . it was time to fix six years of disability ."]
    assert cut_to_story(plot, sentences) == plot[:3]  # the dragons come after the kept text
    # never fewer sentence plots than sentences, and a plot no longer than its story is kept whole
    assert cut_to_story([["zzz"], ["yyy"], ["xxx"]], ["a b .", "c d ."]) == [["zzz"], ["yyy"]]
    assert cut_to_story(plot[:2], sentences) == plot[:2]


# ---- manipulations ----------------------------------------------------------


def test_reorder_flips_a_conceptnet_ordered_pair(lexicon):
    for seed in range(10):
        out = reorder_nonlogically(PLOT, random.Random(seed), lexicon)
        assert out[0][0] == "ate breakfast"
        assert out[2][0].endswith("made breakfast")
        assert out[2][0].split()[0] in ("made", "then", "later", "subsequently")
        assert out[1:2] + out[3:] == PLOT[1:2] + PLOT[3:] and out[0][1:] == PLOT[0][1:]


def test_reorder_matches_a_concept_across_phrases_of_one_sentence(lexicon):
    plot = [["i", "woke"], ["got", "out of bed"], ["bus"]]  # WP-style: verb and arguments apart
    for seed in range(5):
        out = reorder_nonlogically(plot, random.Random(seed), lexicon)
        assert out[0] == ["i", "got", "out of bed"] and out[1][0].endswith("woke") and out[2] == ["bus"]


def test_reorder_skips_pairs_conceptnet_orders_both_ways_and_flips_that_stay_logical():
    triples = [("Causes", "listen", "hear"), ("Causes", "hear", "listen"),  # either order is logical
               ("HasPrerequisite", "remember", "forget"), ("HasPrerequisite", "eat breakfast", "make breakfast"),
               ("Causes", "wake up", "get out of bed")]
    lexicon = PlotLexicon.from_triples(triples, {})
    assert reorder_nonlogically([["listened"], ["heard"]], random.Random(0), lexicon) is None
    # swapping "forgot" with the first "remembered" would leave the second one after it, still logical:
    # only the swap with the last one is a flip
    for seed in range(10):
        out = reorder_nonlogically([["forgot"], ["remembered"], ["remembered"]], random.Random(seed), lexicon)
        assert [[phrase.split()[-1] for phrase in sentence] for sentence in out] == [["remembered"], ["remembered"], ["forgot"]]
    # a pair across sentence plots is flipped before one inside a sentence plot
    plot = [["woke up", "got out of bed"], ["made breakfast"], ["ate breakfast"]]
    for seed in range(10):
        out = reorder_nonlogically(plot, random.Random(seed), lexicon)
        assert out[0] == plot[0] and out[1][0] == "ate breakfast" and out[2][0].endswith("made breakfast")


def test_reorder_without_a_pair_falls_back_to_swapping_sentence_plots(lexicon):
    plot = [["dog"], ["ate breakfast"], ["made breakfast"]]  # already in the wrong order
    assert reorder_nonlogically(plot, random.Random(0), lexicon) is None
    out, name = apply_technique("reorder_nonlogically", plot, random.Random(0), POOL, lexicon)
    assert name == REORDER_FALLBACK
    assert sorted(out) == sorted(plot) and out != plot
    assert swap_sentence_plots([["a"], ["a"]], random.Random(0)) is None


def test_contradiction_inserts_an_antonym_next_to_its_phrase(lexicon):
    out = insert_contradiction([["party"], ["happy"], ["school"]], random.Random(0), lexicon)
    assert out[1][0] == "happy" and out[1][1] in ("sad", "unhappy")
    assert out[0] == ["party"] and out[2] == ["school"]


def test_contradiction_antonyms_share_the_words_part_of_speech_and_inflection(lexicon):
    # "frown" (a noun or verb) is no opposite of the adjective "happy"; "won" turns into "lost", not "lose"
    options = {tuple(insert_contradiction([["happy"]], random.Random(seed), lexicon)[0]) for seed in range(20)}
    assert options == {("happy", "sad"), ("happy", "unhappy")}
    options = {tuple(insert_contradiction([["won lottery"]], random.Random(seed), lexicon)[0]) for seed in range(20)}
    assert options == {("won lottery", "lost lottery")}


def test_contradiction_uses_negated_relations(lexicon):
    out = insert_contradiction([["the cat", "garden"]], random.Random(0), lexicon)
    assert out == [["the cat", "fly", "garden"]]
    assert insert_contradiction([["garden"], ["up"]], random.Random(0), lexicon) is None  # stopword antonyms are ignored


def test_repetition_only_repeats_existing_phrases():
    for seed in range(30):
        out = insert_repetition(PLOT, random.Random(seed))
        assert len(out) == len(PLOT) and out != PLOT
        assert set(phrases(out)) <= set(phrases(PLOT))
        grew = phrases(out) - phrases(PLOT)
        assert grew  # some phrase now appears more often
    assert insert_repetition([[], []], random.Random(0)) is None


def test_substitution_takes_sentence_plots_from_the_pool():
    for seed in range(10):
        out = substitute_randomly(PLOT, random.Random(seed), POOL)
        assert len(out) == len(PLOT)
        replaced = [sentence for sentence, original in zip(out, PLOT) if sentence != original]
        assert replaced and all(sentence in POOL for sentence in replaced)
    assert substitute_randomly(PLOT, random.Random(0), []) is None
    assert substitute_randomly(PLOT, random.Random(0), [PLOT[1]]) is None  # only the story's own sentence plots


def test_sampler_applies_two_to_four_distinct_techniques_reproducibly(lexicon):
    counts, seen = Counter(), Counter()
    for seed in range(40):
        out, techniques = manipulate_plot(PLOT, random.Random(seed), POOL, lexicon)
        assert out != PLOT and len(out) == len(PLOT)
        assert 2 <= len(techniques) <= 4 and len(set(techniques)) == len(techniques)
        assert set(techniques) <= {*TECHNIQUES, REORDER_FALLBACK}
        assert not {"reorder_nonlogically", REORDER_FALLBACK} <= set(techniques)
        assert manipulate_plot(PLOT, random.Random(seed), POOL, lexicon) == (out, techniques)
        counts[len(techniques)] += 1
        seen.update(techniques)
    assert set(counts) == {2, 3, 4}
    # the fallback only when an earlier technique broke the breakfast pair
    assert set(TECHNIQUES) <= set(seen) and seen["reorder_nonlogically"] > seen[REORDER_FALLBACK]
    assert PLOT == [["made breakfast", "kitchen"], ["happy"], ["ate breakfast"], ["left", "school bus"]]  # input untouched


def test_substitution_draws_from_other_stories_only():
    original = [["made breakfast"], ["happy"], ["ate breakfast"]]
    changed = [["made breakfast", "sad"], ["ate breakfast"], ["ate breakfast"]]  # "happy" was overwritten earlier
    pool = [list(sentence) for sentence in original] + [["rain", "fell"]]
    drawn = [substitute_randomly(changed, random.Random(seed), pool, protected={0}, original=original) for seed in range(20)]
    assert sum(out is not None for out in drawn) > 10  # None: ten draws in a row hit this story's own sentence plots
    for out in filter(None, drawn):
        assert [sentence for sentence in out if sentence not in changed] == [["rain", "fell"]]


def recorded_steps(monkeypatch):
    """Every successful technique application, as (name, plot before, plot after)."""
    steps = []

    def recording(name, plot, *args, **kwargs):
        result, label = apply_technique(name, plot, *args, **kwargs)
        if result is not None:
            steps.append((label, plot, result))
        return result, label

    monkeypatch.setattr(manipulation, "apply_technique", recording)
    return steps


@pytest.mark.parametrize("plot", [PLOT, [["bob"]], [["bob"], ["happy"]], [["made breakfast"], ["ate breakfast"]],
                                  [["park"], ["ball"], ["home"], ["sleep"], ["bed"]]])
def test_no_recorded_technique_is_overwritten_by_a_later_one(lexicon, monkeypatch, plot):
    """Each sentence plot a technique changed keeps its words in the final plot, and a
    repeated phrase keeps all its copies: a later substitution or copied sentence must
    not erase an earlier technique (words, not phrases: a reordering may put "then"
    before a phrase)."""

    def words(sentences):
        return Counter(w for sentence in sentences for p in sentence for w in p.split())

    def phrases(sentences):  # a reordering may prefix a connective: "then dog" still holds "dog"
        return Counter(p for sentence in sentences for p in sentence)

    steps = recorded_steps(monkeypatch)
    for seed in range(60):
        steps.clear()
        out, techniques = manipulate_plot(plot, random.Random(seed), POOL + [["went"]], lexicon)
        final = steps[len(steps) - len(techniques):]  # earlier draws that left the plot unchanged were discarded
        assert [name for name, _, _ in final] == techniques and final[0][1] == plot and final[-1][2] == out
        for name, before, after in final:
            changed = [i for i, (old, new) in enumerate(zip(before, after)) if old != new]
            assert changed, name
            lost = words(after[i] for i in changed) - words(out)
            assert not lost, f"seed {seed}: {name} in {techniques} was overwritten ({dict(lost)} gone from {out})"
            if name == "insert_repetition":  # the first copy of a repeated phrase survives too
                had, has = phrases(before), phrases(after)
                for phrase in (p for p in has if has[p] > max(had[p], 1)):
                    kept = sum(count for p, count in phrases(out).items() if p == phrase or p.endswith(" " + phrase))
                    assert kept >= has[phrase], f"seed {seed}: the repetition of {phrase!r} in {techniques} was undone in {out}"


@pytest.mark.parametrize("left_out", TECHNIQUES)
def test_sampler_leaves_a_technique_out(lexicon, left_out):
    allowed = [name for name in TECHNIQUES if name != left_out]
    counts = Counter()
    for seed in range(30):
        out, techniques = manipulate_plot(PLOT, random.Random(seed), POOL, lexicon, allowed)
        assert out != PLOT and 2 <= len(techniques) <= 3
        assert left_out not in techniques
        if left_out == "reorder_nonlogically":
            assert REORDER_FALLBACK not in techniques  # the fallback is still a reordering
        counts[len(techniques)] += 1
    assert set(counts) == {2, 3}


def test_sampler_rejects_unknown_or_repeated_techniques(lexicon):
    with pytest.raises(KeyError, match="unknown technique 'shuffle'"):
        manipulate_plot(PLOT, random.Random(0), POOL, lexicon, ["shuffle", "insert_repetition"])
    with pytest.raises(ValueError, match="distinct"):
        manipulate_plot(PLOT, random.Random(0), POOL, lexicon, ["insert_repetition", "insert_repetition"])
    with pytest.raises(ValueError, match="distinct"):
        manipulate_plot(PLOT, random.Random(0), POOL, lexicon, [])


def test_sampler_rejects_a_plot_without_phrases(lexicon):
    with pytest.raises(ValueError, match="without phrases"):
        manipulate_plot([[], []], random.Random(0), POOL, lexicon)


def test_a_story_without_verbs_has_no_wp_plot_and_is_skipped_and_counted(lexicon):
    verbless = ["It was green .", "A quiet night ."]
    assert extract_verb_argument_plot(verbless) == [[], []]
    stories = datasets.Dataset.from_dict({"id": ["verbless", "ok"], "story": [" ".join(verbless), "x"], "sentences": [verbless, ["x"]]})
    plots = [extract_verb_argument_plot(verbless), [["We", "pushed", "our spacecraft"]]]
    rows, skipped = build_plots.manipulate_all(stories, plots, 0, lexicon)
    assert skipped == 1 and rows["id"] == ["ok"]


def test_rows_reproduce_for_the_same_stories_and_seed(lexicon):
    """The documented guarantee: same arguments, same rows (another --limit changes the substitution pool)."""
    stories = datasets.Dataset.from_dict({"id": [f"s{i}" for i in range(6)], "story": ["x"] * 6, "sentences": [["x"] * 4] * 6})
    plots = [[list(p) for p in PLOT] for _ in range(6)]
    first, _ = build_plots.manipulate_all(stories, plots, 3, lexicon)
    again, _ = build_plots.manipulate_all(stories, plots, 3, lexicon)
    assert first.to_dict() == again.to_dict()


# ---- lexicon ----------------------------------------------------------------------


def test_lexicon_reads_the_split_files_without_the_selected_file(tmp_path):
    write_lexicon(tmp_path, selected=False)
    lexicon = PlotLexicon.from_data_dir(tmp_path)
    assert lexicon.followers[("make", "breakfast")] == {("eat", "breakfast")}
    assert lexicon.negated == {("cat",): ["fly"]}
    # NotDesires targets ("happy" -> "cry") are no antonyms
    assert "up" not in lexicon.antonyms and lexicon.antonyms["happy"] == ["sad", "unhappy", "frown"]


def test_missing_lexicon_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="conceptnet_antonym.txt"):
        PlotLexicon.from_data_dir(tmp_path)
    (tmp_path / "lexicon").mkdir()
    (tmp_path / "lexicon" / "conceptnet_antonym.txt").write_text(ANTONYMS)
    with pytest.raises(FileNotFoundError, match="train.txt"):
        PlotLexicon.from_data_dir(tmp_path)


def test_real_lexicon_flips_breakfast(shared_data):
    lexicon = PlotLexicon.from_data_dir(shared_data)
    out = reorder_nonlogically([["made breakfast"], ["ate breakfast"]], random.Random(0), lexicon)
    assert out[0] == ["ate breakfast"] and out[1][0].endswith("made breakfast")


# ---- the command ------------------------------------------------------------------


@pytest.mark.parametrize("plot_source", ["paper", "extracted"])
def test_build_command_writes_a_loadable_dataset(tmp_path, monkeypatch, plot_source):
    (tmp_path / "human" / "union_roc").mkdir(parents=True)
    monkeypatch.setenv("STORYEVAL_DATA", str(tmp_path))  # the builders' leakage filter reads human/ there
    # a human-judged story that opens like story 3: the leakage rule drops story 3, and plots_stats.json counts it
    (tmp_path / "human" / "union_roc" / "ant_data.txt").write_text("0 ||| story 3 : [MALE] made breakfast . he left . ||| 1 1 1 1 1 1 1\n")
    write_lexicon(tmp_path)
    (tmp_path / "roc").mkdir()
    lines = [
        f"title {i} <EOT> made breakfast\t#\tate breakfast\t#\thappy <EOL> "
        f"</s> story {i} : tom made breakfast . </s> he ate breakfast at {i} . </s> he was happy . @"
        for i in range(12)
    ]
    # the LM split comes without manipulated plots, so no manplts file is needed
    (tmp_path / "roc" / "rocstories_lm_dev.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "plots"
    build_plots.main(
        ["--dataset", "roc", "--output-dir", str(out), "--data-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache"),
         "--plot-source", plot_source, "--limit", "0", "--seed", "7"]
    )
    rows = datasets.load_from_disk(str(out))
    assert set(rows.column_names) == {"id", "story", "sentences", "plot", "manipulated_plot", "techniques"}
    assert len(rows) >= 7  # the 90% train share of 12 stories less the leaked one, give or take the hash
    for row in rows:
        assert row["manipulated_plot"] != row["plot"] and 2 <= len(row["techniques"]) <= 4
        assert len(row["plot"]) == len(row["sentences"]) == 3
        if plot_source == "paper":
            assert row["plot"] == [["made breakfast"], ["ate breakfast"], ["happy"]]
    stats = json.loads((out / "plots_stats.json").read_text())
    assert stats["stories"] == len(rows) and sum(stats["per_number_of_techniques"].values()) == len(rows)
    assert stats["leakage_dropped_stories_all_splits"] == 1 and stats["leakage_dropped_stories"] in (0, 1)
    assert stats["stories"] + stats["leakage_dropped_stories"] >= 8 and not any(s.startswith("story 3 :") for s in rows["story"])
    # leave one out, as in the paper's ablation
    allowed = ["insert_contradiction", "insert_repetition", "substitute_randomly"]
    build_plots.main(
        ["--dataset", "roc", "--output-dir", str(tmp_path / "no-reorder"), "--data-dir", str(tmp_path),
         "--cache-dir", str(tmp_path / "cache"), "--plot-source", plot_source, "--limit", "0", "--techniques", *allowed]
    )
    stats = json.loads((tmp_path / "no-reorder" / "plots_stats.json").read_text())
    assert stats["allowed_techniques"] == allowed and set(stats["per_technique"]) <= set(allowed)
    # a repeated or unknown name fails before anything is written
    common = ["--dataset", "roc", "--output-dir", str(tmp_path / "bad"), "--data-dir", str(tmp_path), "--limit", "0"]
    for bad in (["insert_repetition", "insert_repetition"], ["shuffle"]):
        with pytest.raises(SystemExit) as exited:
            build_plots.main(common + ["--techniques", *bad])
        assert exited.value.code == 2  # argparse's usage error
    assert not (tmp_path / "bad").exists()
