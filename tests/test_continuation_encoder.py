"""The learned continuation encoder: its pairs, its window, and its feature group in the continuation scorer."""
import json
import logging
import random

import datasets
import pytest
import torch

from storyeval import text as textlib
from storyeval.models.continuation.cooccurrence import CooccurrenceStats
from storyeval.models.continuation.encoder import CONTEXT_FLOOR, ENCODER_KIND, ContinuationEncoder, encode_pairs, pad, pair_ids, save_encoder_config
from storyeval.models.continuation.features import FEATURE_GROUPS, FeatureExtractor
from storyeval.models.continuation.model import CRITERIA, ContinuationModel
from storyeval.models.continuation.ngram_lm import NgramLM
from storyeval_training.data import continuation_pairs

WINDOW = 64
STORIES = [
    ["[MALE] went to the store .", "he bought some milk .", "he did not forget the bread .", "he walked home happy ."],
    ["[FEMALE] loved her garden .", "she planted roses in spring .", "the roses bloomed in june .", "she was proud ."],
    ["the dog barked all night .", "the neighbours complained .", "we bought the dog a bed .", "it slept well after that ."],
    ["a storm hit the town .", "the power went out ."],
    ["only one sentence here ."],
]
CORPUS = [s.split() for story in STORIES for s in story] * 3


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from storyeval.checkpoints.resolution import backbone_path

    return AutoTokenizer.from_pretrained(backbone_path())


def save_tiny_encoder(folder, tokenizer, max_length=WINDOW, kind=ENCODER_KIND):
    from transformers import BertConfig

    from storyeval.models import UnionConfig, UnionModel

    torch.manual_seed(0)
    encoder = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=max_length)
    UnionModel(UnionConfig(encoder=encoder.to_dict(), has_reconstruction_head=False, recon_weight=0.0, max_length=max_length,
                           window_stride=max_length // 2, metric="continuation_quality")).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    save_encoder_config(folder, max_length)
    if kind != ENCODER_KIND:
        config_path = folder / "encoder_config.json"
        config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "kind": kind}))
    return folder


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory, tokenizer):
    return save_tiny_encoder(tmp_path_factory.mktemp("encoder"), tokenizer)


def stories_dataset(stories=STORIES):
    return datasets.Dataset.from_dict({"id": [f"s{i}" for i in range(len(stories))], "sentences": stories})


# ---- pairs ----

def test_pairs_have_every_kind_of_negative_and_the_true_sentence_first():
    pairs = continuation_pairs.build_pairs(stories_dataset(), seed=1)
    by_group: dict = {}
    for row in pairs:
        by_group.setdefault(row["group"], []).append(row)
    assert set(by_group) == {"s0", "s1", "s2", "s3"}  # a one-sentence story has no next sentence
    stories = dict(zip(stories_dataset()["id"], STORIES))
    kinds = set()
    for group, rows in by_group.items():
        sentences = stories[group]
        true = rows[0]
        assert true["kind"] == "true" and true["label"] == 1
        k = next(k for k in range(1, len(sentences)) if " ".join(sentences[:k]) == true["context"])
        assert true["candidate"] == sentences[k]
        for row in rows[1:]:
            assert row["label"] == 0 and row["context"] == true["context"] and row["candidate"] != true["candidate"]
            kinds.add(row["kind"])
            if row["kind"] == "other_story":
                assert row["candidate"] not in sentences
            elif row["kind"] == "later_sentence":
                assert row["candidate"] in sentences[k + 1 :]
            else:
                assert row["kind"] == "perturbed" and row["candidate"] not in sentences
    assert kinds == {"other_story", "later_sentence", "perturbed"}


def test_pairs_are_the_same_whatever_the_story_order():
    forward = continuation_pairs.build_pairs(stories_dataset(), seed=3)
    ids = [f"s{i}" for i in range(len(STORIES))]
    order = list(range(len(STORIES)))
    random.Random(0).shuffle(order)
    backward = continuation_pairs.build_pairs(
        datasets.Dataset.from_dict({"id": [ids[i] for i in order], "sentences": [STORIES[i] for i in order]}), seed=3)
    true = lambda pairs: {(r["group"], r["context"], r["candidate"]) for r in pairs if r["kind"] == "true"}  # noqa: E731
    assert true(forward) == true(backward)


