"""The synthetic engine: hand-derived gradients against autograd, a model alone against the same model in a full stack,
flushed against unflushed subnormals, the stop rule, fresh batches and clear errors."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from qkov_lib.chapters.fig2_dtap import panels as figure2_panels
from qkov_lib.core.chapter import ParameterError
from qkov_lib.data.synthetic import SyntheticConfig, make_splits, stack_splits
from qkov_lib.models import PARAMETERISATIONS, AttentionConfig, forward, init_params
from qkov_lib.runner.catalog import resolve
from qkov_lib.runs.fixed_attention import OVModel
from qkov_lib.runs.synthetic_runs import SyntheticSetup, _initial, _members, synthetic_data, train_runs
from qkov_lib.train.counts import count_set, FixedBatches, FreshBatches
from qkov_lib.train.engine import train_stack
from qkov_lib.train.stack import Member, RunSpec, StackConfig
from qkov_lib.train.stack_optim import flush_denormals, UpdateRatios
from qkov_lib.train.stacked import evaluate_counts, forms_product, loss_and_grads
from qkov_lib.train.optim import RateSchedule
from qkov_lib.train.training import FixedSetBatches

CFG = SyntheticConfig()


@pytest.fixture(autouse=True)
def one_worker(monkeypatch):
    """Stacks train in this process (the pool: tests/integration/test_worker_processes.py)."""
    monkeypatch.setenv("QKOV_WORKERS", "1")


SPLIT = stack_splits([make_splits(CFG, 48, 8, s)[0] for s in (0, 1)])
CPU = torch.device("cpu")


@pytest.mark.parametrize("par", PARAMETERISATIONS)
@pytest.mark.parametrize("self_attend, scale", [(True, 1.0), (False, 0.5)])
def test_hand_derived_gradients_equal_autograd(par, self_attend, scale):
    cfg = AttentionConfig(par, vocab=CFG.vocab, init_scale=1.0, score_scale=scale, attend_to_query=self_attend)
    params = init_params(cfg, [3, 4])
    logits, attn = forward(params, cfg, SPLIT.tokens)
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), SPLIT.labels, reduction="none")
    batch = nll[:, :16].mean(1)
    expected = torch.autograd.grad(batch.sum(), list(params.values()))
    data = count_set(SPLIT, CFG.vocab, self_attend)
    sc = StackConfig.of(par, score_scale=scale)
    detached = {k: v.detach() for k, v in params.items()}
    log_counts, slots, labels = data.take(torch.tensor([0, 1]), torch.arange(16).expand(2, -1))
    loss, grads = loss_and_grads(detached, sc, log_counts, slots, labels, data.query_ids)
    torch.testing.assert_close(loss, batch.detach(), rtol=1e-5, atol=1e-6)
    for name, g in zip(params, expected):
        torch.testing.assert_close(grads[name], g, rtol=1e-4, atol=1e-6 * g.abs().max().item())
    ev = evaluate_counts(detached, sc, data, torch.tensor([0, 1]), chunk=20)
    assert np.allclose(ev["nll"], nll.detach().numpy(), atol=1e-5)
    assert np.allclose(ev["attn_query"], attn[:, :, -1].detach().numpy(), atol=1e-6)
    assert np.allclose(ev["attn_distinct"], (attn * SPLIT.distinct).sum(-1).detach().numpy(), atol=1e-6)


@pytest.mark.parametrize("batch", [8, 80])  # 80 > d = 58: the factorised circuit is applied as its product
@pytest.mark.parametrize("factorised, bias", [(True, False), (False, False), (False, True)])
def test_fixed_attention_gradients_equal_autograd(factorised, bias, batch):
    model = OVModel(factorised, bias, init="balanced", init_scale=0.5)
    params = model.init_params(CFG.vocab, [1, 2])
    x = torch.softmax(torch.randn(2, batch, CFG.vocab, generator=torch.Generator().manual_seed(0)), -1)
    labels = torch.randint(0, CFG.vocab, (2, batch), generator=torch.Generator().manual_seed(1))
    assert forms_product(params, x) == (factorised and batch > CFG.vocab)
    loss = torch.nn.functional.cross_entropy(OVModel.logits(params, x).transpose(1, 2), labels, reduction="none")
    expected = torch.autograd.grad(loss.mean(1).sum(), list(params.values()))
    sc = StackConfig(qk="fixed", ov_factorised=factorised, ov_bias=bias)
    _, grads = loss_and_grads({k: v.detach() for k, v in params.items()}, sc, x, None, labels, None)
    for name, g in zip(params, expected):
        torch.testing.assert_close(grads[name], g, rtol=1e-4, atol=1e-7)


SETUP = SyntheticSetup(
    seeds=(0,),
    n_train=64,
    n_test=32,
    init_scale=0.01,
    batch_size=16,
    eval_every=4,
    bins=(0.0, 0.5, 1.0),
    lr=0.5,
    ramp_steps=6,
    max_steps=12,
)
RUNS = [
    SETUP.panel("a", "FAFO"),
    SETUP.panel("e", "FAFO", 3.0),
    SETUP.panel("f", "FAFO", 4.0, "ramp"),
    SETUP.panel("d", "FAFO", ov_decay=0.01),
    SETUP.panel("i", "FAFO", ov_init_mult=0.5, max_steps=8),
    SETUP.panel("c", "CACO", 2.0, "ramp"),
    SETUP.panel("adam", "FAFO", 2.0, optimizer="adamw", lr=0.01),
]
ANY_RATE = RunSpec(rates=RateSchedule(), max_steps=1)  # for the batch sources, which read only seeds and rows


def _run(runs, seeds, recorder=None, setup=SETUP):
    data = synthetic_data(CFG, seeds, 64, 32)
    return train_runs(runs, replace(setup, seeds=tuple(seeds)), data, CPU, progress=False, recorder=recorder)


def test_a_model_alone_equals_the_same_model_in_a_full_stack():
    seeds = [3, 4]
    full = _run(RUNS, seeds)
    for i, run in enumerate(RUNS):
        for j, seed in enumerate(seeds):
            alone = _run([run], [seed])[0]
            row, ref = full[i].summary.iloc[j], alone.summary.iloc[0]
            assert row["steps"] == ref["steps"] and row["hit_cap"] == ref["hit_cap"]
            assert row["final_train_nll"] == pytest.approx(ref["final_train_nll"], rel=1e-4, abs=1e-7)
            assert row["MRTA"] == pytest.approx(ref["MRTA"], rel=1e-4, abs=1e-7)
            assert np.allclose(full[i].heatmaps[j], alone.heatmaps[0])
            curve = full[i].curves[full[i].curves["seed"] == seed]["train_nll"].to_numpy()
            assert np.allclose(curve, alone.curves["train_nll"].to_numpy(), rtol=1e-4)
    steps = {r.panel.key: r.summary["steps"].tolist() for r in full}
    assert steps["i"] == [8, 8] and steps["a"] == [12, 12]  # each model stops at its own cap


def _identity_stack(steps: int, flush: bool):
    cfg = AttentionConfig("FAFO", vocab=CFG.vocab, init="identity", init_scale=1e-6)
    params = {k: v.detach() for k, v in init_params(cfg, [0, 1]).items()}
    data = count_set(SPLIT, CFG.vocab)
    members = [Member(s, s, RunSpec(rates=RateSchedule(0.5, qk_mult=10.0), max_steps=steps)) for s in (0, 1)]
    batch = lambda step, active: data.take(torch.tensor(active), torch.arange(16).expand(len(active), -1))  # noqa
    with flush_denormals(flush):
        return train_stack(params, members, StackConfig(target_nll=0), batch, data.query_ids, progress=False)


def test_flushing_subnormals_changes_no_result():
    """The 1e-6 initialisation produces subnormal values; flushing them to zero may change only entries that are
    themselves below the smallest normal float (~1.2e-38), and nothing the model computes from them."""
    flushed, exact = _identity_stack(60, True), _identity_stack(60, False)
    tiny = torch.finfo(torch.float32).tiny
    subnormal_entries = 0
    for a, b in zip(flushed.params, exact.params):
        for name in a:
            torch.testing.assert_close(a[name], b[name], rtol=1e-6, atol=tiny)
            subnormal_entries += int(((b[name] != 0) & (b[name].abs() < tiny)).sum())
        sc = StackConfig()
        data = count_set(SPLIT, CFG.vocab)
        rows = torch.tensor([0, 1])
        stack = lambda ps: {k: torch.stack([p[k] for p in ps]) for k in ps[0]}  # noqa: E731
        ev_a, ev_b = (
            evaluate_counts(stack(flushed.params), sc, data, rows),
            evaluate_counts(stack(exact.params), sc, data, rows),
        )
        for key in ev_a:
            assert np.array_equal(ev_a[key], ev_b[key]), key
    assert subnormal_entries > 0  # the unflushed run does hold subnormal parameters
    assert not torch.equal(flushed.params[0]["W_Q"], 1e-6 * torch.eye(CFG.vocab))  # the QK circuit did move


def test_stop_rule_reads_the_full_training_nll_and_freezes_the_model():
    seeds = [0]
    stopped = _run([SETUP.panel("a", "FAFO")], seeds, setup=replace(SETUP, target_nll=100.0))[0]
    capped = _run([SETUP.panel("a", "FAFO", max_steps=4)], seeds)[0]
    assert stopped.summary["steps"].tolist() == [4] and not stopped.summary["hit_cap"].any()
    assert stopped.summary["MRTA"].iloc[0] == pytest.approx(capped.summary["MRTA"].iloc[0], rel=1e-6)
    assert capped.summary["hit_cap"].all()


def test_fresh_batches_are_per_model_and_independent_of_the_stack():
    """Each model's batches are its own generator's, whichever models are left (some leave inside a block)."""
    members = [Member(s, 0, ANY_RATE) for s in (5, 6, 7)]
    stack = FreshBatches(CFG, members, 8, 3, True, CPU)
    alone = [FreshBatches(CFG, [m], 8, 3, True, CPU) for m in members]
    for step, active in enumerate([[0, 1, 2]] * 4 + [[0, 2]] * 3 + [[2]] * 2):  # leaves at steps 4 (mid-block), 7
        got = stack.take(step, active)
        for k in range(len(members)):
            want = alone[k].take(step, [0])
            if k in active:
                assert all(torch.equal(g[active.index(k)], w[0]) for g, w in zip(got, want))
        if len(active) > 1:
            assert not torch.equal(got[0][0], got[0][1])


def test_fixed_batches_give_each_model_its_own_order_as_models_leave():
    """Model k reads its data row in its own seed's order (``FixedSetBatches``), whichever models are left."""
    data = count_set(SPLIT, CFG.vocab)
    members = [Member(s, r, ANY_RATE) for s, r in ((5, 0), (6, 1), (7, 1))]
    stack = FixedBatches(data, members, 8)
    alone = [FixedSetBatches(data.log_counts, data.labels, [m.seed], 8, rows=[m.row]) for m in members]
    for step, active in enumerate([[0, 1, 2]] * 7 + [[0, 2]] * 3 + [[2]] * 2):  # past an epoch of 6 steps
        got = stack.take(step, active)
        for k, order in enumerate(alone):
            want = data.take(torch.tensor([members[k].row]), order.indices(step))
            if k in active:
                assert all(torch.equal(g[active.index(k)], w[0]) for g, w in zip(got, want))


