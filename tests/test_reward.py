"""storyeval.reward: TRL's reward-function signature over the bundled metrics, its formats, floor and errors,
and two GRPO steps of the example's tiny policy with it."""
import importlib.util
import logging

import pytest

import storyeval
from storyeval.analysis import rewards
from tests.conftest import CHECKOUT

PROMPTS = ["Ken went to the bar with his friends.", "Amy wanted a new bike."]
COMPLETIONS = [" He ordered a drink and talked for hours. Then he walked home.", "She saved her money all summer and bought one."]


@pytest.fixture(scope="module")
def union():
    return storyeval.reward("union", "roc")


def conversational(prompts, completions):
    return ([[{"role": "system", "content": "Write a story."}, {"role": "user", "content": p}] for p in prompts],
            [[{"role": "assistant", "content": c}] for c in completions])


def test_the_reward_is_the_score_of_prompt_and_completion_as_one_story(union):
    scorer = storyeval.load_from_checkpoint(storyeval.download_model("union/roc"))
    expected = scorer.score([p + c if c.startswith(" ") else f"{p} {c}" for p, c in zip(PROMPTS, COMPLETIONS)])
    assert union(prompts=PROMPTS, completions=COMPLETIONS, completion_ids=[[1], [2]], trainer_state=None) == pytest.approx(expected)
    assert union.__name__ == "union_roc" and storyeval.reward is rewards.reward


def test_text_completion_scores_the_completion_alone():
    reward = storyeval.reward("union", "roc", text="completion")
    scorer = storyeval.load_from_checkpoint(storyeval.download_model("union/roc"))
    assert reward(prompts=PROMPTS, completions=COMPLETIONS) == pytest.approx(scorer.score(COMPLETIONS))
    assert reward(completions=COMPLETIONS) == pytest.approx(scorer.score(COMPLETIONS))  # no prompts needed


def test_the_conversational_format_scores_the_user_and_assistant_contents(union):
    prompts, completions = conversational(PROMPTS, [c.strip() for c in COMPLETIONS])
    assert union(prompts=prompts, completions=completions) == pytest.approx(union(prompts=PROMPTS, completions=COMPLETIONS))
    parts = [[{"role": "assistant", "content": [{"type": "text", "text": c.strip()}]}] for c in COMPLETIONS]
    assert union(prompts=prompts, completions=parts) == pytest.approx(union(prompts=PROMPTS, completions=COMPLETIONS))


def test_continuation_quality_scores_the_completion_given_the_prompt_and_its_criterion_is_chosen():
    overall, relevance = storyeval.reward("continuation_quality"), storyeval.reward("continuation_quality", criterion="relevance")
    scorer = storyeval.load_from_checkpoint(storyeval.download_model("continuation_quality/deltascore"))
    scores = scorer.score(PROMPTS, COMPLETIONS)
    assert overall(prompts=PROMPTS, completions=COMPLETIONS) == pytest.approx(scores["overall"])
    assert relevance(prompts=PROMPTS, completions=COMPLETIONS) == pytest.approx(scores["relevance"])
    assert relevance.__name__ == "continuation_quality_relevance"


@pytest.mark.parametrize("bad", ["", "   ", "...!", "</s>", "\u200b", "12345 67890", "1,234.56 !!!",
                                 "Er ging nach Hause und schlief die ganze Nacht in seinem Bett.", "Он пошёл домой и лёг спать."])
def test_a_letterless_or_non_english_completion_gets_the_floor_and_the_others_their_scores(union, bad, caplog):
    logged = {}
    with caplog.at_level(logging.WARNING):
        values = union(prompts=PROMPTS + PROMPTS[:1], completions=[*COMPLETIONS, bad], log_metric=logged.__setitem__)
    assert values[2] == rewards.PROBABILITY_FLOOR == 0.0
    assert values[:2] == pytest.approx(union(prompts=PROMPTS, completions=COMPLETIONS))
    assert logged == {"union_roc/floored": pytest.approx(1 / 3)}


