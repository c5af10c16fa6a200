"""The real-data loop's authors' options (``training``): per-seed gradient clipping, rate schedules from
``torch.optim.lr_scheduler``, SGD momentum, parameter groups with their own rate and decay, frozen parameters,
gradient accumulation, label smoothing; the models' biases and GELU; the chapters' ``official`` profiles."""

import dataclasses
import importlib
import math

import numpy as np
import pytest
import torch

from qkov_lib.core.chapter import resolve
from qkov_lib.models.decoder import DecoderConfig, decode, init_decoder
from qkov_lib.models.transformer import ClassifierConfig, classify, init_classifier, scaled_attention
from qkov_lib.train.optim import RateSchedule
from qkov_lib.train.training import TrainConfig, clip_per_seed, optimiser, rate_scheduler, train

CFG = ClassifierConfig(
    vocab=40,
    n_classes=3,
    max_len=12,
    d_model=16,
    n_heads=2,
    d_head=8,
    n_layers=1,
    mlp=True,
    d_mlp=32,
    residual=True,
    biases=True,
    activation="gelu_tanh",
)


def batches_for(cfg, seeds, steps, batch=8):
    """Per step, a batch [S, B, T] of ids (padding at the end of some rows) and labels [S, B]; each seed its own."""
    gen = torch.Generator().manual_seed(123)
    xs, ys = [], []
    for _ in range(steps):
        x = torch.randint(1, cfg.vocab, (len(seeds), batch, cfg.max_len), generator=gen)
        x[:, :, -3:] *= torch.rand(len(seeds), batch, 3, generator=gen) < 0.5
        x[:, :, -3:] = torch.where(x[:, :, -4:-3] == 0, 0, x[:, :, -3:])
        xs.append(x)
        ys.append(torch.randint(0, cfg.n_classes, (len(seeds), batch), generator=gen))
    return xs, ys


def loss_of(cfg):
    def loss_fn(prm, x, y):
        return torch.nn.functional.cross_entropy(classify(prm, cfg, x)[0].transpose(1, 2), y, reduction="none").mean(1)

    return loss_fn


def trained(seeds, tc, xs, ys, rows):
    """Train models ``seeds`` (stacked) on the batches' seed rows ``rows``; return the parameters."""
    params = init_classifier(CFG, seeds)
    train(
        params,
        loss_of(CFG),
        tc,
        lambda step: (xs[step][rows], ys[step][rows]),
        lambda p: np.zeros(len(seeds)),
        seeds,
        progress=False,
    )
    return {k: v.detach() for k, v in params.items()}


def test_clipping_is_per_seed_a_two_seed_stack_equals_each_seed_trained_alone():
    """Gradient clipping by global norm over each seed's own slices: a 2-seed stack, clipped hard (every step
    clips), ends where each seed trained alone ends. One global norm over the stack would tie the seeds together
    (and this test fails: the seeds' gradient norms differ)."""
    xs, ys = batches_for(CFG, [0, 1], steps=6)
    tc = TrainConfig(
        RateSchedule(1e-2, qk_mult=30.0),
        optimizer="sgd",
        momentum=0.9,
        weight_decay=1e-3,
        max_steps=6,
        eval_every=6,
        clip_norm=0.05,
        lr_schedule="cosine",
        warmup=0.34,
    )
    both = trained([7, 8], tc, xs, ys, [0, 1])
    for k, seed in enumerate([7, 8]):
        alone = trained([seed], tc, xs, ys, [k])
        for name, value in both.items():
            assert torch.allclose(value[k], alone[name][0], rtol=1e-5, atol=1e-7), (seed, name)
    free = trained([7, 8], TrainConfig(**{**tc.__dict__, "clip_norm": None}), xs, ys, [0, 1])
    assert any(not torch.allclose(free[n], both[n], atol=1e-6) for n in both)  # the clipping did clip


