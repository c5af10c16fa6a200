"""The attention mass of a model that learned no attention (``qkov_lib.metrics.uniform``): the relevant share of
the positions a uniform row sees, and the causal mask's pull towards the early positions below the top layer."""

import pytest
import torch

from qkov_lib.metrics import uniform
from qkov_lib.metrics.uniform import uniform_mass, uniform_mrta

# two posts padded to 4 positions (0 = padding): the read-out token is each post's last non-padding position
IDS = torch.tensor([[5, 6, 2, 0], [5, 6, 7, 2]])
RELEVANT = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.5, 1.0, 0.0]])


def test_read_the_authors_way_a_uniform_row_spreads_over_every_padded_position():
    mass = uniform_mass(IDS, RELEVANT, 1, measure="authors", causal=False)
    assert mass.tolist() == pytest.approx([1 / 4, 1.5 / 4])


def test_read_at_the_read_out_a_uniform_row_spreads_over_the_posts_own_tokens():
    mass = uniform_mass(IDS, RELEVANT, 1, measure="companion", causal=False)
    assert mass.tolist() == pytest.approx([1 / 3, 1.5 / 4])


def test_one_layer_read_at_the_last_position_sees_every_position_with_or_without_a_causal_mask():
    for measure in ("authors", "companion"):
        plain, causal = (uniform_mass(IDS, RELEVANT, 1, measure=measure, causal=c) for c in (False, True))
        assert torch.allclose(plain, causal)


def test_below_the_top_layer_a_causal_mask_gathers_the_rollout_on_the_early_positions():
    # two layers read at position 3 of 4: the top row gives 1/4 to each position t, whose own row gives 1/(t+1) to
    # each position up to t, so position 0 receives (1 + 1/2 + 1/3 + 1/4) / 4
    first = uniform_mass(IDS[:1], torch.tensor([[1.0, 0, 0, 0]]), 2, measure="authors", causal=True)
    assert first.item() == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert uniform_mass(IDS[:1], torch.tensor([[1.0, 0, 0, 0]]), 2, measure="authors", causal=False).item() == 0.25


def test_mrta_averages_the_measured_posts_in_percent():
    measured = torch.tensor([True, False])
    assert uniform_mrta(IDS, RELEVANT, measured, 1, measure="authors", causal=False) == pytest.approx(25.0)
    with pytest.raises(ValueError, match="layers must be >= 1"):
        uniform_mass(IDS, RELEVANT, 0, measure="authors", causal=False)


def test_examples_in_chunks_read_as_one(monkeypatch):
    whole = uniform_mass(IDS, RELEVANT, 2, measure="companion", causal=True)
    monkeypatch.setattr(uniform, "CHUNK", 1)
    assert torch.equal(uniform_mass(IDS, RELEVANT, 2, measure="companion", causal=True), whole)