def test_official_preset_runs_a_panel_with_fresh_batches():
    _, setup = resolve(
        "fig2_dtap", "official", {"seeds": [0, 1], "n_train": 64, "n_test": 64, "max_steps": 6, "eval_every": 2}
    )
    cfg = setup.data
    assert cfg.vocab == 50 and setup.fresh_batches and setup.score_scale == pytest.approx(50**-0.5)
    data = synthetic_data(cfg, setup.seeds, 64, 64)
    result = train_runs([figure2_panels(setup, 20, 40, 5, 10)[0]], setup, data, CPU, progress=False)[0]
    assert result.heatmaps.shape == (2, 5, 5) and np.allclose(result.heatmaps.sum((1, 2)), 100)
    assert list(result.summary["steps"]) == [6, 6] and result.summary["hit_cap"].all()


def test_official_panels_start_from_the_authors_per_panel_initialisation():
    """Panels a (W_K, W_Q) and d (W_QK, W_OV) start from PyTorch's default draw; every other matrix as the
    chapter's identity init gives it, 1e-6 I, a collapsed circuit too (the notebooks' start, ``collapsed_init``)."""
    _, official = resolve("fig2_dtap", "official")
    panels = figure2_panels(official, 20, 40, 5, 10, 127, official.pytorch_init)
    assert [panel.key for panel in panels if panel.pytorch_init] == ["a", "d", "g", "h"]
    assert "PyTorch init W_K W_Q" in panels[0].label
    for panel in panels[:4]:
        start = _initial([panel], [official.model(panel)], (0, 1), CPU)
        default, own = (
            init_params(
                AttentionConfig(panel.parameterisation, vocab=50, init=kind, init_scale=scale, collapsed_init="factor"),
                [0, 1],
            )
            for kind, scale in (("pytorch", 1.0), ("identity", 1e-6))
        )
        for name, value in start.items():
            expected = (default if name in panel.pytorch_init else own)[name].detach()
            torch.testing.assert_close(value, expected, rtol=0, atol=0)


