"""Generated ids back to text in the corpora's tokenised format."""
from __future__ import annotations

import re

from transformers import PreTrainedTokenizerBase

_PLACEHOLDER = re.compile(r"\[ (male|female|neutral) \]")
_SPLIT_CONTRACTION = re.compile(r" ' (s|m|d|ll|re|ve)\b")
_SPLIT_NT = re.compile(r" n ' t\b")
_SPLIT_HYPHEN = re.compile(r"(\w) - (?=\w)")
_SPLIT_NUMBER = re.compile(r"(\d) ([:,./]) (?=\d)")


def decode_story(tokenizer: PreTrainedTokenizerBase, ids) -> str:
    """Generated ids as text in the corpora's format ("did n't", "[MALE]", "store .").

    Uncased WordPiece decoding glues punctuation ("store.") and splits the
    placeholders and contractions ("[ male ]", "n ' t"): the filter and the
    plausibility classifier would learn that format instead of plausibility.
    Re-spacing the word pieces ourselves gives back the Treebank format for
    all but a few rare tokens; other tokenizers decode as trained.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or type(backend.decoder).__name__ != "WordPiece":
        return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False).strip()
    special = set(tokenizer.all_special_ids)
    pieces = tokenizer.convert_ids_to_tokens([i for i in ids if i not in special])
    text = " ".join(pieces).replace(" ##", "").removeprefix("##")
    text = _PLACEHOLDER.sub(lambda m: f"[{m.group(1).upper()}]", text)
    text = _SPLIT_NT.sub(" n't", text)
    text = _SPLIT_CONTRACTION.sub(r" '\1", text)
    text = _SPLIT_HYPHEN.sub(r"\1-", text)
    text = _SPLIT_NUMBER.sub(r"\1\2", text)
    return text.replace("` `", "``").replace("' '", "''").strip()
