"""MPNet's fused attention path gives transformers' eager attention's outputs, and leaves training alone."""
import pytest
import torch
from transformers import MPNetConfig, MPNetModel
from transformers.models.mpnet.modeling_mpnet import MPNetSelfAttention

from storyeval.models import UnionModel
from storyeval.models.mpnet_attention import FusedMPNetSelfAttention, use_fused_attention


@pytest.fixture
def encoder():
    torch.manual_seed(0)
    config = MPNetConfig(vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=66)
    return MPNetModel(config, add_pooling_layer=False).eval()


def padded_batch():
    ids = torch.randint(5, 100, (3, 40))
    mask = torch.ones_like(ids)
    mask[1, 25:] = 0
    mask[2, 10:] = 0
    return ids, mask


def test_fused_attention_gives_eager_outputs(encoder):
    ids, mask = padded_batch()
    with torch.no_grad():
        eager = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        assert use_fused_attention(encoder) == 2
        fused = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.allclose(fused, eager, atol=1e-5)
    assert all(type(m) is FusedMPNetSelfAttention for m in encoder.modules() if isinstance(m, MPNetSelfAttention))


def test_fused_attention_in_bfloat16(encoder):
    ids, mask = padded_batch()
    with torch.no_grad():
        eager = encoder.to(torch.bfloat16)(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        use_fused_attention(encoder)
        fused = encoder(input_ids=ids, attention_mask=mask).last_hidden_state.float()
    assert torch.allclose(fused, eager, atol=0.1)


def test_switching_back_and_state_dict(encoder):
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    use_fused_attention(encoder)
    assert encoder.state_dict().keys() == before.keys()  # checkpoints save and load under MPNet's names
    assert use_fused_attention(encoder) == 0  # already fused
    assert use_fused_attention(encoder, fused=False) == 2
    assert all(type(m) is MPNetSelfAttention for m in encoder.modules() if isinstance(m, MPNetSelfAttention))


def test_training_with_dropout_keeps_the_eager_path(encoder):
    """Same seed, same dropout masks, same loss: training runs do not change with the fused path."""
    ids, mask = padded_batch()
    encoder.train()
    torch.manual_seed(1)
    eager = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    use_fused_attention(encoder)
    torch.manual_seed(1)
    fused = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.equal(fused, eager)


def test_attention_weights_still_returned(encoder):
    ids, mask = padded_batch()
    use_fused_attention(encoder)
    with torch.no_grad():
        out = encoder(input_ids=ids, attention_mask=mask, output_attentions=True)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (3, 2, 40, 40)


def test_union_models_on_mpnet_use_it(encoder, tmp_path):
    encoder.save_pretrained(tmp_path)
    model = UnionModel.from_encoder(str(tmp_path), max_length=32, recon_weight=0.0)
    assert any(isinstance(m, FusedMPNetSelfAttention) for m in model.modules())