def test_pytorch_init_must_name_the_panels_own_matrices():
    with pytest.raises(ParameterError, match=r"pytorch_init\['d'\] names \['W_K'\], but panel d \(CACO\)"):
        resolve("fig2_dtap", "paper", {"pytorch_init": {"d": ["W_K"]}})
    with pytest.raises(ParameterError, match="pytorch_init must map panel keys a-h"):
        resolve("fig2_dtap", "paper", {"pytorch_init": {"z": ["W_K"]}})


def test_qk_multiplier_scales_the_first_qk_step_only():
    cfg = AttentionConfig("FAFO", vocab=CFG.vocab, init_scale=0.3)
    data = count_set(SPLIT, CFG.vocab)
    batch = lambda step, active: data.take(
        torch.zeros(len(active), dtype=torch.long),  # noqa: E731
        torch.arange(16).expand(len(active), -1),
    )
    start = {k: v.detach() for k, v in init_params(cfg, [0, 0]).items()}
    members = [Member(0, 0, RunSpec(rates=RateSchedule(0.5, qk_mult=m), max_steps=1)) for m in (1.0, 5.0)]
    out = train_stack(start, members, StackConfig(target_nll=0), batch, data.query_ids, progress=False)
    d1, d5 = ({k: out.params[i][k] - start[k][i] for k in start} for i in (0, 1))
    torch.testing.assert_close(d5["W_Q"], 5 * d1["W_Q"], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(d5["W_V"], d1["W_V"])


def test_adamw_first_step_is_the_learning_rate_per_group():
    result = _run([SETUP.panel("adam", "FAFO", 3.0, optimizer="adamw", lr=1e-3, max_steps=1)], [0])
    assert result[0].summary["steps"].tolist() == [1]
    cfg = AttentionConfig("FAFO", vocab=CFG.vocab, init_scale=0.3)
    data = count_set(SPLIT, CFG.vocab)
    start = {k: v.detach() for k, v in init_params(cfg, [0]).items()}
    batch = lambda step, active: data.take(torch.zeros(1, dtype=torch.long), torch.arange(16)[None])  # noqa: E731
    out = train_stack(
        start,
        [Member(0, 0, RunSpec(rates=RateSchedule(1e-3, qk_mult=3.0), max_steps=1))],
        StackConfig(optimizer="adamw", target_nll=0),
        batch,
        data.query_ids,
        progress=False,
    )
    assert (out.params[0]["W_K"] - start["W_K"][0]).abs().max().item() == pytest.approx(3e-3, rel=1e-3)
    assert (out.params[0]["W_V"] - start["W_V"][0]).abs().max().item() == pytest.approx(1e-3, rel=1e-3)


def test_nan_loss_is_one_clear_error():
    with pytest.raises(
        FloatingPointError,
        match=r"loss became (nan|inf) by step \d+ \(checked every 4 steps\) for "
        r"the model with seed 0 \(lr = 1e\+300",
    ):
        _run([SETUP.panel("d", "CACO", lr=1e300)], [0])


def test_update_ratios_is_relative_update_of_qk_over_ov():
    rec = UpdateRatios(every=1)
    params = {
        "W_Q": torch.ones(2, 3, 3),
        "W_K": torch.ones(2, 3, 3),
        "W_O": torch.ones(2, 4, 3),
        "W_V": torch.ones(2, 3, 3),
    }
    updates = {k: (0.1 if k in ("W_Q", "W_K") else 0.01) * v for k, v in params.items()}
    rec(0, [("a", 7), ("a", 8)], params, updates)
    assert len(rec.rows) == 2 and rec.rows[0]["effective_ratio"] == pytest.approx(10.0) and rec.rows[1]["seed"] == 8
    with pytest.raises(ValueError, match="every"):
        UpdateRatios(0)
    recorded = UpdateRatios(every=2)
    _run(RUNS[:2], [3], recorder=recorded)
    assert {r["panel"] for r in recorded.rows} == {"a", "e"} and {r["step"] for r in recorded.rows} == {
        0,
        2,
        4,
        6,
        8,
        10,
    }


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(qk="sparse"), "qk must be one of"),
        (dict(optimizer="lion"), "optimizer must be one of"),
        (dict(gate=0.5), "gate must be >= 1"),
        (dict(target_nll=-1.0), "target_nll must be >= 0"),
    ],
)
def test_bad_stack_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StackConfig(**kwargs)