def test_clip_per_seed_scales_each_seeds_gradient_to_the_norm():
    grads = {"a": torch.tensor([[3.0, 4.0], [0.3, 0.4]]), "b": torch.tensor([[[12.0]], [[0.0]]])}
    params = {k: torch.zeros_like(g, requires_grad=True) for k, g in grads.items()}
    for k, g in grads.items():
        params[k].grad = g.clone()
    clip_per_seed(params, 1.0)
    seed0 = torch.cat([params["a"].grad[0], params["b"].grad[0].flatten()])
    assert torch.allclose(seed0.norm(), torch.tensor(1.0), atol=1e-5)
    assert torch.allclose(seed0, torch.tensor([3.0, 4.0, 12.0]) / 13, atol=1e-5)
    assert torch.equal(params["a"].grad[1], torch.tensor([0.3, 0.4]))  # norm 0.5 < 1: untouched


def test_cosine_with_warmup_is_the_transformers_schedule_and_onecycle_runs_to_its_end():
    params = {"blocks.0.W_Q": torch.zeros(1, 2, requires_grad=True), "unembed": torch.zeros(1, 2, requires_grad=True)}
    total, warm = 50, 5
    tc = TrainConfig(RateSchedule(0.1, qk_mult=3.0), optimizer="sgd", max_steps=total, lr_schedule="cosine", warmup=0.1)
    opt = optimiser(params, tc)
    sched = rate_scheduler(opt, tc)
    seen = []
    for _ in range(total):
        seen.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()

    def hf(step):  # transformers.get_cosine_schedule_with_warmup's factor
        if step < warm:
            return step / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / (total - warm)))

    for step, rates in enumerate(seen):
        assert rates == pytest.approx([0.3 * hf(step), 0.1 * hf(step)], abs=1e-7), step
    one = TrainConfig(
        RateSchedule(0.1),
        optimizer="adamw",
        max_steps=20,
        eval_every=20,
        accumulate=2,
        lr_schedule="onecycle",
        warmup=0.3,
    )
    fresh = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
    rates = []
    train(
        fresh,
        lambda p, x, y: (p["unembed"] ** 2).sum(1) + (p["blocks.0.W_Q"] - 1).pow(2).sum(1),
        one,
        lambda step: (None, None),
        lambda p: np.zeros(1),
        [0],
        progress=False,
    )
    opt = optimiser(fresh, one)
    sched = rate_scheduler(opt, one)
    for _ in range(one.optimiser_steps):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched.last_epoch + 1 < one.optimiser_steps:
            sched.step()
    assert max(rates) == pytest.approx(0.1) and rates[0] == pytest.approx(0.1 / 25)
    assert rates.index(max(rates)) == 2  # the peak after 30% of 10 optimiser steps, less one


def test_groups_qk_sets_embedding_rate_and_decay_and_frozen_parameters():
    params = init_classifier(CFG, [0])
    tc = TrainConfig(RateSchedule(1e-3, qk_mult=30.0), weight_decay=1e-4, qk_params="wq_wk_embed", frozen="mlp")
    groups = {g["circuit"]: g for g in optimiser(params, tc).param_groups}
    names = {id(p): n for n, p in params.items()}
    members = {g: sorted(names[id(p)] for p in grp["params"]) for g, grp in groups.items()}
    assert members["qk"] == ["blocks.0.W_K", "blocks.0.W_Q", "embed"] and groups["qk"]["lr"] == pytest.approx(0.03)
    assert not any("mlp" in n or n.endswith(("b_in", "b_out")) for m in members.values() for n in m)
    assert "blocks.0.b_Q" in members["other"] and "pos" in members["other"]
    squad = TrainConfig(
        RateSchedule(5e-5, qk_mult=20.0), weight_decay=0.05, qk_params="wq_wk_bq_bk", embed_mult=0.1, embed_decay=0.0
    )
    groups = {g["circuit"]: g for g in optimiser(params, squad).param_groups}
    assert groups["embed"]["lr"] == pytest.approx(5e-6) and groups["embed"]["weight_decay"] == 0.0
    assert groups["qk"]["lr"] == pytest.approx(1e-3) and len(groups["qk"]["params"]) == 4
    assert groups["other"]["weight_decay"] == 0.05
    default = {g["circuit"] for g in optimiser(params, TrainConfig()).param_groups}
    assert default == {"qk", "ov", "other"}  # no embedding group unless its rate or decay is set