def test_continuation_quality_floor_is_the_scale_bottom_or_the_lowest_score_of_the_call():
    reward = storyeval.reward("continuation_quality")
    values = reward(prompts=PROMPTS + PROMPTS[:1], completions=[*COMPLETIONS, ""])
    assert values[2] == min(rewards.CONTINUATION_FLOOR, *values[:2])
    assert reward(prompts=["?"], completions=["He left."]) == [rewards.CONTINUATION_FLOOR]  # no context to score against


def test_a_story_the_scorer_refuses_gets_the_floor_without_sinking_its_batch(union, monkeypatch):
    expected = union(prompts=PROMPTS, completions=COMPLETIONS)
    score = union.scorer.score

    def refusing(stories, **options):  # as the scorer refuses a story beyond its window limit
        if any("REFUSED" in story for story in stories):
            raise ValueError("story needs more than 256 windows")
        return score(stories, **options)

    monkeypatch.setattr(union.scorer, "score", refusing)
    values = union(prompts=PROMPTS + PROMPTS[:1], completions=[*COMPLETIONS, "REFUSED story."])
    assert values[2] == 0.0 and values[:2] == pytest.approx(expected)


def test_the_scorable_rule_is_the_scorers_own():
    from storyeval.inputs import text_problem

    for text in ["", " ", "a", "...", "</s>", "</s> a", "\u200b", "x\ud800", "1", "ß"]:
        assert rewards.scorable(text) == (text_problem(text) is None), text


def test_story_quality_floors_a_letterless_prompt_it_would_pass_as_a_context(caplog):
    reward = storyeval.reward("story_quality", "roc")
    alone = reward(prompts=PROMPTS[:1], completions=COMPLETIONS[:1])
    values = reward(prompts=["...", PROMPTS[0]], completions=COMPLETIONS[:1] * 2)
    assert values[0] == 0.0 and values[1] == pytest.approx(alone[0]) and reward.last_floored == 1
    assert storyeval.reward("story_quality", "roc", text="completion")(prompts=["..."], completions=COMPLETIONS[:1])[0] > 0


def test_story_quality_takes_the_float32_it_scores_in_and_refuses_other_precisions():
    assert storyeval.reward("story_quality", "roc", dtype="float32").dtype == "float32"
    with pytest.raises(ValueError, match="story_quality scores in float32 only, not 'bfloat16'"):
        storyeval.reward("story_quality", "roc", dtype="bfloat16")


def test_story_quality_reward_is_combined_in_zero_to_one():
    reward = storyeval.reward("story_quality", "roc")
    values = reward(prompts=PROMPTS, completions=COMPLETIONS)
    suite = rewards.suite_class()("roc").score([c for c in COMPLETIONS], contexts=PROMPTS)
    assert values == pytest.approx([v / 100 for v in suite["combined"]]) and all(0 <= v <= 1 for v in values)


@pytest.mark.parametrize("completions, named", [
    ("a story", "str"), ({"role": "assistant"}, "dict"), ([1, 2], "int"), ([None, None], "NoneType"), (None, "None"),
])
def test_completions_of_a_wrong_type_name_the_type(union, completions, named):
    with pytest.raises(TypeError, match=named):
        union(prompts=PROMPTS, completions=completions)


def test_a_message_without_content_is_a_type_error(union):
    with pytest.raises(TypeError, match="message"):
        union(prompts=PROMPTS, completions=[[{"role": "assistant"}], [{"role": "assistant", "content": "x"}]])


def test_mismatched_lengths_are_a_value_error(union):
    with pytest.raises(ValueError, match="same length"):
        union(prompts=PROMPTS, completions=COMPLETIONS[:1])


