"""UNION's perturbation techniques and sampler, on concrete stories and as properties."""
import random
from collections import Counter

import datasets
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyeval_training.data.negatives.reordering import reorder
from storyeval_training.data.negatives.repetition import repeat_ngram, repeat_sentence, repetition
from storyeval_training.data.negatives.sampler import TECHNIQUE_WEIGHTS, NegativeSampler
from storyeval_training.data.negatives.substitution import KeywordLexicon, read_antonyms, substitute_keywords, substitute_sentence
from storyeval_training.data.technique_counts import technique_counts

# The leading context and human reference of the UNION paper's Table 1 example, delexicalised.
STORY = [
    s.split()
    for s in [
        "[MALE] was at the bar .",
        "he noticed a phone on the floor .",
        "he was going to take it to lost and found .",
        "but it started ringing on the way .",
        "[MALE] answered it and returned it to the owner 's friends .",
    ]
]


@pytest.fixture(scope="module")
def lexicon(tmp_path_factory):
    path = tmp_path_factory.mktemp("lex") / "antonym.txt"
    path.write_text(
        "happy|||/r/Antonym|||sad unhappy\nhappy|||/r/NotDesires|||\n"
        "love|||/r/Antonym|||hate\nfloor|||/r/Antonym|||ceiling\n"
        "phone|||/r/Antonym|||\nway|||/r/Antonym|||\n"
    )
    lex = KeywordLexicon.from_conceptnet(path)
    lex.count_mentions([[("phone", "NN"), ("way", "NN"), ("way", "NN"), ("floor", "NN")]])
    return lex


def test_repeat_ngram_inserts_the_copy_right_after_it():
    rng = random.Random(3)
    out = repeat_ngram(STORY, 1, rng)
    changed = [i for i in range(5) if out[i] != STORY[i]]
    assert len(changed) == 1 and changed[0] >= 1
    original, repeated = STORY[changed[0]], out[changed[0]]
    extra = len(repeated) - len(original)
    assert 1 <= extra <= 4
    # removing one copy of the repeated n-gram gives back the sentence
    assert any(repeated[:k] + repeated[k + extra :] == original and repeated[k : k + extra] == repeated[k + extra : k + 2 * extra]
               for k in range(len(original)))
    assert repeated[-1] == "."


def test_repeat_sentence_overwrites_the_next_sentence_and_keeps_the_count():
    out = repeat_sentence(STORY, 1, random.Random(0))
    assert len(out) == len(STORY) and out[0] == STORY[0]
    i = next(i for i in range(1, 5) if out[i] != STORY[i])
    assert out[i] == out[i - 1]
    # the context is never the copy either: a story of context + two sentences has one source only
    for seed in range(20):
        assert repeat_sentence(STORY[:3], 1, random.Random(seed)) == [STORY[0], STORY[1], STORY[1]]


def test_reorder_really_changes_the_order_and_keeps_the_context():
    for seed in range(50):
        out = reorder(STORY, 1, random.Random(seed))
        assert out[0] == STORY[0] and out != STORY and sorted(out) == sorted(STORY)


def test_reorder_cannot_apply_to_a_one_sentence_body():
    assert reorder(STORY[:2], 1, random.Random(0)) is None
    assert reorder([STORY[0], STORY[1], list(STORY[1])], 1, random.Random(0)) is None


def test_keyword_substitution_prefers_inflected_antonyms(lexicon):
    story = [["[MALE]", "was", "sad", "."], ["he", "loved", "the", "floor", "."]]
    outs = {tuple(map(tuple, substitute_keywords(story, 1, random.Random(s), lexicon))) for s in range(30)}
    assert (("[MALE]", "was", "sad", "."), ("he", "hated", "the", "floor", ".")) in outs  # VBD antonym, inflected
    assert (("[MALE]", "was", "sad", "."), ("he", "loved", "the", "ceiling", ".")) in outs
    assert all(o[0] == tuple(story[0]) for o in outs)


def test_an_article_before_a_substituted_word_agrees_with_it(tmp_path):
    path = tmp_path / "antonym.txt"
    path.write_text("friend|||/r/Antonym|||enemy\nhonest|||/r/Antonym|||sly\n")
    lex = KeywordLexicon.from_conceptnet(path)
    story = [["he", "sat", "."], ["A", "friend", "came", "."], ["she", "was", "an", "honest", "woman", "."]]
    outs = {tuple(map(tuple, substitute_keywords(story, 1, random.Random(s), lex))) for s in range(40)}
    assert ("An", "enemy", "came", ".") in {o[1] for o in outs}  # "A enemy" would mark the story as made up
    assert ("she", "was", "a", "sly", "woman", ".") in {o[2] for o in outs}


