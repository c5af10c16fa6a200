"""Eq. (1) in four parameterisations, learning-rate groups, batched training and DTAP metrics."""

import numpy as np
import pytest
import torch

from qkov_lib.metrics import attention_summary, check_bins, dtap_histogram
from qkov_lib.models import PARAMETERISATIONS, AttentionConfig, forward, init_params
from qkov_lib.models.reference import literal_forward
from qkov_lib.train.optim import RateSchedule, circuit_groups

TOKENS = torch.randint(0, 58, (2, 6, 64), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("par", PARAMETERISATIONS)
@pytest.mark.parametrize("d_model, self_attend", [(None, True), (None, False), (12, True)])
def test_forward_matches_literal_eq1(par, d_model, self_attend):
    cfg = AttentionConfig(par, vocab=58, d_model=d_model, init_scale=1.0, attend_to_query=self_attend, score_scale=0.5)
    params = init_params(cfg, [5, 6])
    logits, attn = forward(params, cfg, TOKENS)
    for s in range(2):
        ref_logits, ref_attn = literal_forward({k: v[s] for k, v in params.items()}, cfg, TOKENS[s])
        assert torch.allclose(logits[s], ref_logits, atol=1e-5) and torch.allclose(attn[s], ref_attn, atol=1e-6)
    if not self_attend:
        assert torch.all(attn[:, :, -1] == 0)


def test_collapsed_equals_factorised_when_matrix_is_the_product():
    cfgs = {p: AttentionConfig(p, vocab=58, init_scale=1.0) for p in PARAMETERISATIONS}
    params = {p: init_params(c, [11]) for p, c in cfgs.items()}  # same seed: collapsed = product of the pair
    fafo = params["FAFO"]
    assert torch.allclose(params["CACO"]["W_QK"], fafo["W_K"] @ fafo["W_Q"].transpose(1, 2), atol=1e-6)
    outs = [forward(params[p], cfgs[p], TOKENS[:1])[0] for p in PARAMETERISATIONS]
    for out in outs[1:]:
        assert torch.allclose(out, outs[0], atol=1e-5)


def test_balanced_initialisation():
    p = init_params(AttentionConfig("FAFO", vocab=20, init_scale=0.3), [1])
    w_q, w_k, w_o, w_v = (p[k][0] for k in ("W_Q", "W_K", "W_O", "W_V"))
    assert torch.allclose(w_q.T @ w_q, w_k.T @ w_k, atol=1e-6)
    assert torch.allclose(w_o.T @ w_o, w_v @ w_v.T, atol=1e-6)
    ident = init_params(AttentionConfig("FAFO", vocab=20, init="identity", init_scale=1e-3), [1])
    assert torch.equal(ident["W_K"][0], 1e-3 * torch.eye(20))


@pytest.mark.parametrize("par", PARAMETERISATIONS)
def test_pytorch_default_initialisation(par):
    """Every matrix, factor or collapsed, as nn.Linear's default weight: U(+-1/sqrt(fan_in)), independent entries."""
    p = init_params(AttentionConfig(par, vocab=50, n_out=40, init="pytorch", init_scale=1.0), [3])
    for name, w in p.items():
        w = w[0].detach()
        bound = 1 / w.shape[1] ** 0.5
        assert w.abs().max() <= bound and w.abs().max() > 0.95 * bound, name
        assert abs(w.mean()) < 0.05 * bound and abs(w.std() - bound / 3**0.5) < 0.05 * bound, name
    again = init_params(AttentionConfig(par, vocab=50, n_out=40, init="pytorch", init_scale=1.0), [3])
    assert all(torch.equal(p[k], again[k]) for k in p)  # seeded
    with pytest.raises(ValueError, match="unknown init 'default'; allowed: balanced, identity, pytorch"):
        AttentionConfig(par, init="default")


def test_every_parameter_in_exactly_one_group():
    names = ["W_Q", "W_K", "W_QK", "W_O", "W_V", "W_OV", "E"]
    groups = circuit_groups(names)
    assert groups == {"qk": ["W_Q", "W_K", "W_QK"], "ov": ["W_O", "W_V", "W_OV"], "other": ["E"]}
    assert sorted(n for g in groups.values() for n in g) == sorted(names)


def test_multipliers_and_ramps():
    const = RateSchedule(lr=0.1, qk_mult=10)
    assert const.rate("qk", 0) == pytest.approx(1.0) and const.rate("ov", 5) == pytest.approx(0.1)
    ramp = RateSchedule(lr=0.1, qk_mult=20, qk_schedule="ramp", ramp_steps=100)
    assert ramp.rate("qk", 0) == pytest.approx(0.1) and ramp.rate("qk", 50) == pytest.approx(1.05)
    assert ramp.rate("qk", 100) == pytest.approx(2.0) and ramp.rate("qk", 10_000) == pytest.approx(2.0)
    assert RateSchedule(lr=0.1, ov_mult=0.5).rate("ov", 3) == pytest.approx(0.05)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(qk_mult=0.0), "qk_mult must be a finite number > 0"),
        (dict(qk_mult=-2.0), "qk_mult"),
        (dict(lr=0.0), "lr must be"),
        (dict(qk_schedule="cosine"), "qk_schedule must be one of"),
    ],
)
def test_bad_schedules(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RateSchedule(**kwargs)


def test_unknown_parameterisation():
    with pytest.raises(ValueError, match="unknown parameterisation 'FFFF'; allowed: FAFO, FACO, CAFO, CACO"):
        AttentionConfig("FFFF")


def test_dtap_on_hand_made_inputs():
    attention = np.array([0.1, 0.9, 1.0, 0.5, 0.45])
    prob = np.array([0.95, 0.95, 0.1, 0.5, 1.0])
    h = dtap_histogram(attention, prob, [0, 0.5, 1], [0, 0.5, 1])
    # rows: probability [0, .5), [.5, 1]; columns: attention [0, .5), [.5, 1]
    assert h.tolist() == [[0.0, 20.0], [40.0, 40.0]]
    assert dtap_histogram(attention, prob).sum() == pytest.approx(100)
    s = attention_summary(attention, prob, np.array([1, 1, 0, 0, 1]))
    assert s["AC"] == pytest.approx(40) and s["ACMC"] == pytest.approx(20) and s["MRTA"] == pytest.approx(59.0)
    assert s["top_left"] == pytest.approx(40) and s["top_right_cell"] == pytest.approx(20)
    assert s["accuracy"] == pytest.approx(60)


@pytest.mark.parametrize(
    "edges, message",
    [
        ([0, 0.5, 1.2], r"must lie in \[0, 1\]"),
        ([-0.1, 1], r"\[0, 1\]"),
        ([0, 0.6, 0.4, 1], "strictly increasing"),
        ([0.5], "at least two"),
    ],
)
def test_bad_bins(edges, message):
    with pytest.raises(ValueError, match=message):
        check_bins(edges)


def test_a_collapsed_circuit_starts_as_the_product_or_as_one_factor():
    """``collapsed_init``: the product of the factor pair (sigma^2 I for the identity init: the same function as the
    factorised model), or one factor's sigma I (the authors' notebooks)."""
    for name, parameterisation in (("W_OV", "FACO"), ("W_QK", "CAFO")):
        product = init_params(AttentionConfig(parameterisation, vocab=10, init="identity", init_scale=1e-6), [0])
        factor = init_params(
            AttentionConfig(parameterisation, vocab=10, init="identity", init_scale=1e-6, collapsed_init="factor"), [0]
        )
        assert torch.allclose(product[name][0], 1e-12 * torch.eye(10)) and torch.allclose(
            factor[name][0], 1e-6 * torch.eye(10)
        )
    with pytest.raises(ValueError, match="unknown collapsed_init 'sum'"):
        AttentionConfig("CACO", collapsed_init="sum")