def test_pairs_need_two_stories():
    with pytest.raises(ValueError, match="need at least 2"):
        continuation_pairs.build_pairs(stories_dataset([STORIES[0], STORIES[4]]))


def test_story_cloze_stories_are_dropped_by_their_normalised_first_sentence(tmp_path):
    header = ("InputStoryid\tInputSentence1\tInputSentence2\tInputSentence3\tInputSentence4\t"
              "RandomFifthSentenceQuiz1\tRandomFifthSentenceQuiz2\tAnswerRightEnding\n")
    # "Ken" is delexicalised and the case and spacing differ from the builder's text: the key still matches
    (tmp_path / "cloze.tsv").write_text(header + "x\tKen went to the store.\tHe ran.\tHe sat.\tHe ate.\tGood.\tBad.\t1\n")
    keys = continuation_pairs.story_cloze_keys(tmp_path / "cloze.tsv")
    assert textlib.leakage_key(STORIES[0][0]) in keys
    kept, dropped = continuation_pairs.drop_leaked(stories_dataset(), keys)
    assert dropped == 1 and "s0" not in kept["id"] and len(kept) == len(STORIES) - 1
    pairs = continuation_pairs.build_pairs(kept)
    assert not any(textlib.leakage_key(context) in keys for context in pairs["context"])


def test_pair_accuracy_by_kind():
    groups = ["a", "a", "a", "b", "b"]
    kinds = ["true", "other_story", "perturbed", "true", "other_story"]
    scores = [2.0, 1.0, 3.0, 0.0, 0.0]
    assert continuation_pairs.pair_accuracy_by_kind(groups, kinds, scores) == {
        "other_story": 0.75, "perturbed": 0.0, "all": 0.5}
    with pytest.raises(ValueError, match="no \\(true, negative\\) pairs"):
        continuation_pairs.pair_accuracy_by_kind(["a"], ["true"], [1.0])


def test_evaluation_subsets_never_split_a_story():
    from storyeval_training.recipes.train_continuation_encoder import first_groups

    pairs = continuation_pairs.build_pairs(stories_dataset(), seed=1)
    subset = first_groups(pairs, 2)
    assert len(subset) == pairs["group"].count(pairs["group"][0]) and len(set(subset["group"])) == 1
    assert len(first_groups(pairs, 0)) == len(first_groups(pairs, 10_000)) == len(pairs)


# ---- the window ----

def test_a_long_context_is_read_over_its_last_tokens(tokenizer):
    context, candidate = list(range(1000, 1100)), [7, 8, 9]
    ids, types, cut, context_cut = pair_ids(tokenizer, context, candidate, WINDOW)
    assert not cut and context_cut and len(ids) == WINDOW
    kept = WINDOW - 3 - len(candidate)
    assert ids == [tokenizer.cls_token_id, *context[-kept:], tokenizer.sep_token_id, *candidate, tokenizer.sep_token_id]
    assert types == [0] * (kept + 2) + [1] * (len(candidate) + 1)
    # a pair that fits is read whole
    ids, _, cut, context_cut = pair_ids(tokenizer, context[:5], candidate, WINDOW)
    assert not cut and not context_cut and ids[1:6] == context[:5]


def test_a_long_candidate_keeps_room_for_the_context_and_is_flagged(tokenizer):
    context, candidate = list(range(1000, 1100)), list(range(2000, 2100))
    ids, _, cut, _ = pair_ids(tokenizer, context, candidate, WINDOW)
    candidate_kept = WINDOW - 3 - CONTEXT_FLOOR
    assert cut and len(ids) == WINDOW
    assert ids[1 : 1 + CONTEXT_FLOOR] == context[-CONTEXT_FLOOR:] and ids[2 + CONTEXT_FLOOR : -1] == candidate[:candidate_kept]
    with pytest.raises(ValueError, match="no room"):
        pair_ids(tokenizer, context, candidate, CONTEXT_FLOOR + 3)


def test_the_encoder_warns_when_it_cuts_a_candidate(tiny_encoder, caplog):
    encoder = ContinuationEncoder(tiny_encoder)
    with caplog.at_level(logging.WARNING, logger="storyeval.models.continuation.encoder"):
        encoder.logits(["a ."], ["he went home . " * 50])
    assert "1 of 1 continuations are longer" in caplog.text


