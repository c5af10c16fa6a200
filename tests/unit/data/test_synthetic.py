"""The synthetic task (Section 4, Appendix A.2.1): token sets, sampling, splits."""

import numpy as np
import pytest
import torch

from qkov_lib.data.synthetic import SyntheticConfig, inverse_cdf, make_splits, sample_tokens, stack_splits


def test_disjoint_layout_token_sets():
    cfg = SyntheticConfig()
    ids = cfg.token_ids()
    assert cfg.vocab == 58 and ids["distinct"].shape == (4, 10) and len(ids["common"]) == 10
    flat = np.concatenate([ids["common"], ids["distinct"].ravel(), ids["query"], ids["next"]])
    assert len(set(flat.tolist())) == 58 and flat.max() == 57


def test_official_layout_reuses_common_ids():
    cfg = SyntheticConfig(layout="official", distinct_weights="linear")
    ids = cfg.token_ids()
    assert cfg.vocab == 50
    assert set(ids["query"]) <= set(ids["common"]) and set(ids["next"]) <= set(ids["common"])
    probs = cfg.context_distribution()
    assert probs[0, ids["distinct"][0]].tolist() == pytest.approx((np.arange(1, 11) / 55 * 11 / 31).tolist())


def test_context_distribution_matches_the_formula():
    cfg = SyntheticConfig(gamma=0.3)
    probs, ids = cfg.context_distribution(), cfg.token_ids()
    assert np.allclose(probs.sum(1), 1)
    assert np.allclose(probs[2, ids["distinct"][2]], 0.3 / 10) and np.allclose(probs[2, ids["common"]], 0.7 / 10)
    assert np.all(probs[2, ids["distinct"][[0, 1, 3]]] == 0) and np.all(probs[:, ids["query"]] == 0)


def test_splits_are_seeded_balanced_disjoint_and_well_formed():
    cfg = SyntheticConfig(gamma=0.4)
    train, test = make_splits(cfg, 800, 400, seed=3)
    again, _ = make_splits(cfg, 800, 400, seed=3)
    other, _ = make_splits(cfg, 800, 400, seed=4)
    assert torch.equal(train.tokens, again.tokens) and not torch.equal(train.tokens, other.tokens)
    assert np.bincount(train.classes.numpy()).tolist() == [200] * 4
    train_rows = {tuple(r) for r in train.tokens.tolist()}
    assert not any(tuple(r) in train_rows for r in test.tokens.tolist())
    ids = cfg.token_ids()
    assert torch.equal(train.tokens[:, -1], torch.as_tensor(ids["query"])[train.classes])
    assert torch.equal(train.labels, torch.as_tensor(ids["next"])[train.classes])
    own = torch.as_tensor(ids["distinct"])[train.classes]  # [N, C]
    expected = (train.tokens[:, :, None] == own[:, None, :]).any(-1)
    expected[:, -1] = False
    assert torch.equal(train.distinct, expected)
    share = train.distinct[:, :-1].float().mean().item()
    assert share == pytest.approx(0.4, abs=0.02)  # gamma is the distinct share of the context


def test_sampling_is_the_inverse_cdf():
    cfg = SyntheticConfig(layout="official", distinct_weights="linear")
    tokens, labels = sample_tokens(cfg, 400, np.random.default_rng(9))
    rng = np.random.default_rng(9)
    classes = rng.permutation(np.arange(400) % cfg.n_classes)
    u = rng.random((400, cfg.seq_len - 1))
    cum = np.cumsum(cfg.context_distribution(), axis=1)[classes]
    expected = np.minimum((u[:, :, None] > cum[:, None, :]).sum(-1), cfg.vocab - 1)  # tokens with cum < u
    assert np.array_equal(tokens[:, :-1], expected)
    assert np.array_equal(tokens[:, -1], cfg.token_ids()["query"][classes])
    assert np.array_equal(labels, cfg.token_ids()["next"][classes])


def test_bucketed_inverse_cdf_is_searchsorted_at_every_edge():
    """Random u, u at and beside every cumulative value and every cell edge, and a CDF with entries inside one
    cell and on a cell edge: the same integers as np.searchsorted(side="left")."""
    rng = np.random.default_rng(4)
    cum = np.concatenate([np.sort(rng.random(30)), [0.5, 0.5 + 1e-12, 0.5 + 2e-12, 1.0]])
    cum.sort()
    edges = np.arange(4096) / 4096
    u = np.concatenate(
        [
            rng.random(20000),
            cum,
            np.nextafter(cum, 0),
            np.nextafter(cum, 2),
            edges,
            np.nextafter(edges, 0),
            [0.0, np.nextafter(1.0, 0)],
        ]
    )
    u = u[(u >= 0) & (u < 1)]
    assert np.array_equal(inverse_cdf(cum, u), np.searchsorted(cum, u, side="left"))
    grid = rng.random((50, 7))
    assert np.array_equal(inverse_cdf(cum, grid), np.searchsorted(cum, grid, side="left"))  # any shape


def test_sample_tokens_is_seeded_and_balanced():
    cfg = SyntheticConfig(layout="official", distinct_weights="linear")
    (a, la), (b, lb) = (sample_tokens(cfg, 8, np.random.default_rng(1)) for _ in range(2))
    assert a.shape == (8, 64) and np.array_equal(a, b) and np.array_equal(la, lb)
    assert sorted(la.tolist()) == sorted(cfg.token_ids()["next"].tolist() * 2)  # classes balanced


def test_stack_splits():
    cfg = SyntheticConfig()
    stacked = stack_splits([make_splits(cfg, 40, 40, s)[0] for s in (0, 1)])
    assert stacked.tokens.shape == (2, 40, 64) and stacked.distinct.shape == (2, 40, 64)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(gamma=0.0), r"gamma .* must lie in \(0, 1\)"),
        (dict(gamma=1.0), r"gamma .* must lie in \(0, 1\)"),
        (dict(seq_len=1), "seq_len must be an integer >= 2"),
        (dict(n_distinct=0), "n_distinct must be a positive integer"),
        (dict(vocab_size=50), "vocab_size = 50 cannot hold the 58 tokens"),
        (dict(layout="mixed"), "layout must be"),
        (dict(distinct_weights="zipf"), "distinct_weights must be"),
    ],
)
def test_bad_task_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SyntheticConfig(**kwargs)


def test_classes_balanced_by_default_or_each_drawn_at_random():
    """``class_draw``: the paper's uniform classes as exact quarters (shuffled), or the notebooks' draw per
    sequence (seeded: the same seed, the same classes); an unknown draw is one error."""
    rng = lambda: np.random.default_rng(3)  # noqa: E731
    _, balanced = make_splits(SyntheticConfig(), 400, 40, seed=3)
    assert np.bincount(balanced.classes.numpy(), minlength=4).tolist() == [10, 10, 10, 10]
    cfg = SyntheticConfig(class_draw="random")
    labels = sample_tokens(cfg, 4000, rng())[1]
    counts = np.unique(labels, return_counts=True)[1]
    assert len(counts) == 4 and len(set(counts)) > 1 and counts.min() > 900  # uneven, about a quarter each
    assert (sample_tokens(cfg, 4000, rng())[1] == labels).all()
    with pytest.raises(ValueError, match="class_draw must be one of balanced, random"):
        SyntheticConfig(class_draw="even")