def test_frozen_parameters_do_not_move_but_count_in_the_clipping_norm():
    xs, ys = batches_for(CFG, [0], steps=3)
    tc = TrainConfig(RateSchedule(1e-2), optimizer="adamw", max_steps=3, eval_every=3, frozen="mlp", clip_norm=1.0)
    start = init_classifier(CFG, [5])
    after = trained([5], tc, xs, ys, [0])
    assert torch.equal(after["blocks.0.mlp_in"], start["blocks.0.mlp_in"].detach())
    assert not torch.equal(after["blocks.0.W_Q"], start["blocks.0.W_Q"].detach())


def test_accumulating_two_half_batches_is_one_step_on_the_whole_batch():
    xs, ys = batches_for(CFG, [0], steps=2, batch=8)
    whole_x, whole_y = torch.cat(xs, 1), torch.cat(ys, 1)
    sgd = dict(schedule=RateSchedule(0.5, qk_mult=2.0), optimizer="sgd", momentum=0.9, eval_every=1)
    acc = trained([3], TrainConfig(**sgd, max_steps=2, accumulate=2), xs, ys, [0])
    one = trained([3], TrainConfig(**sgd, max_steps=1), [whole_x], [whole_y], [0])
    for name in acc:
        assert torch.allclose(acc[name], one[name], atol=1e-6), name
    none = trained([3], TrainConfig(**sgd, max_steps=2), xs, ys, [0])  # two steps: not the same
    assert any(not torch.allclose(none[n], one[n], atol=1e-6) for n in one)


def test_biases_and_gelu_in_the_classifiers_read_out_path_equal_the_full_attention():
    """With biases, the last layer's shortcut (``readout_heads``: no keys or values per position) gives the logits
    of full attention computed at every position, b_Q, b_K, b_V, b_O, GELU and the MLP's biases included."""
    params = init_classifier(CFG, [0, 1])
    with torch.no_grad():
        for name, value in params.items():
            if name.rsplit(".", 1)[-1].startswith("b_"):
                value.normal_(0, 0.5)
    ids = torch.tensor([[5, 7, 9, 11, 3, 0, 0, 0, 0, 0, 0, 0], [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]])
    logits, _ = classify(params, CFG, ids)
    x = params["embed"][:, ids] + params["pos"][:, None, :12]
    p = {k.split(".")[-1]: v for k, v in params.items()}
    q, k, v = (torch.einsum("sbtd,shde->sbhte", x, p["W_" + c]) + p["b_" + c][:, None, :, None, :] for c in "QKV")
    attn = scaled_attention(q @ k.transpose(-1, -2), (ids == 0)[None, :, None, None, :], CFG.d_head)
    x = x + torch.einsum("sbhqe,shed->sbqd", attn @ v, p["W_O"]) + p["b_O"][:, None, None, :]
    h = torch.nn.functional.gelu(
        torch.einsum("sbtd,sdm->sbtm", x, p["mlp_in"]) + p["b_in"][:, None, None, :], approximate="tanh"
    )
    x = x + torch.einsum("sbtm,smd->sbtd", h, p["mlp_out"]) + p["b_out"][:, None, None, :]
    last = (ids != 0).sum(-1) - 1
    ref = torch.einsum("sbd,sdc->sbc", x[:, torch.arange(2), last], p["unembed"]) + p["unembed_bias"][:, None]
    assert torch.allclose(logits, ref, atol=1e-5)
    plain = init_classifier(ClassifierConfig(**{**CFG.__dict__, "biases": False}), [0, 1])
    assert all(torch.equal(plain[n], params[n]) for n in plain if not n.endswith("bias"))  # same weights drawn