def test_a_long_context_is_never_read_over_its_last_window_silently(tiny_encoder, caplog):
    encoder = ContinuationEncoder(tiny_encoder)
    with caplog.at_level(logging.INFO, logger="storyeval.models.continuation.encoder"):
        encoder.logits(["a . " * 200, "a ."], ["he went home .", "he slept ."])
        encoder.logits(["a . " * 200], ["he went home ."])
    said = [(record.levelno, record.getMessage()) for record in caplog.records]
    # the documented rule: a warning the first time, then a quieter note each call, with its count
    assert [level for level, _ in said] == [logging.WARNING, logging.INFO]
    assert said[0][1].startswith("1 of 2 contexts do not fit") and "last tokens" in said[0][1]
    assert said[1][1].startswith("1 of 1 contexts")


# ---- the encoder ----

def test_encoder_scores_do_not_depend_on_the_batch(tiny_encoder, tokenizer):
    encoder = ContinuationEncoder(tiny_encoder, batch_size=2)
    contexts = ["[male] went to the store .", "the dog barked all night .", "a storm hit the town . " * 5]
    candidates = ["he bought milk .", "the neighbours complained loudly about it .", "the power went out ."]
    together = encoder.logits(contexts, candidates)
    alone = [encoder.logits([c], [n])[0] for c, n in zip(contexts, candidates)]
    assert together == pytest.approx(alone, abs=1e-5)
    assert encoder.logits([], []) == []
    with pytest.raises(ValueError, match="2 contexts but 1 candidates"):
        encoder.logits(contexts[:2], candidates[:1])
    ids, _, cut, contexts_cut = encode_pairs(tokenizer, contexts, candidates, WINDOW)
    assert cut == 0 and contexts_cut == 0 and all(len(i) <= WINDOW for i in ids)


def test_an_unknown_encoder_kind_or_folder_is_refused(tmp_path, tokenizer):
    with pytest.raises(FileNotFoundError, match="encoder_config.json"):
        ContinuationEncoder(tmp_path)
    with pytest.raises(ValueError, match="cross-encoder-v9.*upgrade"):
        ContinuationEncoder(save_tiny_encoder(tmp_path / "newer", tokenizer, kind="cross-encoder-v9"))


# ---- the feature group in the continuation model ----

