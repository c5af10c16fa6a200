"""Eq. (1) in four parameterisations, learning-rate groups, batched training and DTAP metrics."""
import numpy as np
import pytest
import torch

from qkov_lib.data.synthetic import SyntheticConfig, make_splits, stack_splits
from qkov_lib.metrics import attention_summary, check_bins, dtap_histogram
from qkov_lib.models import PARAMETERISATIONS, AttentionConfig, forward, init_params
from qkov_lib.models.reference import literal_forward
from qkov_lib.optim import RateSchedule, circuit_groups
from qkov_lib.training import FixedSetBatches, TrainConfig, attention_loss, evaluate, train

TOKENS = torch.randint(0, 58, (2, 6, 64), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("par", PARAMETERISATIONS)
@pytest.mark.parametrize("d_model, self_attend", [(None, True), (None, False), (12, True)])
def test_forward_matches_literal_eq1(par, d_model, self_attend):
    cfg = AttentionConfig(par, vocab=58, d_model=d_model, init_scale=1.0, attend_to_query=self_attend,
                          score_scale=0.5)
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


@pytest.mark.parametrize("kwargs, message", [(dict(qk_mult=0.0), "qk_mult must be a finite number > 0"),
                                             (dict(qk_mult=-2.0), "qk_mult"), (dict(lr=0.0), "lr must be"),
                                             (dict(qk_schedule="cosine"), "qk_schedule must be one of")])
def test_bad_schedules(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RateSchedule(**kwargs)


def test_unknown_parameterisation():
    with pytest.raises(ValueError, match="unknown parameterisation 'FFFF'; allowed: FAFO, FACO, CAFO, CACO"):
        AttentionConfig("FFFF")


def _tiny_run(seeds, qk_mult=1.0, steps=6, lr=0.5, par="FAFO", optimizer="sgd", target=1e-3):
    data_cfg = SyntheticConfig()
    train_split = stack_splits([make_splits(data_cfg, 64, 8, s)[0] for s in seeds])
    cfg = AttentionConfig(par, vocab=data_cfg.vocab, init_scale=0.3)
    params = init_params(cfg, seeds)
    start = {k: v.detach().clone() for k, v in params.items()}
    tc = TrainConfig(RateSchedule(lr=lr, qk_mult=qk_mult), batch_size=16, max_steps=steps, eval_every=3,
                     optimizer=optimizer, target_nll=target)
    monitor = lambda prm: evaluate(prm, cfg, train_split.tokens, train_split.labels)["nll"].mean(1)  # noqa: E731
    batches = FixedSetBatches(train_split.tokens, train_split.labels, seeds, 16)
    hist = train(params, attention_loss(cfg), tc, batches, monitor, seeds, progress=False)
    return start, params, hist


@pytest.mark.parametrize("optimizer, lr", [("sgd", 0.5), ("adamw", 0.01)])
def test_batched_training_equals_the_loop(optimizer, lr):
    start, together, hist = _tiny_run([3, 4], optimizer=optimizer, lr=lr)
    assert all(not torch.equal(start[k], together[k]) for k in start)
    for i, seed in enumerate([3, 4]):
        _, alone, hist1 = _tiny_run([seed], optimizer=optimizer, lr=lr)
        for k in together:
            assert torch.allclose(together[k][i], alone[k][0], atol=1e-6), k
        assert np.allclose([h[i] for h in hist.train_nll], [h[0] for h in hist1.train_nll], rtol=1e-5)


def test_qk_multiplier_scales_the_first_qk_step_only():
    s1, p1, _ = _tiny_run([0], qk_mult=1.0, steps=1)
    s5, p5, _ = _tiny_run([0], qk_mult=5.0, steps=1)
    assert torch.allclose(p5["W_Q"] - s5["W_Q"], 5 * (p1["W_Q"] - s1["W_Q"]), atol=1e-7)
    assert torch.allclose(p5["W_V"] - s5["W_V"], p1["W_V"] - s1["W_V"], atol=1e-7)


def test_nan_loss_is_one_clear_error():
    with pytest.raises(FloatingPointError, match=r"loss became (nan|inf) at step \d+ for seed 0; lower the learning"):
        _tiny_run([0], lr=1e300, steps=5, par="CACO")


def test_dtap_on_hand_made_inputs():
    attention = np.array([0.1, 0.9, 1.0, 0.5, 0.45])
    prob = np.array([0.95, 0.95, 0.1, 0.5, 1.0])
    h = dtap_histogram(attention, prob, [0, 0.5, 1], [0, 0.5, 1])
    # rows: probability [0, .5), [.5, 1]; columns: attention [0, .5), [.5, 1]
    assert h.tolist() == [[0.0, 20.0], [40.0, 40.0]]
    assert dtap_histogram(attention, prob).sum() == pytest.approx(100)
    s = attention_summary(attention, prob, np.array([1, 1, 0, 0, 1]))
    assert s["AC"] == pytest.approx(40) and s["ACMC"] == pytest.approx(20) and s["MRTA"] == pytest.approx(0.59)
    assert s["top_left"] == pytest.approx(40) and s["top_right_cell"] == pytest.approx(20)
    assert s["accuracy"] == pytest.approx(60)


@pytest.mark.parametrize("edges, message", [([0, 0.5, 1.2], r"must lie in \[0, 1\]"), ([-0.1, 1], r"\[0, 1\]"),
                                            ([0, 0.6, 0.4, 1], "strictly increasing"), ([0.5], "at least two")])
def test_bad_bins(edges, message):
    with pytest.raises(ValueError, match=message):
        check_bins(edges)


def test_adamw_step_size_is_the_learning_rate():
    """Adam's first step moves every parameter entry with a non-zero gradient by about lr (times the multiplier)."""
    start, after, _ = _tiny_run([0], qk_mult=3.0, steps=1, lr=1e-3, optimizer="adamw")
    step_qk = (after["W_Q"] - start["W_Q"]).abs()
    step_ov = (after["W_V"] - start["W_V"]).abs()
    assert step_qk.max().item() == pytest.approx(3e-3, rel=1e-3)
    assert step_ov.max().item() == pytest.approx(1e-3, rel=1e-3)


def test_a_seed_that_reaches_the_target_is_frozen():
    _, at_three, _ = _tiny_run([0], steps=3, target=100.0)
    _, at_six, hist = _tiny_run([0], steps=6, target=100.0)  # NLL <= 100 at the first check, step 3
    assert hist.stopped_at.tolist() == [3] and hist.steps == [3]
    assert all(torch.equal(at_three[k], at_six[k]) for k in at_six)


def test_official_preset_runs_a_panel_with_fresh_batches():
    from qkov_lib.experiments import figure2_panels, run_panel, synthetic_data
    from qkov_lib.profiles import resolve, synthetic_config
    _, p = resolve("fig2_dtap", "official", {"seeds": [0, 1], "n_train": 64, "n_test": 64, "max_steps": 6,
                                              "eval_every": 3})
    cfg = synthetic_config(p)
    assert cfg.vocab == 50 and p["fresh_batches"] and p["score_scale"] == pytest.approx(50 ** -0.5)
    result = run_panel(figure2_panels(20, 40, 5, 10)[0], cfg, synthetic_data(cfg, p["seeds"], 64, 64), p["seeds"],
                       p, torch.device("cpu"), progress=False)
    assert result.heatmaps.shape == (2, 5, 5) and np.allclose(result.heatmaps.sum((1, 2)), 100)
    assert list(result.summary["steps"]) == [6, 6] and result.summary["hit_cap"].all()