def test_unknown_metric_config_and_options_list_the_choices():
    with pytest.raises(ValueError, match="story_quality"):
        storyeval.reward("bleu")
    with pytest.raises(ValueError, match="roc-base") as raised:
        storyeval.reward("union", "nope")
    assert str(raised.value).startswith("unknown union config 'nope'")  # unquoted, unlike a KeyError's message
    with pytest.raises(ValueError, match="wp-base"):
        storyeval.reward("story_quality", "nope")
    with pytest.raises(ValueError, match="completion"):
        storyeval.reward("union", "roc", text="story")
    with pytest.raises(ValueError, match="relevance"):
        storyeval.reward("continuation_quality", criterion="fun")
    with pytest.raises(ValueError, match="one score"):
        storyeval.reward("union", "roc", criterion="relevance")
    with pytest.raises(TypeError):
        storyeval.reward("union", "roc", temperature=1.0)


def load_example():
    spec = importlib.util.spec_from_file_location("grpo_story_reward", CHECKOUT / "examples" / "grpo_story_reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_grpo_steps_log_the_reward(union, tmp_path):
    pytest.importorskip("trl")
    example = load_example()
    trainer = example.train([union], example.openings(8, use_data=False), steps=2, output_dir=str(tmp_path), completion_length=12)
    logged = [entry for entry in trainer.state.log_history if "rewards/union_roc/mean" in entry]
    assert len(logged) == 2
    assert all(0.0 <= entry["rewards/union_roc/mean"] <= 1.0 for entry in logged)
    assert all("union_roc/floored" in entry for entry in logged)


def test_the_guard_leaves_human_like_continuations_alone_and_marks_down_the_degenerate(union):
    prompts = ["Ken went to the bar with his friends.", "Amy wanted a new bike for her birthday.", "The dog ran away from home."]
    human = ["He ordered a drink and talked with them for hours. Then the band began to play a song he loved. "
             "He danced until the bar closed and walked home happy.",
             "She asked her parents for one every day of the month. They told her she would have to wait and see. "
             "On her birthday she found a red bike waiting in the garage.",
             "The family searched the streets for it all night long. In the morning a neighbour called to say she had it. "
             "They were so glad to have their dog back at home."]
    assert rewards.guard_factors(prompts, human, "roc") == [1.0, 1.0, 1.0]
    repeated = [" ".join([p] * 4) for p in prompts]
    keywords = ["drink , hours , band , song , danced , bar , closed , walked , home , happy , night , friends , music , dance"] * 3
    one_for_all = [human[0]] * 3
    assert all(f < 0.25 for f in rewards.guard_factors(prompts, repeated, "roc"))
    assert all(f < 0.5 for f in rewards.guard_factors(prompts, [keywords[0] + f" {i}" for i in range(3)], "roc"))
    assert rewards.guard_factors(prompts, one_for_all, "roc") == [0.0, 0.0, 0.0]
    # completions of one prompt (a GRPO group) are not compared with each other
    assert rewards.guard_factors(prompts[:1] * 3, one_for_all, "roc") == [1.0, 1.0, 1.0]
    assert rewards.guard_factors(prompts[:1], ["He left."], "roc")[0] == pytest.approx(2 / 19)  # 2 words of 19 at least

    guarded = storyeval.reward("union", "roc", guard=True)
    assert guarded.__name__ == "union_roc_guarded" and guarded.guard_corpus == "roc"
    plain = union(prompts=prompts, completions=repeated)
    assert guarded(prompts=prompts, completions=repeated) == pytest.approx(
        [p * f for p, f in zip(plain, rewards.guard_factors(prompts, repeated, "roc"))])


def test_the_guard_of_continuation_quality_names_its_corpus():
    with pytest.raises(ValueError, match="guard='roc'"):
        storyeval.reward("continuation_quality", guard=True)
    assert storyeval.reward("continuation_quality", guard="wp").guard_corpus == "wp"
    assert storyeval.reward("story_quality", "wp-base", guard=True).guard_corpus == "wp"
    with pytest.raises(ValueError, match="corpus"):
        storyeval.reward("union", "roc", guard="poems")
