"""A learned continuation encoder: a cross-encoder reads (context, candidate next text) and gives a relevance logit.

It is UNION's architecture without the reconstruction head (:class:`storyeval.models.UnionModel`:
an encoder and a linear head on the first token) reading the pair in its backbone's own pair
layout, so it runs on the fast tier's MiniLM and on the base tier's MPNet alike, and a base-size
encoder trained through LoRA adapters or its top layers ships only those (a few MB) on top of a
backbone checked by hash. It is trained self-supervised on ROC stories (``python -m
storyeval_training.recipes.train_continuation_encoder``): a context with its true next sentence against
another story's, a later sentence of the same story, a perturbed true sentence and
model-generated implausible ones. The continuation model reads its logit as one more feature
(the ``encoder`` group of :mod:`storyeval.models.continuation.features`).

The window: the pair is read as the backbone lays a pair out (``[CLS] context [SEP] candidate
[SEP]`` in BERT, ``<s> context </s></s> candidate </s>`` in MPNet) within ``max_length`` tokens.
A context that does not fit is read over its LAST tokens, the ones nearest the candidate (a
warning the first time an encoder does so, a note at INFO level after). A candidate keeps at
least ``max_length`` minus room for :data:`CONTEXT_FLOOR` context tokens; a longer one is read
over its first tokens (those nearest the context), and a warning says how many were cut.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import json
import logging
from pathlib import Path

import torch

logger = logging.getLogger("storyeval.models.continuation.encoder")

# the scorer_config.json value naming this encoder: v2 is a UnionModel in its backbone's pair layout
# (v1, a BERT sequence classifier, never shipped)
ENCODER_KIND = "cross-encoder-v2"
ENCODER_FOLDER = "encoder"  # where a continuation checkpoint keeps it
ENCODER_CONFIG = "encoder_config.json"
CONTEXT_FLOOR = 32  # context tokens a long candidate always leaves room for


@dataclasses.dataclass(frozen=True)
class PairLayout:
    """Where a tokenizer puts its special tokens around a pair, and the token types of each part.

    Read off the tokenizer by encoding a pair of known words rather than written per architecture:
    transformers 5's tokenizers no longer expose ``build_inputs_with_special_tokens``, and
    ``truncation="only_first"`` would silently give up on a candidate longer than the window.
    """

    before: tuple[int, ...]
    between: tuple[int, ...]
    after: tuple[int, ...]
    # token types of (before + context + between) and (candidate + after); None where the model takes none
    types: tuple[int, int] | None

    @classmethod
    def of(cls, tokenizer) -> "PairLayout":
        first = tokenizer("first", add_special_tokens=False)["input_ids"]
        second = tokenizer("second", add_special_tokens=False)["input_ids"]
        pair = tokenizer("first", "second")
        ids = list(pair["input_ids"])
        start = _find(ids, first, 0)
        middle = _find(ids, second, start + len(first))
        types = pair.get("token_type_ids")
        return cls(before=tuple(ids[:start]), between=tuple(ids[start + len(first) : middle]),
                   after=tuple(ids[middle + len(second) :]),
                   types=(types[start], types[middle]) if types is not None and "token_type_ids" in tokenizer.model_input_names else None)

    @property
    def special_tokens(self) -> int:
        return len(self.before) + len(self.between) + len(self.after)


def _find(ids: list[int], part: list[int], begin: int) -> int:
    for i in range(begin, len(ids) - len(part) + 1):
        if ids[i : i + len(part)] == part:
            return i
    raise ValueError("the tokenizer's pair encoding does not contain its two texts; cannot read its pair layout")


@functools.lru_cache(maxsize=8)
def _layout(tokenizer) -> PairLayout:
    return PairLayout.of(tokenizer)


def pair_ids(tokenizer, context_ids: list[int], candidate_ids: list[int], max_length: int) -> tuple[list[int], list[int] | None, bool, bool]:
    """(input ids, token type ids or None, whether the candidate was cut, whether the context was read over its last
    tokens) for one pair in ``max_length`` tokens."""
    layout = _layout(tokenizer)
    room = max_length - layout.special_tokens
    if room < 1 + CONTEXT_FLOOR:
        raise ValueError(f"max_length {max_length} leaves no room for a pair (at least {CONTEXT_FLOOR + 1 + layout.special_tokens} tokens)")
    candidate_room = room - min(len(context_ids), CONTEXT_FLOOR)
    cut = len(candidate_ids) > candidate_room
    candidate_ids = candidate_ids[:candidate_room]
    context_cut = len(context_ids) + len(candidate_ids) > room
    context_ids = context_ids[len(context_ids) - (room - len(candidate_ids)):] if context_cut else context_ids
    ids = [*layout.before, *context_ids, *layout.between, *candidate_ids, *layout.after]
    if layout.types is None:
        return ids, None, cut, context_cut
    first = len(layout.before) + len(context_ids) + len(layout.between)
    return ids, [layout.types[0]] * first + [layout.types[1]] * (len(ids) - first), cut, context_cut


def encode_pairs(tokenizer, contexts: list[str], candidates: list[str], max_length: int) -> tuple[list[list[int]], list[list[int]] | None, int, int]:
    """Input ids and token type ids (None where the backbone takes none) of each pair, how many candidates were cut to
    fit and how many contexts were read over their last tokens."""
    if not contexts:  # the fast tokenizer fails on an empty batch
        return [], None, 0, 0
    context_ids = tokenizer(list(contexts), add_special_tokens=False)["input_ids"]
    candidate_ids = tokenizer(list(candidates), add_special_tokens=False)["input_ids"]
    ids, types, cut, contexts_cut = [], [], 0, 0
    for context, candidate in zip(context_ids, candidate_ids):
        pair, pair_types, was_cut, context_was_cut = pair_ids(tokenizer, context, candidate, max_length)
        ids.append(pair)
        types.append(pair_types)
        cut += was_cut
        contexts_cut += context_was_cut
    return ids, (None if types[0] is None else types), cut, contexts_cut


def pad(tokenizer, ids: list[list[int]], types: list[list[int]] | None) -> dict[str, torch.Tensor]:
    features = {"input_ids": ids} if types is None else {"input_ids": ids, "token_type_ids": types}
    return tokenizer.pad(features, return_tensors="pt", pad_to_multiple_of=8)


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
        self._told_of_long_contexts = False
        # imported here: a count-only checkpoint never needs transformers
        from transformers import AutoTokenizer

        from storyeval.models import UnionModel

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        # fp16 on disk; float32 on the CPU. One that ships only its adapters or top layers loads onto its backbone
        self.model = UnionModel.from_pretrained(folder, dtype=torch.float32).to(device).eval()
        self._models = {(self.model.device, torch.float32): self.model}

    def model_in(self, dtype: torch.dtype, device: torch.device):
        """The model in ``dtype`` on ``device``: a copy, made on first use, where it is not how it loaded
        (one caller's device or dtype must not change another's model)."""
        key = (torch.device(device), dtype)
        if key not in self._models:
            with torch.inference_mode(False):
                self._models[key] = copy.deepcopy(self.model).to(device=device, dtype=dtype)
        return self._models[key]

    @torch.inference_mode()
    def logits(self, contexts: list[str], candidates: list[str], device=None, dtype: torch.dtype | None = None) -> list[float]:
        """One logit per (context, candidate), by the model on ``device`` in ``dtype`` (default: as it loaded)."""
        if len(contexts) != len(candidates):
            raise ValueError(f"{len(contexts)} contexts but {len(candidates)} candidates")
        model = self.model_in(dtype or torch.float32, device if device is not None else self.model.device)
        ids, types, cut, contexts_cut = encode_pairs(self.tokenizer, contexts, candidates, self.max_length)
        if cut:
            logger.warning("%d of %d continuations are longer than the encoder's %d-token window: it reads their first tokens",
                           cut, len(candidates), self.max_length)
        if contexts_cut:  # the documented rule, not a fault: said loudly once per encoder, then quietly
            log = logger.info if self._told_of_long_contexts else logger.warning
            log("%d of %d contexts do not fit the encoder's %d-token window beside their continuation: its logit reads their "
                "last tokens (the counted features read all of them)", contexts_cut, len(contexts), self.max_length)
            self._told_of_long_contexts = True
        device = model.device
        # longest first within the call, so batches pad little; the order is restored below
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        scores = [0.0] * len(ids)
        for begin in range(0, len(order), self.batch_size):
            chunk = order[begin : begin + self.batch_size]
            chunk_types = None if types is None else [types[i] for i in chunk]
            batch = {k: v.to(device) for k, v in pad(self.tokenizer, [ids[i] for i in chunk], chunk_types).items()}
            for i, logit in zip(chunk, model(**batch).logits.float().tolist()):
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
