"""HateXplain's rationale rule ``mean`` (the authors' metric): relevance weights in [0, 1], the mean of the three
annotators' masks, carried from the loader through encoding to the attention mass and AC; ``union`` and
``majority`` untouched; the official profiles use it."""

import numpy as np
import pytest
import torch

from qkov_lib.chapters import hatexplain as hatexplain_chapter, hatexplain_layers
from qkov_lib.core.chapter import ParameterError, resolve
from qkov_lib.data import hatexplain
from qkov_lib.data.text import TextSplit
from qkov_lib.data.text import READOUT
from qkov_lib.metrics.rationale import mass_metrics, padded_as_readout, relevant_mass
from qkov_lib.models.transformer import classify, init_classifier
from qkov_lib.runs.real_data import evaluate_condition, model_config, prepare

# three annotators of a three-word post: A marked the first word, B the first two, C nothing
A, B = [1, 0, 0], [1, 1, 0]


def test_mean_weighs_each_word_by_the_share_of_the_three_annotators_who_marked_it():
    weights = hatexplain.relevance([A, B], 3, "mean", "x")
    assert weights.dtype.kind == "f" and np.allclose(weights, [2 / 3, 1 / 3, 0])  # C counts as a mask of zeros
    assert hatexplain.relevance([A, B], 3, "union", "x").tolist() == [True, True, False]  # 0/1, unchanged
    assert hatexplain.relevance([A, B], 3, "majority", "x").tolist() == [True, True, False]  # half of two marked
    assert hatexplain.relevance([], 3, "mean", "x") is None  # nobody marked anything: no relevance
    with pytest.raises(hatexplain.DataError, match="4 rationales for 3 annotators"):
        hatexplain.relevance([A, A, A, A], 3, "mean", "x")


def test_the_mass_on_the_mean_is_the_mean_of_the_three_masses_and_ac_reads_it_by_hand():
    attention = torch.tensor([[[0.5, 0.3, 0.2]]])  # [seeds, posts, tokens]
    mean = torch.tensor(hatexplain.relevance([A, B], 3, "mean", "x"), dtype=torch.float32)
    union = torch.tensor(hatexplain.relevance([A, B], 3, "union", "x"))
    # by hand: A's mask takes 0.5, B's 0.8, C's 0; their mean (0.5 + 0.8 + 0) / 3 = 13/30; the union's 0.8
    assert relevant_mass(attention, mean).item() == pytest.approx(13 / 30)
    assert relevant_mass(attention, union).item() == pytest.approx(0.8)
    prob = torch.tensor([[0.9]])
    on_mean = mass_metrics(relevant_mass(attention, mean), prob)
    on_union = mass_metrics(relevant_mass(attention, union), prob)
    assert on_mean["AC"].item() == 0.0 and on_mean["ACMC"].item() == 0.0  # 13/30 is not above 0.5
    assert on_union["AC"].item() == 100.0 and on_union["ACMC"].item() == 100.0  # 0.8 is
    assert on_mean["MRTA"].item() == pytest.approx(100 * 13 / 30)


def split(relevant, name="test"):
    tokens = [["w1", "w2", "w3", "w4"], ["w2", "w3", "w4", "w1"], ["w4", "w1", "w2", "w3"]]
    return TextSplit(name, tokens, np.array([0, 1, 2]), relevant)


def setup(**changes):
    return resolve(hatexplain_chapter, "smoke", {"max_len": 4, "seeds": [0, 1], **changes})[1]


def test_the_weights_reach_the_encoded_test_split_cut_as_the_words_are_and_01_masks_stay_as_they_were():
    weights = [np.array([2 / 3, 1 / 3, 0, 1]), None, np.array([0, 0, 1 / 3, 1])]
    s = setup()  # max_len 4: three words and the read-out token
    data = prepare({"train": split([None] * 3, "train"), "test": split(weights)}, {}, ("a", "b", "c"), s)
    rel = data.test.relevant
    assert rel.dtype == torch.float32 and rel.shape == (3, 4)
    assert torch.allclose(rel, torch.tensor([[2 / 3, 1 / 3, 0, 0], [0, 0, 0, 0], [0, 0, 1 / 3, 0]]))  # 4th word cut
    assert data.test.has_relevance.tolist() == [True, False, True]
    masks = [w if w is None else w > 0 for w in weights]
    plain = prepare({"train": split([None] * 3, "train"), "test": split(masks)}, {}, ("a", "b", "c"), s)
    assert plain.test.relevant.dtype == torch.bool and torch.equal(plain.test.relevant, rel > 0)