def test_antonyms_that_are_already_inflected_are_not_inflected_again(tmp_path):
    path = tmp_path / "antonym.txt"
    path.write_text("find|||/r/Antonym|||lose lost\ncome|||/r/Antonym|||going\n")
    lex = KeywordLexicon.from_conceptnet(path)
    assert {lex.antonym("found", "VBD", random.Random(s)) for s in range(20)} == {"lost"}  # not "losted"
    assert {lex.antonym("coming", "VBG", random.Random(s)) for s in range(20)} == {"going"}  # not "goinging"


def test_keyword_without_antonym_takes_a_same_pos_keyword_by_frequency(lexicon):
    story = [["i", "ran", "."], ["the", "phone", "rang", "."]]
    draws = Counter(substitute_keywords(story, 1, random.Random(s), lexicon)[1][1] for s in range(300))
    assert set(draws) <= {"way", "floor"} and draws["way"] > draws["floor"]  # "way" is mentioned twice as often


def test_sentence_substitution_takes_a_sentence_of_another_story():
    pool = [["she", "baked", "a", "cake", "."]]
    out = substitute_sentence(STORY, 1, random.Random(1), pool)
    assert out[0] == STORY[0] and sum(a != b for a, b in zip(out, STORY)) == 1 and pool[0] in out


def test_read_antonyms_keeps_single_words_of_all_four_relations(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("go|||/r/Antonym|||stay come\ngo|||/r/NotDesires|||come\ngo|||/r/NotCapableOf|||stand still\n")
    assert read_antonyms(path) == {"go": ["stay", "come", "stand", "still"]}
    assert read_antonyms(path, relations=["/r/Antonym"]) == {"go": ["stay", "come"]}
    path.write_text("go|||stay\n")
    with pytest.raises(ValueError, match=r"a.txt:1:"):
        read_antonyms(path)


def test_sampler_records_techniques_and_is_reproducible(lexicon):
    sampler = NegativeSampler(lexicon, pool=[["she", "baked", "a", "cake", "."]], seed=1)
    first = [sampler.sample(STORY, 1, sampler.rng_for(f"s{i}")) for i in range(200)]
    again = [sampler.sample(STORY, 1, sampler.rng_for(f"s{i}")) for i in range(200)]
    assert [(n.sentences, n.techniques) for n in first] == [(n.sentences, n.techniques) for n in again]
    counts = Counter(len(n.techniques) for n in first)
    assert counts[1] > counts[4] and set(counts) <= {1, 2, 3, 4}
    used = Counter(t for n in first for t in n.techniques)
    assert set(used) == set(TECHNIQUE_WEIGHTS) and used["reordering"] > used["repetition"]


def test_sampler_falls_back_when_a_story_cannot_be_reordered(lexicon):
    sampler = NegativeSampler(lexicon, pool=[["she", "baked", "a", "cake", "."]], seed=0)
    story = [["[MALE]", "was", "at", "the", "bar", "."], ["he", "was", "happy", "."]]
    for i in range(100):
        negative = sampler.sample(story, 1, sampler.rng_for(str(i)))
        assert negative.sentences != story and "reordering" not in negative.techniques
    assert sampler.sample([["only", "a", "context", "."]], 1, random.Random(0)) is None


WORDS = ["he", "she", "was", "went", "happy", "the", "dog", "ran", "home", "not", "did", "n't", "floor", "."]
sentence_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(story=st.lists(sentence_st, min_size=2, max_size=6), seed=st.integers(0, 10_000))
def test_sampler_never_touches_the_context_and_always_changes_the_story(lexicon, story, seed):
    sampler = NegativeSampler(lexicon, pool=[["she", "baked", "a", "cake", "."]], seed=seed)
    snapshot = [list(s) for s in story]
    negative = sampler.sample(story, 1, random.Random(seed))
    assert story == snapshot  # the input is not mutated
    assert negative is not None  # sentence substitution always applies to a non-empty body
    assert negative.sentences[0] == story[0]
    assert negative.sentences != story
    assert 1 <= len(negative.techniques) <= 4 and len(set(negative.techniques)) == len(negative.techniques)


@settings(max_examples=100, deadline=None)
@given(story=st.lists(sentence_st, min_size=2, max_size=6), seed=st.integers(0, 10_000))
def test_each_technique_keeps_the_context_and_returns_none_or_a_change(story, seed):
    for technique in (repeat_ngram, repeat_sentence, repetition, reorder):
        out = technique(story, 1, random.Random(seed))
        assert out is None or (out[0] == story[0] and out != story)


def test_technique_counts_count_a_stacked_row_under_each_technique_and_its_number():
    rows = datasets.Dataset.from_dict({"techniques": [["reordering"], ["negation", "reordering"], ["repetition"]]})
    assert technique_counts(rows, unit="stories") == {
        "stories": 3,
        "per_technique": {"negation": 1, "reordering": 2, "repetition": 1},
        "per_number_of_techniques": {1: 2, 2: 1},
    }
