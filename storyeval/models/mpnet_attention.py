"""MPNet's self-attention through torch's fused ``scaled_dot_product_attention``.

transformers' MPNet (5.24) has only an eager attention: it materialises the score matrix, adds the relative
position bias and the padding mask, and runs a separate softmax, where BERT goes through torch's fused kernel.
On WP-length stories that left the base tier at 0.83x of a BERT-base-sized scorer's speed; the fused path
below brings it to 0.93x (benchmarks/experiments/speed.md). It computes the same attention at inference (the
bias and the mask are the kernel's additive mask); training with dropout, and a call that asks for the
attention weights, keep transformers' own code, so training runs are unchanged to the bit.
"""
from __future__ import annotations

import torch
from transformers.models.mpnet.modeling_mpnet import MPNetSelfAttention


class FusedMPNetSelfAttention(MPNetSelfAttention):
    """:class:`MPNetSelfAttention` with the same weights; the forward pass uses the fused kernel when it can."""

    def forward(self, hidden_states, attention_mask=None, position_bias=None, output_attentions=False, **kwargs):
        if output_attentions or (self.training and self.dropout.p > 0):
            return super().forward(hidden_states, attention_mask, position_bias, output_attentions, **kwargs)
        heads = (*hidden_states.shape[:-1], -1, self.attention_head_size)
        q, k, v = (layer(hidden_states).view(heads).transpose(1, 2) for layer in (self.q, self.k, self.v))
        bias = position_bias
        if attention_mask is not None:
            bias = attention_mask if bias is None else bias + attention_mask
        # the kernel's default scale is 1 / sqrt(head size), as the eager code divides by
        context = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        context = context.transpose(1, 2).reshape(*hidden_states.shape[:-1], self.all_head_size)
        return (self.o(context),)


def use_fused_attention(encoder: torch.nn.Module, fused: bool = True) -> int:
    """Switch every MPNet self-attention module of ``encoder`` to the fused path (or back, ``fused=False``);
    returns how many were switched. Any other architecture is left as it is (0).

    The switch changes the modules' class and nothing else: the parameters, their names and the state dict
    stay MPNet's, so checkpoints load and save as before.
    """
    target = FusedMPNetSelfAttention if fused else MPNetSelfAttention
    switched = 0
    for module in encoder.modules():
        if isinstance(module, MPNetSelfAttention) and type(module) is not target:
            module.__class__ = target
            switched += 1
    return switched
