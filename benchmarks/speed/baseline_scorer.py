"""The speed baseline the base tier is held to: BERT-base's shape with random weights, on our own scoring code.

Random weights are enough: speed depends on the shapes, not the values, and no BERT-base checkpoint is on
the project's offline machines. Kept import-light, as the speed benchmark's fresh child processes import it.
"""


def bert_base_sized_scorer(tokenizer, device: str = "cpu"):
    """A ``SequenceScorer`` over a BERT-base-sized ``UnionModel`` (seeded, so every run builds the same one)."""
    import torch
    from transformers import BertConfig

    from storyeval.models import UnionConfig, UnionModel
    from storyeval.scoring.sequence import SequenceScorer

    torch.manual_seed(0)
    model = UnionModel(UnionConfig(encoder=BertConfig().to_dict(), has_reconstruction_head=False))
    return SequenceScorer(model, tokenizer, 512, 256, device)
