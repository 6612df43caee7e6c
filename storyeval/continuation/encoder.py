"""A learned continuation encoder: a cross-encoder reads (context, candidate next text) and gives a relevance logit.

It is a MiniLM sequence classifier with one output, trained self-supervised on ROC
stories (``python -m storyeval_training.train_continuation_encoder``): a context
with its true next sentence against another story's, a later sentence of the same
story and a perturbed true sentence. The continuation model reads its logit as one
more feature (the ``encoder`` group of :mod:`storyeval.continuation.features`).

The window: the pair is read as ``[CLS] context [SEP] candidate [SEP]`` within
``max_length`` tokens. A context that does not fit is read over its LAST tokens,
the ones nearest the candidate. A candidate keeps at least ``max_length`` minus
room for :data:`CONTEXT_FLOOR` context tokens; a longer one is read over its first
tokens (those nearest the context), and a warning says how many were cut.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

logger = logging.getLogger("storyeval.continuation.encoder")

ENCODER_KIND = "cross-encoder-v1"  # the scorer_config.json value naming this encoder (and its input layout)
ENCODER_FOLDER = "encoder"  # where a continuation checkpoint keeps it
ENCODER_CONFIG = "encoder_config.json"
CONTEXT_FLOOR = 32  # context tokens a long candidate always leaves room for


def pair_ids(tokenizer, context_ids: list[int], candidate_ids: list[int], max_length: int) -> tuple[list[int], list[int], bool]:
    """(input ids, token type ids, whether the candidate was cut) for one pair in ``max_length`` tokens.

    Built by hand: transformers 5's tokenizers no longer expose ``build_inputs_with_special_tokens``,
    and ``truncation="only_first"`` would silently give up on a candidate longer than the window.
    """
    room = max_length - 3  # [CLS], [SEP], [SEP]
    if room < 1 + CONTEXT_FLOOR:
        raise ValueError(f"max_length {max_length} leaves no room for a pair (at least {CONTEXT_FLOOR + 4} tokens)")
    candidate_room = room - min(len(context_ids), CONTEXT_FLOOR)
    cut = len(candidate_ids) > candidate_room
    candidate_ids = candidate_ids[:candidate_room]
    context_ids = context_ids[len(context_ids) - (room - len(candidate_ids)):] if len(context_ids) + len(candidate_ids) > room else context_ids
    ids = [tokenizer.cls_token_id, *context_ids, tokenizer.sep_token_id, *candidate_ids, tokenizer.sep_token_id]
    types = [0] * (len(context_ids) + 2) + [1] * (len(candidate_ids) + 1)
    return ids, types, cut


def encode_pairs(tokenizer, contexts: list[str], candidates: list[str], max_length: int) -> tuple[list[list[int]], list[list[int]], int]:
    """Input ids and token type ids of each pair, and how many candidates were cut to fit."""
    if not contexts:  # the fast tokenizer fails on an empty batch
        return [], [], 0
    context_ids = tokenizer(list(contexts), add_special_tokens=False)["input_ids"]
    candidate_ids = tokenizer(list(candidates), add_special_tokens=False)["input_ids"]
    ids, types, cut = [], [], 0
    for context, candidate in zip(context_ids, candidate_ids):
        pair, pair_types, was_cut = pair_ids(tokenizer, context, candidate, max_length)
        ids.append(pair)
        types.append(pair_types)
        cut += was_cut
    return ids, types, cut


def pad(tokenizer, ids: list[list[int]], types: list[list[int]]) -> dict[str, torch.Tensor]:
    return tokenizer.pad({"input_ids": ids, "token_type_ids": types}, return_tensors="pt", pad_to_multiple_of=8)


class ContinuationEncoder:
    """Loads a trained cross-encoder folder once; :meth:`logits` scores (context, candidate) pairs."""

    def __init__(self, folder, device: str | torch.device = "cpu", batch_size: int = 64):
        folder = Path(folder)
        config_path = folder / ENCODER_CONFIG
        if not config_path.is_file():
            raise FileNotFoundError(f"{folder}: no {ENCODER_CONFIG}; not a continuation encoder folder")
        self.config = json.loads(config_path.read_text())
        if self.config.get("kind") != ENCODER_KIND:
            raise ValueError(f"{folder}: encoder kind {self.config.get('kind')!r}; this storyeval reads {ENCODER_KIND!r}: upgrade it")
        self.max_length = int(self.config["max_length"])
        self.batch_size = batch_size
        # imported here: a count-only checkpoint never needs transformers
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        # fp16 on disk; float32 on the CPU
        self.model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).to(device).eval()

    @torch.inference_mode()
    def logits(self, contexts: list[str], candidates: list[str]) -> list[float]:
        if len(contexts) != len(candidates):
            raise ValueError(f"{len(contexts)} contexts but {len(candidates)} candidates")
        ids, types, cut = encode_pairs(self.tokenizer, contexts, candidates, self.max_length)
        if cut:
            logger.warning("%d of %d continuations are longer than the encoder's %d-token window: it reads their first tokens",
                           cut, len(candidates), self.max_length)
        device = next(self.model.parameters()).device
        # longest first within the call, so batches pad little; the order is restored below
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        scores = [0.0] * len(ids)
        for begin in range(0, len(order), self.batch_size):
            chunk = order[begin : begin + self.batch_size]
            batch = {k: v.to(device) for k, v in pad(self.tokenizer, [ids[i] for i in chunk], [types[i] for i in chunk]).items()}
            for i, logit in zip(chunk, self.model(**batch).logits[:, 0].float().tolist()):
                scores[i] = logit
        return scores


def save_encoder_config(folder, max_length: int, **record) -> None:
    Path(folder, ENCODER_CONFIG).write_text(json.dumps({"kind": ENCODER_KIND, "max_length": max_length, **record}, indent=2) + "\n")


def load_learned_encoder(folder, config: dict, device) -> ContinuationEncoder | None:
    """A checkpoint's learned encoder, named by the ``learned_encoder`` field of its ``scorer_config.json``
    and kept in its ``encoder/`` folder; None for a count-only checkpoint (no such field)."""
    kind = config.get("learned_encoder")
    in_groups = "encoder" in config.get("feature_groups", ())
    if kind is None:
        if in_groups:
            raise ValueError(f"{folder}: the 'encoder' feature group but no learned_encoder in scorer_config.json")
        return None
    if kind != ENCODER_KIND:
        raise ValueError(f"{folder}: learned_encoder {kind!r} is unknown to this storyeval (it reads {ENCODER_KIND!r}): upgrade it")
    if not in_groups:
        raise ValueError(f"{folder}: learned_encoder {kind!r} but no 'encoder' feature group in scorer_config.json")
    return ContinuationEncoder(Path(folder) / ENCODER_FOLDER, device=device)
