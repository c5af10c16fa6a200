"""Section 5: the effective input x~, fixed attention at the ends of [0, 1], and the incentive's sign."""

import numpy as np
import pandas as pd
import pytest
import torch

from qkov_lib.chapters.fig3_incentive import claims as figure3
from qkov_lib.runner.catalog import resolve
from qkov_lib.data.synthetic import SyntheticSplit
from qkov_lib.runs.fixed_attention import (
    Fresh,
    FreshBags,
    OVModel,
    bag_features,
    effective_input,
    fade_epochs,
    run_fixed_attention,
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


def _fresh(n_train: int = 256, n_loss: int = 512) -> Fresh:
    """The authors' regime on Figure 3's official task, small."""
    return Fresh(resolve("fig3_incentive", "official")[1].data, "all", n_train, n_loss)


def test_fresh_batches_are_new_every_epoch_balanced_per_batch_and_shared_by_a_seeds_alphas():
    """``Fresh``: every mini-batch holds each class equally often (as the authors' generate_data draws 32 per class),
    the alphas of one seed read the same sequences, another seed others, the next epoch new ones, and the same
    seeds give the same bits; the read-out draws its own sequences."""
    alpha = torch.tensor([0.2, 0.2, 0.6])

    def source():
        return FreshBags(_fresh(), [3, 4], rows=[0, 1, 0], alpha=alpha, batch=128)

    bags = source()
    first, second, next_epoch = (bags.take(step, [0, 1, 2]) for step in (0, 1, 2))
    for x, _, labels in (first, second, next_epoch):
        assert x.shape == (3, 128, 50)
        for k in range(3):
            assert sorted(torch.unique(labels[k], return_counts=True)[1].tolist()) == [32] * 4
    x, _, labels = first
    assert torch.equal(labels[0], labels[2]) and not torch.equal(x[0], x[2])  # one seed, two alphas
    assert not torch.equal(x[0], x[1]) and not torch.equal(x[0], next_epoch[0][0])
    assert all(torch.equal(a, b) for a, b in zip(source().take(0, [0, 1, 2]), first))
    assert torch.equal(source().take(0, [2])[0][0], x[2])  # a model reads its own row, whoever else is active
    feats, loss_labels = bags.loss_set()
    assert feats.shape == (2, 512, 2, 50) and loss_labels.shape == (2, 512)


def test_a_fresh_run_reads_its_loss_on_new_sequences_as_the_authors_print_it():
    """Under ``Fresh`` the training loss recorded is the read-out's at alpha on new sequences (the authors'
    ``calculate_loss``, which they print); a fixed-set run without its sets is one clear error."""
    model = OVModel(True, init="pytorch", init_scale=1.0)
    curves = run_fixed_attention(
        model, [0.2, 0.6], [0], None, None, None, None, 0.5, 128, 3, 0.005, progress=False, fresh=_fresh()
    )
    assert curves["epoch"].tolist() == [1, 1, 2, 2, 3, 3]
    assert (curves["train_loss"] == curves["test_loss"]).all() and curves["incentive"].notna().all()
    first, last = (curves[curves.epoch == e]["train_loss"].to_numpy() for e in (1, 3))
    assert (last < first).all()
    with pytest.raises(ValueError, match="a fixed-set run takes its training and held-out features"):
        run_fixed_attention(model, [0.2], [0], None, None, None, None, 0.5, 128, 1, 0.005, progress=False)
