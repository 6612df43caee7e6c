"""The demo's scoring functions without a browser (tests/browser drives the page itself)."""
import pytest

from storyeval.cli import demo


def test_a_trailing_sentence_of_punctuation_is_left_out_not_an_error():
    rows, attribution = demo.score_story("Ken went home. He was tired. He slept. ...")
    scored = {row[0]: row[1] for row in rows}
    assert all(isinstance(value, float) for value in scored.values()), rows
    assert [row[1] for row in attribution] == ["Ken went home.", "He was tired.", "He slept."]


LONG_STORY = " ".join(f"Ken ran to the old mill on day {i}." for i in range(1, 87))  # 86 sentences, 3,000 characters


def test_a_story_of_more_than_60_sentences_is_scored_whole_and_blamed_in_its_first_60(monkeypatch):
    """A long WritingPrompts story (13% of wp_extra's human stories have more than 60 sentences) is not refused."""
    asked = {}

    class RecordingScorer:
        def __init__(self, metric):
            self.metric = metric

        def score(self, stories, batch_size=16, dtype=None):
            asked[self.metric] = stories
            return [0.5] * len(stories)

    monkeypatch.setattr(demo, "_scorer", lambda metric, tier="fast", corpus="roc": RecordingScorer(metric))
    rows, attribution = demo.score_story(LONG_STORY, metrics=("union", "plot_coherence"), tier="base", corpus="wp")
    assert [row[1] for row in rows] == [0.5, 0.5]
    assert asked["plot_coherence"] == [LONG_STORY] and asked["union"][0] == LONG_STORY  # the whole story, once
    assert len(asked["union"]) == 1 + 60 and [row[0] for row in attribution] == list(range(1, 61))
    assert "blame covers sentences 1-60 of 86" in demo.score_status(LONG_STORY, "wp")
    assert "blame" not in demo.score_status(LONG_STORY, "wp", blamed=False)  # no blame shown, none to explain
    assert "blame" not in demo.score_status("Ken went home. He slept.", "roc")


def test_the_longest_stories_are_blamed_in_fewer_sentences_with_the_page_saying_which():
    longest = " ".join(f"On day {i} of the long and dusty journey Ken walked slowly to the old mill by the river." for i in range(1, 111))
    assert 9_500 < len(longest) <= demo.MAX_CHARS
    assert demo.blamed_sentences(demo.story_sentences(longest)) == demo.MAX_BLAME_CHARS // len(longest) == 24
    assert "blame covers sentences 1-24 of 110" in demo.score_status(longest, "wp")


def test_a_story_of_punctuation_alone_is_a_message_not_a_crash():
    with pytest.raises(demo.DemoInputError, match="The story has no words"):
        demo.score_story("...", "Ken went home.", ("continuation_quality",))


def test_an_uploaded_story_that_is_too_long_is_named_by_its_number(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "MAX_CHARS", 40)
    upload = tmp_path / "stories.txt"
    upload.write_text("Ken went home. He slept.\n" + "Ken went home. " * 5 + "\n")
    with pytest.raises(demo.DemoInputError, match="Story 2 of the file: The story has 74 characters"):
        demo.score_upload(str(upload))


def test_an_upload_that_is_not_utf8_names_its_line(tmp_path):
    upload = tmp_path / "stories.txt"
    upload.write_bytes(b"Ken went home.\nCaf\xe9 was closed.\n")
    with pytest.raises(demo.DemoInputError, match=r"Malformed file: stories.txt:2: not UTF-8 text"):
        demo.score_upload(str(upload))


def test_missing_nltk_data_is_shown_with_its_message_not_as_a_crash():
    from storyeval.checkpoints.resources import MissingResourceError, download_missing_nltk

    message = demo._message(MissingResourceError("NLTK resource 'punkt_tab' not found (NLTK_DATA=<unset>)"))
    assert message == "**Error:** NLTK resource 'punkt_tab' not found (NLTK_DATA=<unset>)"
    assert download_missing_nltk() == []  # everything is under NLTK_DATA here, so nothing is fetched


