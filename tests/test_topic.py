"""The topic part: how well a story's distinct sentences fit one another, by a sentence embedder (first_checks.md, E17)."""
import itertools

import numpy as np
import pytest
from conftest import save_tiny_checkpoint

from storyeval.scoring.ending import TopicMixScorer, mix_scorer, mixed
from storyeval.scoring.sequence import load_story_classifier
from storyeval.scoring.topic import load_topic_scorer, mean_pairwise_cosine
from storyeval.text import distinct_sentences

STORY = "Ken went to the bar. He ordered a drink. He met a friend. They talked for hours. Ken went home happy."


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    """A random one-layer BERT in a folder, as a backbone folder holds one."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from storyeval.checkpoints import resolution as checkpoints

    folder = tmp_path_factory.mktemp("embedder")
    torch.manual_seed(0)
    BertModel(BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=64)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(checkpoints.backbone_path()).save_pretrained(folder)
    return folder


def test_the_mean_pairwise_cosine_is_the_mean_over_every_two_rows():
    rows = np.random.default_rng(0).normal(size=(6, 5))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    brute = np.mean([a @ b for a, b in itertools.combinations(rows, 2)])
    assert mean_pairwise_cosine(rows) == pytest.approx(brute)


def test_distinct_sentences_count_a_repeated_sentence_once_and_keep_only_those_with_words():
    assert distinct_sentences("He ran. He ran. She sat. He ran. ...") == ["He ran.", "She sat."]


def test_a_repeat_or_a_shuffle_leaves_the_topic_score_as_it_was(embedder):
    scorer = load_topic_scorer(embedder)
    repeated = STORY.replace("He met a friend.", "He met a friend. He met a friend. He met a friend.")
    shuffled = " ".join(distinct_sentences(STORY)[::-1])
    plain, again, reordered = scorer.score_checked([STORY, repeated, shuffled])
    assert 0 <= plain <= 1 and again == pytest.approx(plain) and reordered == pytest.approx(plain)
    assert scorer.score_checked([STORY + " The stock market closed two points higher."])[0] != pytest.approx(plain)


def test_a_text_of_one_distinct_sentence_is_refused_by_the_topic_scorer(embedder):
    with pytest.raises(ValueError, match="text 1 has fewer than two distinct sentences"):
        load_topic_scorer(embedder).score_checked([STORY, "He ran. He ran."])


def test_a_sentence_longer_than_the_embedder_reads_at_once_is_read_whole_in_pieces(embedder):
    from storyeval.scoring.topic import TopicScorer

    wide = load_topic_scorer(embedder)
    narrow = TopicScorer(wide.model, wide.tokenizer, max_tokens=6)
    long_sentence = "the old red boat sailed slowly past the quiet harbour lights at dawn"
    assert len(narrow.pieces(long_sentence)) > 2 and all(len(piece) <= 6 for piece in narrow.pieces(long_sentence))
    tail_changed = long_sentence.replace("at dawn", "at noon")
    first, second = narrow.embed([long_sentence, tail_changed])
    assert np.linalg.norm(first) == pytest.approx(1) and not np.allclose(first, second)  # its last piece counted
    with pytest.raises(ValueError, match="room for a token"):
        TopicScorer(wide.model, wide.tokenizer, max_tokens=2)


def test_a_topic_mix_is_the_story_score_mixed_with_the_topic_score_and_a_one_sentence_story_keeps_its_story_score(embedder, tmp_path):
    story = load_story_classifier(save_tiny_checkpoint(tmp_path / "story"))
    topic = load_topic_scorer(embedder)
    scorer = mix_scorer("topic", story, topic, 0.2, name="t")
    assert isinstance(scorer, TopicMixScorer)
    one = "Ken went to the bar. Ken went to the bar."
    expected = [mixed(story.score([STORY])[0], topic.score_checked([STORY])[0], 0.2), story.score([one])[0]]
    assert scorer.score([STORY, one]) == pytest.approx(expected)
    assert scorer.settings().startswith("t_fp32_")


def test_the_probes_mean_of_every_two_is_the_topic_scores_statistic():
    from benchmarks.agreement.topic_probe import statistics

    rows = np.random.default_rng(1).normal(size=(5, 4))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    found = statistics(rows)
    assert found["pairs_mean"] == pytest.approx(mean_pairwise_cosine(rows)) and len(found) == 8
    assert found["nearest_min"] <= found["nearest_lowest_quarter"] and found["to_others_min"] <= found["to_others_mean"]


@pytest.mark.parametrize("argv, message", [(["--max-units-per-view", "0"], "--max-units-per-view must be positive"),
                                           (["--kinds", "juggle"], "--kinds ['juggle']: not kinds of the check"),
                                           ([], "no stories/")])
def test_the_probe_refuses_bad_options_before_loading_a_model(tmp_path, capsys, argv, message):
    from benchmarks.agreement import topic_probe

    with pytest.raises(SystemExit) as stopped:
        topic_probe.main(["--breaks-dir", str(tmp_path), *argv])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
