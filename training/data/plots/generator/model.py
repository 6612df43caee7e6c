"""The plot -> story generator's model: the plot's text form, building and saving a generator, its length limits."""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    EncoderDecoderModel,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from storyeval.checkpoints.resolution import OFFLINE_BACKBONE, backbone_path

logger = logging.getLogger(__name__)

SENTENCE_MARKER = "#"
PHRASE_SEPARATOR = ";"
# the paper's generation lengths, in tokens; a checkpoint stores its own in generation_config
MAX_NEW_TOKENS = {"roc": 200, "wp": 1024}
MAX_SOURCE_LENGTH = {"roc": 128, "wp": 512}
TOP_K = 50
TEMPERATURE = 0.8
# written next to a trained generator: its data settings and the stories it was trained on
GENERATOR_INFO = "plot_generator.json"


def plot_to_text(plot: list[list[str]]) -> str:
    """[["kw1", "kw2"], ["kw3"]] -> "kw1 ; kw2 # kw3" (empty sentences keep their marker)."""
    sentences = [f" {PHRASE_SEPARATOR} ".join(p.strip() for p in phrases if p.strip()) for phrases in plot]
    return re.sub(r"\s+", " ", f" {SENTENCE_MARKER} ".join(sentences)).strip()


def has_phrases(plot: list[list[str]]) -> bool:
    """Whether any sentence of ``plot`` holds a non-blank phrase to generate from."""
    return any(phrase.strip() for phrases in plot for phrase in phrases)


def source_token_lengths(tokenizer: PreTrainedTokenizerBase, sources: list[str]) -> list[int]:
    """Tokens per ``plot_to_text`` source, special tokens included, untruncated."""
    return [len(ids) for ids in tokenizer(sources, verbose=False)["input_ids"]]


def build_generator(model_name_or_path: str = OFFLINE_BACKBONE) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A seq2seq model and its tokenizer.

    A seq2seq checkpoint (BART, T5, a saved generator) loads as it is; an
    encoder-only one becomes an ``EncoderDecoderModel`` whose decoder is the same
    checkpoint as a causal LM with new, randomly initialised cross-attention.
    """
    path = backbone_path(model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if AutoConfig.from_pretrained(path).is_encoder_decoder:
        return AutoModelForSeq2SeqLM.from_pretrained(path), tokenizer
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(path, path)
    # BERT-style vocabularies have no BOS/EOS: [CLS] starts the story and [SEP] ends it
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    end = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if None in (start, end, tokenizer.pad_token_id):
        raise ValueError(f"{path}: the tokenizer needs start ([CLS]/BOS), end ([SEP]/EOS) and pad tokens")
    model.config.decoder_start_token_id = start
    model.config.pad_token_id = tokenizer.pad_token_id
    model.config.eos_token_id = end
    model.config.vocab_size = model.config.decoder.vocab_size
    # generate() reads the generation config, not the model config
    generation = model.generation_config
    generation.decoder_start_token_id = generation.bos_token_id = start
    generation.eos_token_id = end
    generation.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def decoder_length_limit(model: PreTrainedModel) -> int | None:
    """Longest target the decoder's position embeddings allow (None: no limit)."""
    return getattr(model.get_decoder().config, "max_position_embeddings", None)


def encoder_length_limit(model: PreTrainedModel) -> int | None:
    return getattr(model.get_encoder().config, "max_position_embeddings", None)


def clamp(requested: int, limit: int | None, what: str) -> int:
    if limit is not None and requested > limit:
        logger.warning("%s %d exceeds the model's %d positions: using %d", what, requested, limit, limit)
        return limit
    return requested


def save_generator(model: PreTrainedModel, tokenizer, folder: Path, info: dict) -> None:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / GENERATOR_INFO).write_text(json.dumps(info) + "\n")
