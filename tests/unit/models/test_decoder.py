"""The SQuAD decoder: causal and padding masks, and greedy decoding of a learnt continuation."""

import dataclasses

import pytest
import torch

from qkov_lib.models.decoder import DecoderConfig, decode, greedy, init_decoder, next_token_logits
from qkov_lib.train.optim import circuit_groups

CFG = DecoderConfig(vocab=12, max_len=10, d_model=16, n_heads=2, d_head=8, n_layers=2, d_mlp=32, init_scale=0.3)


def test_a_position_sees_only_itself_and_the_real_tokens_before_it():
    params = init_decoder(CFG, [0, 1])
    ids = torch.tensor([[3, 4, 5, 6, 0, 0], [7, 8, 0, 0, 0, 0]])
    hidden, attns = decode(params, CFG, ids)
    assert hidden.shape == (2, 2, 6, 16) and len(attns) == 2
    later = ids.clone()
    later[0, 3] = 9  # a later token changes nothing before it
    torch.testing.assert_close(decode(params, CFG, later)[0][:, 0, :3], hidden[:, 0, :3])
    shorter = ids[:, :4]  # padding after the tokens changes nothing
    torch.testing.assert_close(decode(params, CFG, shorter)[0][:, 1, :2], hidden[:, 1, :2])
    a = attns[0]
    assert torch.all(a.triu(1) == 0) and torch.all(a[:, 1, :, :, 2:] == 0)  # no future, no padding
    torch.testing.assert_close(a[:, 0, :, :4].sum(-1), torch.ones(2, 2, 4))
    assert next_token_logits(params, hidden, torch.tensor([[3], [1]])).shape == (2, 2, 1, 12)
    assert circuit_groups(params)["qk"] == ["blocks.0.W_Q", "blocks.0.W_K", "blocks.1.W_Q", "blocks.1.W_K"]


def test_greedy_decoding_continues_what_the_model_learnt_and_keeps_eos():
    torch.manual_seed(0)
    params = init_decoder(CFG, [0, 1])
    ids = torch.tensor([[3, 4, 5, 6, 2], [7, 8, 9, 2, 0]])  # prompts "3 4" and "7 8", answers "5 6" and "9", eos 2
    targets = torch.tensor([[5, 6, 2], [9, 2, 2]])
    rows = torch.tensor([[1, 2, 3], [1, 2, 2]])
    opt = torch.optim.Adam(params.values(), lr=0.03)
    for _ in range(150):
        logits = next_token_logits(params, decode(params, CFG, ids)[0], rows)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 2), targets.expand(2, -1, -1).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    out = greedy(params, CFG, torch.tensor([[3, 4], [7, 8]]), steps=4, eos=2)
    assert out.tolist() == [[[5, 6, 2, 2], [9, 2, 2, 2]]] * 2
    short = greedy(params, CFG, torch.tensor([[3, 4], [7, 0]]), steps=2, eos=2)
    assert (short != 0).all()  # never padding, even for an unlearnt prompt


def test_logits_over_allowed_tokens_are_the_vocabulary_logits_of_those_tokens():
    params = init_decoder(CFG, [0, 1])
    ids = torch.tensor([[3, 4, 5, 6, 0, 0], [7, 8, 0, 0, 0, 0]])
    hidden, _ = decode(params, CFG, ids)
    rows = torch.tensor([[3], [1]])
    allowed = torch.tensor([[3, 5, 0, 2], [8, 0, 7, 2]])
    full, some = next_token_logits(params, hidden, rows), next_token_logits(params, hidden, rows, allowed)
    assert some.shape == (2, 2, 1, 4)
    torch.testing.assert_close(some[:, 0, 0, [0, 1, 3]], full[:, 0, 0, [3, 5, 2]])
    torch.testing.assert_close(some[:, 1, 0, [0, 2, 3]], full[:, 1, 0, [8, 7, 2]])
    assert torch.isinf(some[:, 0, 0, 2]).all() and torch.isinf(some[:, 1, 0, 1]).all()
    out = greedy(params, CFG, ids, 3, eos=2, allowed=allowed)
    assert all(t in allowed[b].tolist() and t != 0 for s in range(2) for b in range(2) for t in out[s, b].tolist())


def test_the_authors_squad_start_draws_each_weight_within_its_xavier_bound():
    """``init = "xavier"`` (the official SQuAD profile): every weight but the token embedding uniform within
    gain sqrt(6 / (fan in + fan out)), gain 1/sqrt(2), the fans those of the authors' ``nn.Linear`` layers (torch's
    own fan rule on the full matrix) and of the position table; biases within nn.Linear's 1/sqrt(fan in); the
    token embedding normal(0, 0.02). ``normal`` keeps zero biases."""
    cfg = DecoderConfig(vocab=50, max_len=40, d_model=24, n_heads=3, d_head=8, n_layers=2, d_mlp=96, biases=True)
    xavier = init_decoder(dataclasses.replace(cfg, init="xavier"), [0])
    calc = torch.nn.init._calculate_fan_in_and_fan_out
    linear = {  # each parameter as the authors' layer holds it: (out, in) for a weight, (in,) for its bias' fan
        "W_Q": torch.empty(24, 24),
        "W_V": torch.empty(24, 24),
        "W_O": torch.empty(24, 24),
        "mlp_in": torch.empty(96, 24),
        "mlp_out": torch.empty(24, 96),
        "pos": torch.empty(40, 24),
    }
    for name, matrix in linear.items():
        fan_in, fan_out = calc(matrix)
        bound = 2**-0.5 * (6 / (fan_in + fan_out)) ** 0.5
        values = xavier[name if name == "pos" else f"blocks.1.{name}"].detach()
        assert values.abs().max() <= bound and values.abs().max() > 0.9 * bound, name
    for bias, fan_in in (("b_Q", 24), ("b_O", 24), ("b_in", 24), ("b_out", 96)):
        values = xavier[f"blocks.0.{bias}"].detach()
        assert 0 < values.abs().max() <= fan_in**-0.5, bias
    assert abs(float(xavier["embed"].detach().std()) - 0.02) < 0.003
    normal = init_decoder(cfg, [0])
    assert all(float(normal[k].detach().abs().max()) == 0 for k in normal if k.rsplit(".", 1)[-1].startswith("b_"))
    assert torch.equal(normal["embed"], xavier["embed"])  # the token embedding is drawn first, alike
    with pytest.raises(ValueError, match="init must be one of normal, xavier"):
        DecoderConfig(vocab=5, max_len=4, init="glorot")