def tiny_continuation_checkpoint(folder, encoder_folder=None, **config_fields):
    """A tiny continuation checkpoint, count-only or with the learned group (its encoder copied in)."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    lm = NgramLM(order=2).fit(CORPUS)
    stats = CooccurrenceStats(windows=(10, 25, 50), min_pair_count=1, min_word_count=1).fit(CORPUS)
    groups = list(FEATURE_GROUPS) + (["encoder"] if encoder_folder else [])
    torch.manual_seed(0)
    num_features = len(FeatureExtractor(lm=lm, cooccurrence=stats).names) + (1 if encoder_folder else 0)
    ContinuationModel(num_features=num_features, dim=8, hidden=8, buckets=64).save(folder)
    lm.save(folder / "lm.npz")
    stats.save(folder / "cooccurrence.npz")
    config = {"feature_groups": groups, "feature_version": 2, "criteria": list(CRITERIA)}
    if encoder_folder:
        config["learned_encoder"] = ENCODER_KIND
        shutil.copytree(encoder_folder, folder / "encoder")
    (folder / "scorer_config.json").write_text(json.dumps({**config, **config_fields}))
    return folder


def test_the_encoder_group_needs_an_encoder_and_comes_last():
    lm, stats = NgramLM(order=2).fit(CORPUS), CooccurrenceStats(windows=(10, 25, 50), min_pair_count=1, min_word_count=1).fit(CORPUS)
    with pytest.raises(ValueError, match="needs a trained ContinuationEncoder"):
        FeatureExtractor(lm=lm, cooccurrence=stats, groups=(*FEATURE_GROUPS, "encoder"))

    class Constant:
        def logits(self, contexts, candidates):
            return [0.25] * len(contexts)

    extractor = FeatureExtractor(lm=lm, cooccurrence=stats, groups=("encoder", *FEATURE_GROUPS), encoder=Constant())
    assert extractor.names[-1] == "encoder_logit"
    matrix = extractor([s.split() for s in ["he went home ."]], [s.split() for s in ["he slept ."]])
    count_only = FeatureExtractor(lm=lm, cooccurrence=stats)(["he went home .".split()], ["he slept .".split()])
    assert matrix[0, -1] == 0.25 and (matrix[:, :-1] == count_only).all()


def test_a_count_only_checkpoint_loads_no_encoder_and_scores_as_before(tmp_path, tiny_encoder):
    from storyeval.scoring.continuation import ContinuationScorer

    count_only = ContinuationScorer(tiny_continuation_checkpoint(tmp_path / "count"), device="cpu")
    assert count_only.extractor.encoder is None and "encoder_logit" not in count_only.extractor.names
    contexts, continuations = ["Ken went to the store.", "The dog barked."], ["He bought milk.", "A storm came."]
    before = count_only.score(contexts, continuations)
    # the same model weights scored by hand from the count-based features alone
    features = torch.from_numpy(count_only.extractor([textlib_normal(c).split() for c in contexts],
                                                     [textlib_normal(c).split() for c in continuations]))
    with torch.no_grad():
        by_hand = count_only.model([textlib_normal(c) for c in contexts], [textlib_normal(c) for c in continuations], features)
    assert before["overall"] == pytest.approx(by_hand[:, 0].tolist(), abs=1e-6)

    learned = ContinuationScorer(tiny_continuation_checkpoint(tmp_path / "learned", tiny_encoder), device="cpu")
    assert learned.extractor.encoder is not None and learned.extractor.names[-1] == "encoder_logit"
    scores = learned.score(contexts, continuations)
    assert set(scores) == set(CRITERIA) and all(len(v) == 2 for v in scores.values())


def textlib_normal(text):
    from storyeval.scoring.sequence import normalize_story

    return normalize_story(text)


@pytest.mark.parametrize("fields, message", [
    ({"learned_encoder": "cross-encoder-v9"}, "unknown to this storyeval.*upgrade"),
    ({"learned_encoder": None}, "'encoder' feature group but no learned_encoder"),
    ({"feature_groups": list(FEATURE_GROUPS)}, "but no 'encoder' feature group"),
])
def test_a_mismatched_or_unknown_learned_encoder_is_refused(tmp_path, tiny_encoder, fields, message):
    from storyeval.scoring.continuation import ContinuationScorer

    folder = tiny_continuation_checkpoint(tmp_path / "ckpt", tiny_encoder, **fields)
    with pytest.raises(ValueError, match=message):
        ContinuationScorer(folder)


@pytest.mark.parametrize("contexts, continuations, error, message", [
    (["b .", "c ."], ["a ."], ValueError, "same length"),
    ([""], ["a ."], ValueError, r"contexts\[0\] is empty"),
    (["b ."], [None], TypeError, r"predictions\[0\]"),
    (["b ."], [3], TypeError, r"predictions\[0\]"),
])
def test_bad_input_to_a_learned_checkpoint(tmp_path, tiny_encoder, contexts, continuations, error, message):
    from storyeval.scoring.continuation import ContinuationScorer

    scorer = ContinuationScorer(tiny_continuation_checkpoint(tmp_path / "learned", tiny_encoder), device="cpu")
    with pytest.raises(error, match=message):
        scorer.score(contexts, continuations)


# ---- training options ----

def test_head_training_with_an_encoder_needs_unseen_cloze_stories(tmp_path, tiny_encoder, capsys):
    from storyeval_training.recipes import train_continuation

    with pytest.raises(SystemExit):
        train_continuation.parse_args(["--output-dir", str(tmp_path / "run"), "--encoder", str(tiny_encoder)])
    assert "--cloze-split test" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_continuation.parse_args(["--output-dir", str(tmp_path / "run"), "--encoder", str(tmp_path), "--cloze-split", "test"])
    assert "no encoder_config.json" in capsys.readouterr().err
    args = train_continuation.parse_args(["--output-dir", str(tmp_path / "run"), "--encoder", str(tiny_encoder), "--cloze-split", "test"])
    assert args.encoder == str(tiny_encoder) and not (tmp_path / "run").exists()


def test_encoder_training_options_are_checked_before_anything_is_written(tmp_path, capsys):
    from storyeval_training.recipes.train_continuation_encoder import parse_args

    (tmp_path / "export").mkdir()
    for bad in (["--export-dir", str(tmp_path / "export")], ["--max-length", "0"], ["--max-eval-pairs", "-1"]):
        with pytest.raises(SystemExit):
            parse_args(["--output-dir", str(tmp_path / "run"), *bad])
    assert not (tmp_path / "run").exists()


def test_training_examples_carry_pair_inputs_and_float_labels(tokenizer):
    from storyeval_training.recipes.train_continuation_encoder import Collator, tokenise

    pairs = continuation_pairs.build_pairs(stories_dataset(), seed=1)
    examples = tokenise(pairs[:4], tokenizer, WINDOW)
    batch = Collator(tokenizer)([{k: examples[k][i] for k in examples} for i in range(4)])
    assert batch["labels"].shape == (4,) and batch["labels"].dtype == torch.float32
    assert batch["labels"].tolist() == [float(label) for label in pairs["label"][:4]]
    assert batch["input_ids"].shape == batch["token_type_ids"].shape and batch["input_ids"].shape[1] % 8 == 0


# ---- the pair layout of each backbone ----

def test_the_pair_layout_is_read_off_the_tokenizer(tokenizer):
    from storyeval.models.continuation.encoder import PairLayout

    layout = PairLayout.of(tokenizer)  # BERT (MiniLM): [CLS] a [SEP] b [SEP], token types 0 then 1
    assert (layout.before, layout.between, layout.after, layout.types) == (
        (tokenizer.cls_token_id,), (tokenizer.sep_token_id,), (tokenizer.sep_token_id,), (0, 1))
    ids, types, *_ = encode_pairs(tokenizer, ["he went home ."], ["he slept ."], WINDOW)
    assert ids[0] == tokenizer("he went home .", "he slept .")["input_ids"] and types[0] == tokenizer("he went home .", "he slept .")["token_type_ids"]


def test_mpnet_pairs_are_laid_out_as_mpnet_lays_them_out():
    from transformers import AutoTokenizer

    from storyeval.checkpoints.backbones import BASE_BACKBONE, BackboneNotFoundError, resolve_backbone
    from storyeval.models.continuation.encoder import PairLayout

    try:
        mpnet = AutoTokenizer.from_pretrained(resolve_backbone(BASE_BACKBONE))
    except BackboneNotFoundError as error:
        pytest.skip(str(error))
    layout = PairLayout.of(mpnet)  # <s> a </s></s> b </s>, and no token types
    assert layout.between == (mpnet.sep_token_id, mpnet.sep_token_id) and layout.types is None
    ids, types, cut, contexts_cut = encode_pairs(mpnet, ["he went home . " * 100], ["he slept ."], WINDOW)
    assert types is None and not cut and contexts_cut == 1 and len(ids[0]) == WINDOW and ids[0][0] == mpnet.cls_token_id
    assert ids[0][-4:] == mpnet("he slept .")["input_ids"][1:] and ids[0][-6:-4] == [mpnet.sep_token_id] * 2


# ---- model-generated negatives ----

AF_GROUPS = [
    ("Bob sat down. He ate lunch. He went home.", ["Bob sat down. He ate lunch. She flew to the moon.",
                                                  "Bob sat down. He ate lunch. The lunch ate him.",
                                                  "Bob sat down. He ate lunch. She flew to the moon."]),
    ("Amy sang. She won a prize.", ["Amy sang. She won a prize."]),  # departs nowhere: no group
    ("Tom ran. He fell.", ["Cars are red. He fell."]),  # shares nothing: no group
]


def test_generated_negatives_are_the_sentences_implausible_stories_depart_with():
    generated = continuation_pairs.generated_negatives(AF_GROUPS)
    assert len(generated) == 1
    (key, (context, true, negatives)), = generated.items()
    # normalised as the builders normalise (names delexicalised), duplicates once
    assert context == "[MALE] sat down . he ate lunch ." and true == "he went home ."
    assert negatives == ["she flew to the moon .", "the lunch ate him ."]
    assert key == continuation_pairs.story_key(["[male] sat down .", "he ate lunch .", "he went home ."])


def test_generated_groups_join_their_story_split_and_are_all_held_out():
    from storyeval_training.recipes.train_continuation_encoder import held_out_pairs

    stories = stories_dataset([["[MALE] sat down .", "he ate lunch .", "he went home ."], *STORIES[1:3]])
    pairs = continuation_pairs.add_generated_groups(continuation_pairs.build_pairs(stories, seed=1), stories,
                                                    continuation_pairs.generated_negatives(AF_GROUPS))
    generated = pairs.filter(lambda row: row["group"].endswith(continuation_pairs.GENERATED_GROUP_SUFFIX))
    assert generated["group"] == ["s0/generated"] * 3 and generated["kind"] == ["true", "generated", "generated"]
    assert generated["label"] == [1, 0, 0] and len(set(generated["context"])) == 1
    held_out = held_out_pairs(pairs, 2)
    assert held_out.filter(lambda row: row["kind"] == "generated").num_rows == 2  # every generated group, whatever the limit
    assert len({g for g in held_out["group"] if not g.endswith("/generated")}) == 1
    accuracy = continuation_pairs.pair_accuracy_by_kind(generated["group"], generated["kind"], [1.0, 0.0, 2.0])
    assert accuracy == {"generated": 0.5, "all": 0.5}


def test_encoder_training_refuses_to_select_on_negatives_it_leaves_out(tmp_path, capsys):
    from storyeval_training.recipes.train_continuation_encoder import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--output-dir", str(tmp_path / "run"), "--no-generated", "--select-by", "pair_accuracy_generated"])
    assert "needs the generated negatives" in capsys.readouterr().err
    assert parse_args(["--output-dir", str(tmp_path / "run"), "--no-generated"]).select_by == "pair_accuracy"
    assert parse_args(["--output-dir", str(tmp_path / "run")]).select_by == "pair_accuracy_generated"
    for bad, message in ((["--lora-rank", "2", "--train-top-layers", "1"], "not both"), (["--lora-alpha", "4"], "give --lora-rank too")):
        with pytest.raises(SystemExit):
            parse_args(["--output-dir", str(tmp_path / "run"), *bad])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


# ---- a base-size encoder ships its adapters only ----

def test_a_lora_encoder_exports_its_adapters_and_scores_as_trained(tmp_path):
    import argparse

    from safetensors.torch import load_file
    from test_base_tier import tiny_mpnet
    from transformers import AutoTokenizer

    from storyeval_training.recipes.train_continuation_encoder import export, new_model

    backbone = tiny_mpnet(tmp_path / "backbone")
    args = argparse.Namespace(max_length=32, train_top_layers=None, lora_rank=2, lora_alpha=None)
    model = new_model(args, str(backbone))
    assert model.config.metric == "continuation_quality" and not model.config.has_reconstruction_head
    with torch.no_grad():  # stand-in for training: move what training may move
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    model.eval().save_pretrained(tmp_path / "best")
    AutoTokenizer.from_pretrained(backbone).save_pretrained(tmp_path / "best")
    results = {"args": {"max_length": 32}, "best_validation": {"pair_accuracy_generated": 0.5}, "selected_by": "pair_accuracy_generated",
               "leakage_dropped_story_cloze_stories": {"train": 0}}
    export(tmp_path / "best", tmp_path / "export", 64, results, base_model=str(backbone))
    shipped = set(load_file(tmp_path / "export" / "model.safetensors"))
    assert shipped and all(".lora_" in name or name.startswith("classifier.") for name in shipped)
    encoder = ContinuationEncoder(tmp_path / "export")
    assert encoder.max_length == 64
    contexts, candidates = ["[male] went to the store .", "the dog barked ."], ["he bought milk .", "it slept ."]
    tokenizer = encoder.tokenizer
    ids, types, *_ = encode_pairs(tokenizer, contexts, candidates, 64)
    with torch.no_grad():
        expected = model(**pad(tokenizer, ids, types)).logits.tolist()
    assert encoder.logits(contexts, candidates) == pytest.approx(expected, abs=2e-2)  # fp16 adapters, merged on load


def test_the_learned_encoder_follows_computes_dtype_and_device(tmp_path, tiny_encoder):
    from storyeval.scoring.continuation import ContinuationScorer

    scorer = ContinuationScorer(tiny_continuation_checkpoint(tmp_path / "learned", tiny_encoder), device="cpu")
    contexts, continuations = ["Ken went to the store.", "The dog barked."], ["He bought milk.", "A storm came."]
    full = scorer.score(contexts, continuations)
    half = scorer.score(contexts, continuations, dtype="bfloat16", device="cpu")
    encoder = scorer.extractor.encoder
    assert {dtype for _, dtype in encoder._models} == {torch.float32, torch.bfloat16}
    assert encoder.model.dtype == torch.float32  # the loaded model is left as it was
    assert half["relevance"] == pytest.approx(full["relevance"], abs=0.1) and scorer.score(contexts, continuations) == full
