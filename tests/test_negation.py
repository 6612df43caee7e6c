"""Negation alteration (UNION, Table 8): concrete rules and general properties."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyeval_training.data.negatives.negation import add_negation, alter_negation, remove_negation

SEEDS = range(40)


def _outputs(fn, sentence: str) -> set[str | None]:
    """Every output ``fn`` gives for ``sentence`` over a range of seeds."""
    results = set()
    for seed in SEEDS:
        out = fn(sentence.split(), random.Random(seed))
        results.add(None if out is None else " ".join(out))
    return results


# sentence -> every allowed result of add_negation
ADD_CASES = {
    "he went to the store .": {"he did not go to the store .", "he did n't go to the store ."},
    "she is happy .": {"she is not happy .", "she is n't happy ."},
    "i can swim .": {"i can not swim .", "i ca n't swim ."},
    "he goes home .": {"he does not go home .", "he does n't go home ."},
    "they go home .": {"they do not go home .", "they do n't go home ."},
    "he had gone home .": {"he had not gone home .", "he had n't gone home ."},
    "he will come .": {"he will not come .", "he wo n't come ."},
    "he could come .": {"he could not come .", "he could n't come ."},
    "she shall go .": {"she shall not go .", "she sha n't go ."},
    "he did like it .": {"he did not like it .", "he did n't like it ."},
    "go home .": {"do not go home .", "do n't go home ."},
    "he ate some soup .": {"he did not eat some soup .", "he did n't eat some soup ."},
}


@pytest.mark.parametrize("sentence", sorted(ADD_CASES))
def test_add_negation_follows_table_8(sentence):
    allowed = ADD_CASES[sentence]
    out = add_negation(sentence.split(), random.Random(0))
    assert " ".join(out) in allowed
    # the long and the short form are both produced over a range of seeds
    assert _outputs(add_negation, sentence) == allowed


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("i am happy .", {"i am not happy ."}),  # "am n't" does not exist
        ("i 'm tired .", {"i 'm not tired ."}),
        ("he may come .", {"he may not come ."}),
        ("he 'll go .", {"he 'll not go ."}),
        # the auxiliary carries the negation, never the verb it governs
        ("he could have gone .", {"he could not have gone .", "he could n't have gone ."}),
        ("i was going home .", {"i was not going home .", "i was n't going home ."}),
        # to-infinitives are skipped, so only the main verb is negated
        ("she wanted to go .", {"she did not want to go .", "she did n't want to go ."}),
        # inverted questions only take the short form
        ("did you go ?", {"did n't you go ?"}),
        ("am i late ?", {None}),
    ],
)
def test_add_negation_special_cases(sentence, expected):
    assert _outputs(add_negation, sentence) == expected


def test_gerund_is_negated_with_not():
    outs = _outputs(add_negation, "he kept running .")
    assert "he kept not running ." in outs
    assert outs <= {"he kept not running .", "he did not keep running .", "he did n't keep running ."}


@pytest.mark.parametrize(
    "sentence",
    ["the end .", "[MALE] was not happy .", "he never went .", "she did n't go ."],
)
def test_add_negation_none_without_a_free_verb(sentence):
    assert add_negation(sentence.split(), random.Random(0)) is None


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("he did n't go to the store .", "he went to the store ."),
        ("he did not go to the store .", "he went to the store ."),
        ("she ca n't swim .", "she can swim ."),
        ("he does not like it .", "he likes it ."),
        ("he does n't have money .", "he has money ."),
        ("they wo n't come .", "they will come ."),
        ("she sha n't pass .", "she shall pass ."),
        ("she cannot swim .", "she can swim ."),
        ("do n't worry .", "worry ."),
        ("i do not know .", "i know ."),
        ("[MALE] was n't happy .", "[MALE] was happy ."),
        ("he had not gone home .", "he had gone home ."),
        ("i am not going .", "i am going ."),
        ("he never went .", "he went ."),
        ("he did not really go .", "he really went ."),
        ("[FEMALE] did n't go .", "[FEMALE] went ."),
        ("She ca n't swim .", "She can swim ."),
        ("did n't you go ?", "did you go ?"),
    ],
)
def test_remove_negation_restores_the_verb(sentence, expected):
    assert _outputs(remove_negation, sentence) == {expected}


@pytest.mark.parametrize(
    "sentence", ["the end .", "he went home .", "i ai n't going .", "whether or not he went ."]
)
def test_remove_negation_none_without_a_removable_negation(sentence):
    assert remove_negation(sentence.split(), random.Random(0)) is None


def test_remove_negation_picks_among_several():
    outs = _outputs(remove_negation, "he did n't go and she could not stay .")
    assert outs == {"he went and she could not stay .", "he did n't go and she could stay ."}


def test_alter_negation_removes_if_it_can_else_adds():
    assert _outputs(alter_negation, "she ca n't swim .") == {"she can swim ."}
    assert _outputs(alter_negation, "she is happy .") == ADD_CASES["she is happy ."]
    assert alter_negation("the end .".split(), random.Random(0)) is None
    assert alter_negation([], random.Random(0)) is None


def test_deterministic_given_the_rng():
    sentence = "he kept running and she went home .".split()
    for fn in (add_negation, alter_negation):
        assert fn(sentence, random.Random(7)) == fn(sentence, random.Random(7))


VOCAB = [
    "he", "she", "they", "i", "[MALE]", "the", "dog", "store", "home", "happy", "to", "and",
    "went", "go", "goes", "gone", "running", "is", "was", "am", "'s", "can", "will", "may",
    "did", "does", "do", "had", "has", "not", "n't", "never", "cannot", "ca", "wo", "ai",
    "or", "really", ".", ",", "?", "any", "anyone", "ever", "either", "yet", "at", "all", "without",
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(VOCAB), max_size=10), st.integers(0, 2**32 - 1))
def test_output_differs_and_input_is_untouched(tokens, seed):
    for fn in (add_negation, remove_negation, alter_negation):
        before = list(tokens)
        out = fn(tokens, random.Random(seed))
        assert tokens == before
        assert out is None or (out != tokens and out is not tokens)


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("no one stopped .", "someone stopped ."),
        ("nobody came .", "somebody came ."),
        ("nothing happened to him .", "something happened to him ."),
        ("he had no idea .", "he had some idea ."),
        ("he no longer worked there .", "he still worked there ."),
        ("none of them came .", None),  # no single positive form, and no second negation either
        ("no , he said .", None),
    ],
)
def test_negative_pronouns_are_flipped_not_doubled(sentence, expected):
    for seed in range(5):
        out = alter_negation(sentence.split(), random.Random(seed))
        assert (" ".join(out) if out else None) == expected


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("she did n't get any sleep .", "she got some sleep ."),
        ("he did n't see anyone .", "he saw someone ."),
        ("he could n't travel anymore .", "he could travel ."),
        ("you can never take that away .", "you can take that away ."),
        ("he did n't like it at all .", "he liked it ."),
        ("he did n't want any more cake .", "he wanted some more cake ."),
        ("she had n't finished yet .", "she had finished ."),
        ("he did n't go either .", "he went too ."),
        ("no one had ever seen anything .", "someone had seen something ."),
        # items before the removed negation, or after another licensor, were never its to license
        ("if anyone asks , he did n't go .", "if anyone asks , he went ."),
        ("he did n't see anyone without any help .", "he saw someone without any help ."),
        # "either" inside the sentence has no positive form: the negation stays
        ("he did n't want either of them .", None),
    ],
)
def test_removing_a_negation_leaves_no_unlicensed_polarity_item(sentence, expected):
    for seed in range(5):
        out = remove_negation(sentence.split(), random.Random(seed))
        assert (" ".join(out) if out else None) == expected