def test_file_and_key_errors_show_their_message():
    missing = FileNotFoundError(2, "No such file or directory", "/tmp/none.txt")
    assert demo._message(missing) == "**Error:** [Errno 2] No such file or directory: '/tmp/none.txt'"  # not its errno alone
    assert demo._message(KeyError("unknown config 'x'")) == "**Error:** unknown config 'x'"  # not quoted


def test_a_failed_nltk_download_is_a_clear_error(tmp_path, monkeypatch):
    import nltk

    from storyeval.checkpoints.resources import MissingResourceError, download_missing_nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])  # nothing there
    monkeypatch.setattr(nltk, "download", lambda *args, **kwargs: False)  # offline, as here
    with pytest.raises(MissingResourceError, match="could not download the NLTK resources .*punkt_tab.*; set NLTK_DATA"):
        download_missing_nltk()


def test_continuation_quality_scores_the_story_after_its_opening(monkeypatch):
    asked = []

    class RecordingScorer:
        def score(self, contexts, continuations):
            asked.append((contexts, continuations))
            return {"overall": [3.0], "relevance": [3.0], "interestingness": [3.0]}

    monkeypatch.setattr(demo, "_scorer", lambda metric, tier="fast", corpus="roc": RecordingScorer())
    demo.score_story("Ken went home. He was tired. He slept.", metrics=("continuation_quality",))
    demo.score_story("He was tired. He slept.", "Ken went home.", ("continuation_quality",))
    # as in training: a short opening, then the rest of the story
    assert asked == [(["Ken went home."], ["He was tired. He slept."]), (["Ken went home."], ["He was tired. He slept."])]
    rows, _ = demo.score_story("Ken went home.", metrics=("continuation_quality",))
    assert rows[0][1] is None and "two or more sentences" in rows[0][2]


def components(page) -> dict:
    """The page's components by elem_id, as Gradio sends them to the browser."""
    return {c["props"].get("elem_id"): c["props"] for c in page.get_config_file()["components"] if c["props"].get("elem_id")}


def test_tables_are_hidden_until_there_is_something_to_show_and_the_note_wraps():
    pytest.importorskip("gradio")
    shown = components(demo.build_demo(offer_base=False))
    for elem_id in ("scores", "attribution", "highlight", "histogram", "file-scores"):
        assert shown[elem_id]["visible"] is False, elem_id  # an empty table shows placeholder headers "1 2 3"
    assert shown["scores"]["wrap"] is True and shown["attribution"]["wrap"] is True
    assert "tier" not in shown


def test_the_union_app_has_no_context_box_it_would_ignore():
    pytest.importorskip("gradio")
    assert components(demo.build_demo(metrics=("union",)))["context"]["visible"] is False
    assert components(demo.build_demo(metrics=("plot_coherence",)))["context"]["visible"] is False
    assert components(demo.build_demo())["context"]["visible"] is True  # continuation quality scores given it


def test_the_base_tier_is_offered_where_its_backbone_is_installed(monkeypatch):
    pytest.importorskip("gradio")
    monkeypatch.setattr(demo, "base_tier_available", lambda: True)
    page = components(demo.build_demo())
    assert [choice[1] for choice in page["tier"]["choices"]] == ["fast", "base"]
    monkeypatch.setattr(demo, "base_tier_available", lambda: False)
    assert "tier" not in components(demo.build_demo())


def test_the_page_opens_on_the_default_config_of_union_and_without_its_backbone_says_how_to_add_it(monkeypatch):
    pytest.importorskip("gradio")
    from storyeval.checkpoints.registry import metric_spec

    corpus, tier = demo.default_choice()
    assert demo.CONFIGS[corpus, tier]["union"] == metric_spec("union").default  # what evaluate.load("union") loads
    monkeypatch.setattr(demo, "base_tier_available", lambda: True)
    page = components(demo.build_demo())
    assert (page["corpus"]["value"], page["tier"]["value"]) == (corpus, tier)
    assert page["wp-note"]["visible"] == (corpus == "wp") and "base-missing" not in page
    monkeypatch.setattr(demo, "base_tier_available", lambda: False)
    page = components(demo.build_demo())
    assert page["corpus"]["value"] == corpus and ("base-missing" in page) == (tier == "base")