def _authors_loop(batch_losses: np.ndarray, epoch: int, target: float) -> int | None:
    """The authors' notebook loop, literally: add each mini-batch loss to a running sum; after each epoch stop if
    sum / epoch <= target; print and reset the sum after every 100th epoch. The step it stops at, or None."""
    running = 0.0
    for e in range(len(batch_losses) // epoch):
        running += float(batch_losses[e * epoch : (e + 1) * epoch].sum())
        if running / epoch <= target:
            return (e + 1) * epoch
        if (e + 1) % 100 == 0:
            running = 0.0
    return None


def test_authors_stop_rule_follows_their_loop_across_the_reset():
    """A model that stops by the authors' rule stops where a literal replay of their loop on its own mini-batch
    losses stops; the target is chosen so that the stop falls just after the 100-epoch reset."""
    setup = replace(SETUP, eval_every=1, seeds=(0,))
    free = {"lr": 0.5, "max_steps": 440}
    data = synthetic_data(CFG, [0], 64, 32)
    full = train_runs([setup.panel("a", "FAFO", early_stop=False, **free)], setup, data, CPU, progress=False)[0]
    losses = full.curves["train_nll"].to_numpy()  # every step's mini-batch loss (eval_every = 1)
    assert list(full.summary["steps"]) == [440] and full.summary["hit_cap"].all()  # no early stop: to the cap
    epoch = 4
    target = losses[400:404].mean() * 1.0001  # epoch 101's mean: reached only once the sum is reset
    expected = _authors_loop(losses, epoch, target)
    assert expected == 404
    stopped = train_runs(
        [setup.panel("a", "FAFO", stop_epoch=epoch, **free)],
        replace(setup, target_nll=target),
        data,
        CPU,
        progress=False,
    )[0]
    assert list(stopped.summary["steps"]) == [expected] and not stopped.summary["hit_cap"].any()


def test_panel_caps_and_stop_rules_reach_the_members():
    def under(cap: int) -> dict:
        panels = figure2_panels(
            replace(SETUP, max_steps=cap), 10, 20, 5, 10, panel_steps={"e": 100}, panel_stop={"a": 250, "f": None}
        )
        return {p.key: p for p in panels}

    assert under(50)["e"].max_steps == 50 and under(50)["e"].label.endswith("cap 50")  # never beyond the setup's
    by_key = under(700)
    assert by_key["e"].max_steps == 100 and by_key["e"].label.endswith("cap 100")
    assert by_key["a"].stop_epoch == 250 and by_key["a"].early_stop and not by_key["f"].early_stop
    assert by_key["b"].stop_epoch is None and by_key["b"].early_stop and by_key["b"].max_steps == 700
    assert "cap" not in by_key["b"].label
    members = _members([by_key["a"]], SETUP.seeds)
    assert [m.spec for m in members] == [by_key["a"]] and members[0].spec.stop_epoch == 250
    assert "no early stop" in by_key["f"].label and "authors' stop per 250-step epoch" in by_key["a"].label
    for bad in ({"panel_stop": {"a": 7}}, {"panel_steps": {"z": 5}}, {"panel_steps": {"a": 0}}):
        with pytest.raises(ParameterError, match="must map panel keys a-h"):
            resolve("fig2_dtap", "paper", bad)
    with pytest.raises(ParameterError, match=r"pytorch_init\['d'\] names \['W_K'\], but panel d \(CACO\) has only"):
        resolve("fig2_dtap", "paper", {"pytorch_init": {"d": ["W_K"]}})
    with pytest.raises(ValueError, match="stop_epoch = 3 must be a multiple of eval_every = 2"):
        train_runs(
            [SETUP.panel("a", "FAFO", stop_epoch=3)],
            replace(SETUP, eval_every=2, seeds=(0,)),
            synthetic_data(CFG, [0], 64, 32),
            CPU,
            progress=False,
        )


def test_the_engines_adamw_is_torchs_adamw_per_model():
    """The engine's stacked AdamW (per-model rates, decoupled decay on OV only) against ``torch.optim.AdamW`` run on
    each model alone, step by step on the same gradients."""
    from qkov_lib.train.stack_optim import Optimiser as _Optimiser

    gen = torch.Generator().manual_seed(0)
    start = {
        "W_QK": torch.randn(2, 6, 6, generator=gen),
        "W_O": torch.randn(2, 4, 6, generator=gen),
        "W_V": torch.randn(2, 6, 6, generator=gen),
    }
    rates = {"qk": torch.tensor([3e-3, 1e-2]), "ov": torch.tensor([1e-3, 1e-2])}
    decay = torch.tensor([0.0, 0.1])
    stacked = {k: v.clone() for k, v in start.items()}
    opt = _Optimiser(StackConfig(qk="collapsed", optimizer="adamw"), stacked)
    alone = [{k: v[i].clone().requires_grad_() for k, v in start.items()} for i in range(2)]
    torch_opts = [
        torch.optim.AdamW(
            [
                {"params": [p["W_QK"]], "lr": float(rates["qk"][i]), "weight_decay": 0.0},
                {"params": [p["W_O"], p["W_V"]], "lr": float(rates["ov"][i]), "weight_decay": float(decay[i])},
            ],
            foreach=False,
        )
        for i, p in enumerate(alone)
    ]
    for step in range(50):
        grads = {k: torch.randn(v.shape, generator=gen) * 10.0 ** -(step % 4) for k, v in start.items()}
        opt.step(stacked, {k: g.clone() for k, g in grads.items()}, rates, decay, step + 1)
        for i, (p, o) in enumerate(zip(alone, torch_opts)):
            for k in p:
                p[k].grad = grads[k][i].clone()
            o.step()
    for i, p in enumerate(alone):
        for k, v in p.items():
            moved = (v.detach() - start[k][i]).abs().max()
            assert (stacked[k][i] - v.detach()).abs().max() <= 1e-5 * moved, (i, k)