def test_the_decoders_biases_and_gelu_change_its_output_and_default_draws_are_unchanged():
    cfg = DecoderConfig(vocab=30, max_len=10, d_model=16, n_heads=2, d_head=8, n_layers=2, d_mlp=32)
    with_b = DecoderConfig(**{**cfg.__dict__, "biases": True, "activation": "gelu"})
    plain, biased = init_decoder(cfg, [0]), init_decoder(with_b, [0])
    assert all(torch.equal(plain[n], biased[n]) for n in plain)
    ids = torch.randint(1, 30, (3, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        biased["blocks.0.b_O"].fill_(0.3)
    assert not torch.allclose(decode(plain, cfg, ids)[0], decode(biased, with_b, ids)[0])


@pytest.mark.parametrize("chapter", ["sva", "hatexplain", "hatexplain_layers", "squad"])
def test_official_profiles_set_the_authors_values(chapter):
    module = importlib.import_module(f"qkov_lib.chapters.{chapter}")
    s = resolve(module, "official")
    s = s[1] if isinstance(s, tuple) else s
    assert s.seeds == (1234, 1235, 1236, 1237, 1238)
    base, faster = s.for_condition(False), s.for_condition(True)
    tc = base.train_config(s.qk_mult, per_epoch=100)
    if chapter == "sva":
        assert (tc.optimizer, tc.momentum, tc.schedule.lr, tc.batch_size, tc.weight_decay) == (
            "sgd",
            0.99,
            5e-4,
            32,
            1e-5,
        )
        assert (tc.lr_schedule, tc.warmup, tc.qk_params, s.biases) == ("cosine", 0.1, "wq_wk_bq_bk_embed_pos", True)
    elif chapter.startswith("hatexplain"):
        assert (tc.optimizer, tc.schedule.lr, tc.lr_schedule, tc.warmup, tc.clip_norm) == (
            "adamw",
            5e-5,
            "cosine",
            0.1,
            1.0,
        )
        assert (s.activation, s.biases, tc.qk_params, s.epochs, tc.batch_size) == (
            "gelu_tanh",
            True,
            "wq_wk_embed",
            30,
            32,
        )
        assert (base.weight_decay, base.frozen, faster.weight_decay, faster.frozen) == (1e-4, "none", 1e-3, "mlp")
    else:
        assert (tc.weight_decay, tc.embed_mult, tc.embed_decay, tc.accumulate, tc.clip_norm) == (0.05, 0.1, 0.0, 2, 0.5)
        assert (s.label_smoothing, tc.lr_schedule, tc.qk_params, s.biases) == (0.1, "onecycle", "wq_wk_bq_bk", True)
        assert s.init == "xavier" and module.Setup().init == "normal"
        # their warm-up: 1000 scheduler steps, one after each optimiser step (every second of 1875 x 100 batches)
        theirs = dataclasses.replace(s, max_train=None, max_test=None, epochs=100)
        full = theirs.train_config(s.qk_mult, per_epoch=1875)
        assert full.optimiser_steps == 93_750 and round(full.warmup * full.optimiser_steps) == 1000
    for profile in ("smoke", "default"):  # the companion's own profiles keep the clean intervention
        other = resolve(module, profile)
        other = other[1] if isinstance(other, tuple) else other
        assert other.for_condition(True) is other and other.qk_params == "wq_wk" and other.lr_schedule == "constant"


def test_bad_training_options_are_one_clear_error():
    for bad, match in (
        (dict(momentum=0.9), "momentum is SGD's"),
        (dict(lr_schedule="linear"), "lr_schedule"),
        (dict(lr_schedule="onecycle"), "warmup"),
        (dict(clip_norm=0.0), "clip_norm"),
        (dict(qk_params="everything"), "qk_params"),
        (dict(frozen="attention"), "frozen"),
        (dict(accumulate=3, max_steps=2), "accumulate"),
    ):
        with pytest.raises(ValueError, match=match):
            TrainConfig(**bad)


def test_the_reproduction_rule_inside_the_interval_reproduces_outside_differs_else_undecided():
    from qkov_lib.metrics.verdicts import DIFFERS, REPRODUCES, UNDECIDED, Interval, reproduces

    ours = Interval(mean=57.0, low=55.0, high=59.0, n=5)
    assert reproduces(57.5, ours, 5) == REPRODUCES
    assert reproduces(55.0, ours, 5) == REPRODUCES  # an end of the interval is inside
    assert reproduces(54.9, ours, 5) == DIFFERS and reproduces(60.0, ours, 5) == DIFFERS
    assert reproduces(60.5, ours, 1) == REPRODUCES and reproduces(61.5, ours, 1) == DIFFERS  # one seed: +-2 points
    assert reproduces(0.60, Interval(0.5, 0.55, 0.59, 5), 1, unit="") == REPRODUCES  # probabilities: +-0.02
    assert reproduces(0.62, Interval(0.5, 0.55, 0.59, 5), 1, unit="") == DIFFERS
    assert reproduces(57.5, None, 5) == UNDECIDED  # official not run
    assert reproduces(57.5, ours, 5, evidence=False) == UNDECIDED  # its models did not learn
    assert reproduces(57.0, Interval(57.0, 57.0, 57.0, 1), 5) == UNDECIDED  # one seed: no interval
    assert reproduces(None, ours, 0) == UNDECIDED  # nothing stored


def test_the_real_data_page_sets_official_beside_the_authors_with_its_verdict(tmp_path):
    import pandas as pd

    from qkov_lib.data import authors
    from qkov_lib.metrics.verdicts import OFFICIAL_COLUMN, VERDICT_COLUMN
    from qkov_lib.chapters import hatexplain
    from qkov_lib.runs.real_verdicts import OfficialRun, compared, official_run

    stored = authors.table()
    base, fast = (float(stored.loc[f"hatexplain.accuracy.{c}", "value"]) for c in ("baseline", "faster"))
    rows = []
    for seed, shift in enumerate((-0.4, -0.1, 0.0, 0.2, 0.3)):
        rows.append(
            {
                "condition": "baseline",
                "seed": seed,
                "accuracy": base + shift,
                "MRTA": 2.0,
                "AC": 1.0,
                "ACMC": 1.0,
                "sufficiency": 0.3,
                "comprehensiveness": 0.3,
            }
        )
        rows.append(
            {
                "condition": "faster QK (x30)",
                "seed": seed,
                "accuracy": fast + 10 + shift,
                "MRTA": 30.0,
                "AC": 9.0,
                "ACMC": 5.0,
                "sufficiency": 0.3,
                "comprehensiveness": 0.5,
            }
        )
    per_seed = pd.DataFrame(rows)
    table = compared(per_seed, "hatexplain", OfficialRun(per_seed, evidence=True))
    assert table.loc[("test accuracy", "baseline"), VERDICT_COLUMN] == "reproduces"
    assert table.loc[("test accuracy", "faster QK"), VERDICT_COLUMN] == "differs"
    assert table.loc[("AC", "baseline"), VERDICT_COLUMN] == "undecided"  # the authors stored none
    assert table.loc[("test accuracy", "baseline"), OFFICIAL_COLUMN].startswith(f"{base:.1f}")
    unrun = compared(per_seed, "hatexplain", None)
    assert (unrun[OFFICIAL_COLUMN] == "not run").all() and (unrun[VERDICT_COLUMN] == "undecided").all()
    lost = compared(per_seed, "hatexplain", OfficialRun(per_seed, evidence=False))
    assert (lost[VERDICT_COLUMN] == "undecided").all()
    assert official_run(hatexplain, "default", root=tmp_path) is None  # no official unit in this root
    claims = pd.DataFrame({"id": ["accuracy_comparable"], "verdict": ["not evidence"]})
    here = official_run(hatexplain, "official", per_seed, claims)  # this run is the official one
    assert here is not None and not here.evidence and here.per_seed is per_seed


def test_the_real_data_pages_intervals_of_a_percentage_stay_within_0_and_100_and_the_verdict_is_the_shared_rule():
    """``compared`` reads its verdicts through ``verdicts.beside_official`` (one rule for every page) and writes a
    percentage's interval clipped to [0, 100] (``verdicts.PERCENT``); a probability difference is not clipped."""
    import pandas as pd

    from qkov_lib.data import authors
    from qkov_lib.metrics.verdicts import OFFICIAL_COLUMN, PERCENT, VERDICT_COLUMN, Interval, beside_official
    from qkov_lib.present.table1 import interval_text
    from qkov_lib.runs.real_verdicts import OfficialRun, compared

    accuracy = [99.9, 100.0, 100.0, 98.0, 100.0]  # the t interval reaches 100.66
    assert Interval.of(accuracy).high > 100 and interval_text(accuracy, 1, PERCENT).endswith(", 100.0]")
    assert interval_text(accuracy, 1) == Interval.of(accuracy).text(1)  # without bounds: as before
    per_seed = pd.DataFrame(
        [
            {
                "condition": c,
                "seed": i,
                "accuracy": a,
                "MRTA": 0.5 + i,
                "AC": 1.0,
                "ACMC": 1.0,
                "sufficiency": -0.01 * i,
                "comprehensiveness": 0.3,
            }
            for c in ("baseline", "faster QK (x30)")
            for i, a in enumerate(accuracy)
        ]
    )
    table = compared(per_seed, "hatexplain", OfficialRun(per_seed, evidence=True))
    for column in ("this run", OFFICIAL_COLUMN):
        assert table.loc[("test accuracy", "baseline"), column].endswith(",\u00a0100.0]\u00a0%")
        assert table.loc[(authors.table().loc["hatexplain.MRTA.baseline", "quantity"], "baseline"), column].startswith(
            "2.5 [0.5,"
        )
        assert table.loc[
            (authors.table().loc["hatexplain.sufficiency.baseline", "quantity"], "baseline"), column
        ].startswith("-0.020 [-0.")
    keys = [k for k in authors.table().index if k.startswith("hatexplain.")]
    official = {"hatexplain.accuracy.baseline": Interval.of(accuracy, PERCENT)}
    shared = beside_official(authors.three_way(dict.fromkeys(keys, "")), keys, official, lambda i: i.text())
    assert shared.loc["baseline", VERDICT_COLUMN].iloc[0] == table.loc[("test accuracy", "baseline"), VERDICT_COLUMN]
    lost = beside_official(
        authors.three_way(dict.fromkeys(keys, "")), keys, official, lambda i: i.text(), evidence=False
    )
    assert (lost[VERDICT_COLUMN] == "undecided").all()


def test_official_results_are_read_from_their_sealed_unit_and_the_summary_reads_them_alike(tmp_path):
    """A chapter under another profile reads the `official` unit of the results root (``results.profile_tables``,
    which the summary's profile comparison uses too); a unit changed after it was sealed is not read."""
    import pandas as pd

    from qkov_lib.chapters.summary.beside import profile_difference
    from qkov_lib.chapters import hatexplain_layers
    from qkov_lib.core.results import save
    from qkov_lib.runs.real_verdicts import official_run

    per_seed = pd.DataFrame(
        {"condition": ["baseline", "faster QK (x30)"], "seed": [1234, 1234], "layers": [2, 2], "accuracy": [50.0, 51.0]}
    )
    claims = pd.DataFrame(
        {"id": ["2_layers_AC_rises", "4_layers_AC_rises"], "claim": ["c2", "c4"], "verdict": ["holds", "not evidence"]}
    )
    for profile in ("official", "default"):
        save(tmp_path / profile, "hatexplain_layers", {"per_seed": per_seed, "claims": claims}, {})
    run = official_run(hatexplain_layers, "default", root=tmp_path, depth=2)
    assert run is not None and run.evidence and len(run.per_seed) == 2
    assert not official_run(hatexplain_layers, "default", root=tmp_path).evidence  # 4 layers: not evidence
    assert official_run(hatexplain_layers, "default", root=tmp_path, depth=3) is None  # no such depth
    assert list(profile_difference(tmp_path, "default", "official", "hatexplain_layers")["official"]) == [
        "holds",
        "not evidence",
    ]
    (tmp_path / "official" / "hatexplain_layers.per_seed.csv").write_text("changed\n")
    assert official_run(hatexplain_layers, "default", root=tmp_path) is None
    assert profile_difference(tmp_path, "default", "official", "hatexplain_layers") is None
