"""The classifier's causal mask (``ClassifierConfig.causal``, the authors' HateXplain model): no effect with one
layer, and below the top layer no position reads a later one."""

import torch

from qkov_lib.models.transformer import ClassifierConfig, classify, init_classifier


def model(n_layers: int, causal: bool) -> tuple[ClassifierConfig, dict[str, torch.Tensor]]:
    cfg = ClassifierConfig(vocab=20, n_classes=3, max_len=12, n_layers=n_layers, d_model=16, d_head=8, causal=causal)
    return cfg, init_classifier(cfg, [0, 1])


IDS = torch.tensor([[3, 5, 7, 9, 2, 0, 0, 0], [4, 4, 6, 8, 11, 13, 2, 0]])  # words, the read-out token, padding


def test_one_layer_computes_the_same_with_or_without_it():
    """The read-out row sees every real position either way (padding trails it)."""
    cfg, params = model(1, causal=False)
    causal = ClassifierConfig(**{**cfg.__dict__, "causal": True})
    logits, attns = classify(params, cfg, IDS)
    again, attns_causal = classify(params, causal, IDS)
    assert torch.equal(logits, again) and torch.equal(attns[0], attns_causal[0])


def test_below_the_top_layer_no_position_reads_a_later_one():
    cfg, params = model(2, causal=True)
    _, attns = classify(params, cfg, IDS)
    below = attns[0]  # [S, B, H, T, T]: queries by keys
    later = torch.ones(IDS.shape[-1], IDS.shape[-1], dtype=torch.bool).triu(1)
    assert (below[..., later] == 0).all()
    assert torch.allclose(below.sum(-1)[..., :5], torch.ones(()))  # each real query's row still sums to 1
    changed = IDS.clone()
    changed[:, 3] = 1  # a later word changes no earlier position of the lower layer
    _, attns_changed = classify(params, cfg, changed)
    assert torch.equal(attns_changed[0][..., :3, :], below[..., :3, :])
    plain, _ = classify(params, ClassifierConfig(**{**cfg.__dict__, "causal": False}), IDS)
    assert not torch.equal(plain, classify(params, cfg, IDS)[0])  # with two layers, the mask matters
