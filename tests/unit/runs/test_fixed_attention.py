"""Section 5: the effective input x~, fixed attention at the ends of [0, 1], and the incentive's sign."""

import numpy as np
import pandas as pd
import pytest
import torch

from qkov_lib.chapters.fig3_incentive import claims as figure3
from qkov_lib.data.synthetic import SyntheticSplit
from qkov_lib.runs.fixed_attention import (
    OVModel,
    bag_features,
    effective_input,
    fade_epochs,
    run_fixed_attention,
    run_models,
)

# two hand-made sequences over a vocabulary of 6: distinct tokens are marked, the query (last) is token 5
TOKENS = torch.tensor([[[0, 2, 2, 1, 3, 5], [4, 0, 0, 1, 4, 5]]])
DISTINCT = torch.tensor([[[0, 1, 1, 0, 1, 0], [1, 0, 0, 0, 1, 0]]], dtype=torch.bool)
SPLIT = SyntheticSplit(TOKENS, torch.tensor([[1, 2]]), torch.tensor([[0, 1]]), DISTINCT)


def test_effective_input_matches_the_formula():
    feats = bag_features(SPLIT, 6)
    x = effective_input(feats[0:1].expand(1, 2, 2, 6), torch.tensor([0.3]))[0]
    # sequence 0: distinct positions hold 2, 2, 3 (m = 3); common positions hold 0, 1 (n = 2); the query is left out
    expected0 = 0.3 / 3 * np.array([0, 0, 2, 1, 0, 0]) + 0.7 / 2 * np.array([1, 1, 0, 0, 0, 0])
    expected1 = 0.3 / 2 * np.array([0, 0, 0, 0, 2, 0]) + 0.7 / 3 * np.array([2, 1, 0, 0, 0, 0])
    assert np.allclose(x[0].numpy(), expected0) and np.allclose(x[1].numpy(), expected1)
    assert np.allclose(x.sum(-1).numpy(), 1.0)


def test_alpha_one_and_zero():
    feats = bag_features(SPLIT, 6)[0:1]
    all_distinct = effective_input(feats, torch.tensor([1.0]))[0, 0]
    no_distinct = effective_input(feats, torch.tensor([0.0]))[0, 0]
    assert np.allclose(all_distinct.numpy(), [0, 0, 2 / 3, 1 / 3, 0, 0])  # only distinct tokens, uniformly
    assert np.allclose(no_distinct.numpy(), [0.5, 0.5, 0, 0, 0, 0])  # only common tokens, uniformly


def test_others_all_includes_the_query():
    feats = bag_features(SPLIT, 6, others="all")[0, 0]
    assert np.allclose(feats[1].numpy(), [1 / 3, 1 / 3, 0, 0, 0, 1 / 3])
    with pytest.raises(ValueError, match="others must be one of common, all"):
        bag_features(SPLIT, 6, others="query")


def _toy(n: int = 200, seed: int = 0):
    """Class c has distinct token 2 + c and shares common tokens 0, 1: more attention on distinct tokens helps."""
    gen = torch.Generator().manual_seed(seed)
    classes = torch.randint(0, 2, (1, n), generator=gen)
    tokens = torch.stack([torch.randint(0, 2, (1, n), generator=gen), 2 + classes, torch.full((1, n), 4)], dim=-1)
    distinct = torch.tensor([False, True, False]).expand(1, n, 3)
    return bag_features(SyntheticSplit(tokens, classes, classes, distinct), 5), classes


def test_incentive_is_positive_where_attention_helps():
    """Only the distinct token carries the class, so once the OV circuit has learned anything, more attention on it
    lowers the held-out loss: the incentive is positive at every epoch."""
    feats, labels = _toy()
    curves = run_fixed_attention(
        OVModel(False, init="balanced", init_scale=1e-4),
        [0.3, 0.6],
        [0],
        feats,
        labels,
        feats,
        labels,
        lr=0.5,
        batch_size=50,
        epochs=5,
        delta=0.01,
        progress=False,
    )
    assert (curves["incentive"] > 0).all()
    first, last = curves[curves.epoch == 1], curves[curves.epoch == 5]
    assert (last["train_loss"].to_numpy() < first["train_loss"].to_numpy()).all()
    low, high = (last[last.alpha == a]["train_loss"].item() for a in (0.3, 0.6))
    assert high < low  # more attention on the informative token, lower loss at the same training time


