import pytest

from storyeval import text as textlib
from storyeval.checkpoints import resources


def test_tokenize_keeps_placeholders_and_splits_contractions():
    assert textlib.tokenize("[MALE] didn't want Ann's car.") == ["[MALE]", "did", "n't", "want", "ann", "'s", "car", "."]


def test_delexicalize_lowercase_skips_names_that_are_words():
    tokens = "tobias met amy and will in june".split()
    assert textlib.delexicalize(tokens) == ["[MALE]", "met", "[FEMALE]", "and", "will", "in", "june"]


def test_delexicalize_lowercase_masks_names_that_cased_text_writes_as_names():
    # "tom" and "jack" are words to lemminflect, but cased text nearly always writes them "Tom", "Jack"
    tokens = "tom and jack saw will and hope".split()
    assert textlib.delexicalize(tokens) == ["[MALE]", "and", "[MALE]", "saw", "will", "and", "hope"]


def test_the_shipped_lowercase_names_are_what_the_command_builds(tmp_path):
    from storyeval_training.data import lowercase_names

    output = tmp_path / "names.txt"
    lowercase_names.main(["--output", str(output)])
    assert output.read_text() == textlib.LOWERCASE_NAMES_FILE.read_text()


def test_lowercase_names_need_capitals_in_most_uses_and_a_first_name():
    from storyeval_training.data.lowercase_names import count_uses, mostly_names

    lines = ["Then Tom left . Tom ran and Jack sang .", "I met Tom , Tom , Tom and Tom . Smith came , Smith left , Smith , Smith , Smith , Smith .",
             "we saw jack , jack , jack . I met Jack , Jack , Jack , Jack ."]
    capitalised, lower = count_uses(lines, frozenset({"tom", "jack", "smith"}))
    assert (capitalised["tom"], lower["tom"]) == (5, 0)  # "Then Tom": sentence-internal; no sentence-initial use counted
    assert (capitalised["jack"], lower["jack"]) == (5, 3)
    assert capitalised["smith"] == 5
    # jack: 5 of 8 uses capitalised is under 70%; Smith is capitalised but not a first name
    assert mostly_names(capitalised, lower, min_capitalised=5, min_share=0.7) == ["tom"]


def test_delexicalize_cased_needs_a_capital_and_marks_unisex_names_neutral():
    tokens = ["Tobias", "met", "Amy", "and", "Jessie", "at", "the", "jack"]
    assert textlib.delexicalize(tokens, cased=True) == ["[MALE]", "met", "[FEMALE]", "and", "[NEUTRAL]", "at", "the", "jack"]


def test_truncate_sentences_stops_at_a_sentence_boundary():
    sentences = ["one two three .", "four five .", "six seven eight nine ."]
    assert textlib.truncate_sentences(sentences, 6) == sentences[:2]
    assert textlib.truncate_sentences(sentences, 1) == sentences[:1]  # never empty


def test_leakage_key_matches_across_name_forms_and_tokenisation():
    assert textlib.leakage_key("Ken was driving around in the snow. Then...") == textlib.leakage_key(
        "[MALE] was driving around in the snow ."
    )
    assert textlib.leakage_key("a b c") != textlib.leakage_key("a b d")


def test_split_sentences_uses_separator_or_punkt():
    assert textlib.split_sentences("a b . </s> c d . </s>") == ["a b .", "c d ."]
    assert textlib.split_sentences("He left. She stayed.") == ["He left.", "She stayed."]


def test_missing_nltk_resource_names_the_resource(monkeypatch):
    import nltk

    monkeypatch.setattr(nltk.data, "find", lambda *a, **k: (_ for _ in ()).throw(LookupError("x")))
    monkeypatch.setattr(resources, "_found", set())
    with pytest.raises(resources.MissingResourceError, match="punkt_tab.*NLTK_DATA"):
        resources.require_nltk("punkt_tab")


def test_found_nltk_resource_is_checked_again_when_the_search_path_changes(monkeypatch, tmp_path):
    import nltk

    resources.require_nltk("punkt_tab")  # found, and remembered for this search path
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(resources.MissingResourceError, match="punkt_tab"):
        resources.require_nltk("punkt_tab")


def test_a_placeholder_does_not_make_lower_cased_text_count_as_cased():
    from storyeval.scoring.sequence import normalize_story
    from storyeval.text import is_cased

    assert not is_cased("[MALE] met kate .") and is_cased("Ken met Kate.")
    assert normalize_story("[MALE] met kate .") == normalize_story("he met kate .").replace("he", "[MALE]", 1) == "[MALE] met [FEMALE] ."


@pytest.mark.parametrize("bad", [["--min-capitalised", "0"], ["--min-share", "0.5"], ["--min-share", "1.5"]])
def test_lowercase_names_options_are_checked_before_anything_is_read(bad, tmp_path, capsys):
    from storyeval_training.data import lowercase_names

    with pytest.raises(SystemExit):
        lowercase_names.main(["--output", str(tmp_path / "names.txt"), *bad])
    assert "--min-capitalised must be at least 1 and --min-share in (0.5, 1]" in capsys.readouterr().err
    assert not (tmp_path / "names.txt").exists()


def test_lowercase_names_without_the_cased_text_names_the_missing_file(tmp_path):
    from storyeval_training.data import lowercase_names

    with pytest.raises(FileNotFoundError, match="wp_valid.target"):
        lowercase_names.main(["--data-dir", str(tmp_path), "--output", str(tmp_path / "names.txt")])
    assert not (tmp_path / "names.txt").exists()


def test_the_pos_tagger_gives_nltks_own_tags():
    from nltk.tag import PerceptronTagger

    from storyeval.checkpoints import resources

    sentences = ["he bought some milk and walked home happy .", "the dogs barked at the old man 's car all night .",
                 "she could n't believe it was raining in june !", "[MALE] runs , runs and runs ; they ran .", "a", ""]
    nltk_tagger = PerceptronTagger()
    for sentence in sentences:
        assert resources.pos_tag(sentence.split()) == nltk_tagger.tag(sentence.split())