def test_the_base_tier_scores_with_the_base_checkpoints():
    from storyeval.checkpoints.backbones import base_backbone_installed

    if not base_backbone_installed():
        pytest.skip("the base tier's backbone is not installed")
    rows, attribution = demo.score_story("Ken went home. He was tired. He slept.", metrics=("union",), tier="base")
    assert rows[0][0] == "UNION (roc-base)" and 0 <= rows[0][1] <= 1 and "human-written ROCStories" in rows[0][2]
    assert len(attribution) == 3
    assert demo.metric_title("union") == "UNION (roc)" and demo.metric_title("continuation_quality", "base") == "Continuation quality (deltascore-base)"


WP_STORY = ("The letter arrived on the morning of my thirtieth birthday, written in my own handwriting. "
            "It told me not to open the red door in the basement. I had lived in the house for ten years and had never seen "
            "a red door. That night I went down with a flashlight, and there it was, between the furnace and the shelves of "
            "old paint. I stood there for an hour. Then I went upstairs, wrote a letter to myself, and dated it ten years ago.")


def test_long_stories_are_scored_with_the_writingprompts_configs_and_their_percentiles():
    rows, attribution = demo.score_story(WP_STORY, metrics=("union", "plot_coherence", "continuation_quality"), corpus="wp")
    by_title = {row[0]: row for row in rows}
    assert 0 <= by_title["UNION (wp)"][1] <= 1 and "human-written WritingPrompts test stories" in by_title["UNION (wp)"][2]
    assert by_title["Plot coherence"][1] is None and "the base tier has one" in by_title["Plot coherence"][2]
    assert "human-written WritingPrompts test stories" in by_title["Continuation quality: overall"][2]
    assert len(attribution) == 6
    assert demo.metric_title("plot_coherence", "base", "wp") == "Plot coherence (wp-base)"
    assert demo._config("union", "base", "wp") == "wp-base-complete" and demo._config("continuation_quality", "base", "wp") == "deltascore-base"


def test_a_long_story_scored_with_the_roc_configs_gets_a_pointer_to_the_wp_ones():
    long_story = " ".join([WP_STORY] * 3)
    assert "choose 'Long stories that open with a prompt'" in demo.length_hint(long_story, "roc")
    assert demo.length_hint(long_story, "wp") == "" and demo.length_hint("Ken went home. He slept.", "roc") == ""


def test_the_page_offers_both_kinds_of_story_and_the_wp_caveat():
    pytest.importorskip("gradio")
    shown = components(demo.build_demo(offer_base=False))
    corpus = demo.default_choice()[0]
    assert [choice[1] for choice in shown["corpus"]["choices"]] == ["roc", "wp"] and shown["corpus"]["value"] == corpus
    assert shown["wp-note"]["visible"] is (corpus == "wp") and "read each score for the kinds of story it was checked on" in shown["wp-note"]["value"]


def test_a_story_or_upload_that_is_not_english_gets_a_message_not_a_score(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "_scorer", lambda *args, **kwargs: pytest.fail("scored a text that is not English"))
    with pytest.raises(demo.DemoInputError, match=r"The story is not English \(it reads as German"):
        demo.score_story("Der alte Mann ging jeden Morgen mit seinem Hund in den Park. Er war müde.")
    with pytest.raises(demo.DemoInputError, match=r"The context is not English \(\d+% of its letters are Cyrillic"):
        demo.score_story("He went home.", "Старик каждое утро кормил голубей в парке.")
    upload = tmp_path / "stories.txt"
    upload.write_text("Ken went home. He slept.\nLe petit garçon a trouvé un chat perdu devant la boulangerie.\n")
    with pytest.raises(demo.DemoInputError, match=r"Line 2 of the file: the line is not English"):
        demo.score_upload(str(upload))