def test_incentive_is_nan_past_alpha_one():
    feats, labels = _toy(40)
    curves = run_fixed_attention(
        OVModel(True, init="balanced", init_scale=0.5),
        [1.0],
        [0, 1],
        torch.cat([feats, feats]),
        torch.cat([labels, labels]),
        torch.cat([feats, feats]),
        torch.cat([labels, labels]),
        lr=0.1,
        batch_size=20,
        epochs=2,
        delta=0.005,
        progress=False,
    )
    assert curves["incentive"].isna().all() and set(curves["seed"]) == {0, 1}


def test_fade_epochs():
    curves = pd.DataFrame(
        {"model": "m", "alpha": 0.2, "seed": 0, "epoch": [1, 2, 3, 4, 5], "incentive": [0.2, 1.0, 0.5, 0.05, 0.01]}
    )
    row = fade_epochs(curves, 0.1).iloc[0]
    assert row["peak"] == 1.0 and row["peak_epoch"] == 2 and row["fade_epoch"] == 4


def test_figure3_claims_can_fail():
    rows = []
    for model, loss, inc in (("factorised", 1.0, 0.1), ("collapsed", 0.5, 0.1)):
        for a in (0.2, 0.4, 0.6, 0.8, 1.0):
            for epoch in (1, 2):
                for seed, noise in ((0, 0.0), (1, 0.01), (2, -0.01)):
                    rows.append(
                        {
                            "model": model,
                            "alpha": a,
                            "seed": seed,
                            "epoch": epoch,
                            "train_loss": loss + noise,
                            "incentive_per_delta": inc + noise if a < 1 else np.nan,
                        }
                    )
    verdicts = figure3(pd.DataFrame(rows), check_epoch=2)["verdict"].tolist()
    assert verdicts == ["fails", "holds", "fails", "fails", "fails"]  # only "positive incentive" holds here
    one_seed = figure3(pd.DataFrame([r for r in rows if r["seed"] == 0]), check_epoch=2)["verdict"]
    assert (one_seed == "undecided").all()  # one seed: no interval, no verdict


def test_split_stacks_give_the_rows_of_one_stack_per_model(monkeypatch):
    """run_models trains each OV model's alphas as separate stacks (in worker processes): the curves equal, bit for
    bit and row for row, those of one stack per model in this process."""
    monkeypatch.setenv("QKOV_WORKERS", "2")
    feats, labels = _toy(100)
    feats, labels = torch.cat([feats, feats]), torch.cat([labels, labels])
    models = [OVModel(True, init="balanced", init_scale=0.5), OVModel(False, True, init="balanced", init_scale=0.5)]
    args = ([0.2, 0.5, 0.9], [0, 1], feats, labels, feats, labels)
    kw = dict(lr=0.2, batch_size=20, epochs=3, delta=0.01, progress=False)
    split = run_models(models, *args, **kw)
    whole = pd.concat([run_fixed_attention(m, *args, **kw) for m in models], ignore_index=True)
    pd.testing.assert_frame_equal(split, whole, check_exact=True)


def test_pytorch_init_draws_the_bias_as_nn_linear_does():
    """Figure 3's ``official`` start: a collapsed model with bias gets nn.Linear's default bias, U(+-1/sqrt(V)), seeded
    per seed and apart from the weights; otherwise the bias starts at zero."""
    drawn = OVModel(factorised=False, bias=True, init="pytorch", init_scale=1.0).init_params(50, [0, 1])
    bias = drawn["b_OV"].detach()
    assert bias.shape == (2, 50) and bias.abs().max() <= 50**-0.5 and bias.abs().min() > 0
    assert not torch.equal(bias[0], bias[1])
    again = OVModel(factorised=False, bias=True, init="pytorch", init_scale=1.0).init_params(50, [1])["b_OV"]
    assert torch.equal(again[0].detach(), bias[1])
    zero = OVModel(factorised=False, bias=True).init_params(50, [0])["b_OV"]
    assert not zero.detach().any()