def test_evaluated_the_mean_rule_gives_the_mean_of_the_masses_on_each_annotators_mask():
    """End to end through ``evaluate_condition`` (an untrained model, every post measured): the mass of each post
    under ``mean`` is the mean over the three annotators of the mass on each one's own mask."""
    annotators = [
        [np.array([1, 0, 1, 0]), np.array([0, 1, 0, 0]), None],  # post 0: C marked nothing
        [np.array([1, 1, 0, 0]), np.array([1, 0, 0, 1]), np.array([0, 0, 1, 0])],
        [None, None, None],
    ]  # nobody: no attention on rationale words
    s = setup(max_len=8, unannotated="zero")

    def masses(relevant):
        data = prepare({"train": split([None] * 3, "train"), "test": split(relevant)}, {}, ("a", "b", "c"), s)
        params = init_classifier(model_config(data, s), list(s.seeds), torch.device("cpu"))
        return evaluate_condition(params, data, s)[1]["mass"]

    one_each = [masses([post[j] for post in annotators]) for j in range(3)]  # one annotator's mask as relevance
    mean = masses(
        [hatexplain.relevance([m.tolist() for m in post if m is not None], 4, "mean", "x") for post in annotators]
    )
    assert mean.shape == (2, 3)  # every post measured, the unannotated one at mass 0
    assert np.allclose(mean, sum(one_each) / 3, atol=1e-6) and (mean[:, 2] == 0).all()
    skipped = setup(max_len=8)
    first = [post[0] for post in annotators]  # A's masks: none for the last post
    data = prepare({"train": split([None] * 3, "train"), "test": split(first)}, {}, ("a", "b", "c"), skipped)
    params = init_classifier(model_config(data, skipped), [0, 1], torch.device("cpu"))
    assert evaluate_condition(params, data, skipped)[1]["mass"].shape == (2, 2)  # skip: the post without, left out


def test_the_official_profiles_use_the_authors_metric_and_the_others_keep_the_union():
    for chapter in (hatexplain_chapter, hatexplain_layers):
        official = resolve(chapter, "official")[1]
        assert (official.rationale_rule, official.unannotated) == ("mean", "zero")
        for profile in ("smoke", "default", "paper"):
            s = resolve(chapter, profile)[1]
            assert (s.rationale_rule, s.unannotated) == ("union", "skip")
    with pytest.raises(ParameterError, match="unannotated"):
        resolve(hatexplain_chapter, "default", {"unannotated": "drop"})
    assert "share of the three annotators" in hatexplain_chapter.relevance_words(
        resolve(hatexplain_chapter, "official")[1]
    )


def test_evaluated_the_authors_way_attention_is_the_last_padded_rows_and_erasure_counts_padded_positions():
    """End to end through ``evaluate_condition`` with ``measure = "authors"`` (an untrained model): the mass is the
    relevance-weighted attention of the last of ``max_len`` positions of the input padded with the read-out token,
    unmasked, and it differs from the companion's read-out row."""
    masks = [np.array([1, 0, 0, 1]), np.array([0, 1, 1, 0]), None]
    ours, theirs = setup(max_len=8), setup(max_len=8, measure="authors", k_percents=[5.0])
    data = prepare({"train": split([None] * 3, "train"), "test": split(masks)}, {}, ("a", "b", "c"), theirs)
    params = init_classifier(model_config(data, theirs), list(theirs.seeds), torch.device("cpu"))
    rows, arrays = evaluate_condition(params, data, theirs)
    padded = padded_as_readout(data.test.ids, 8, data.vocab.stoi[READOUT])
    attention = classify(params, model_config(data, theirs), padded)[1][-1].mean(-3)[:, :, 0]  # row of position 8
    rel = torch.nn.functional.pad(data.test.relevant, (0, 8 - data.test.relevant.shape[-1]))
    by_hand = relevant_mass(attention, rel)[:, data.test.has_relevance]
    assert np.allclose(arrays["mass"], by_hand.detach().numpy(), atol=1e-6)
    assert not np.allclose(arrays["mass"], evaluate_condition(params, data, ours)[1]["mass"], atol=1e-4)
    assert np.isfinite(rows[["sufficiency", "comprehensiveness"]].to_numpy()).all()
