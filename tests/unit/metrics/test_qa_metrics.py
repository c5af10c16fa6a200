"""SQuAD v1.1's answer normalisation, exact match and F1, on hand-made cases."""

import pytest

from qkov_lib.metrics.qa import exact_match, f1_score, normalize_answer


@pytest.mark.parametrize(
    "text, normal",
    [
        ("The Cat!", "cat"),
        ("  an  apple,  a day ", "apple day"),
        ("Theatre of the Absurd", "theatre of absurd"),  # "the" only as a word
        ("U.S.-led", "usled"),  # punctuation goes before the split
        ("A", ""),
    ],
)
def test_normalisation(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_and_f1_take_the_best_gold_answer():
    golds = ["Denver Broncos", "the Broncos"]
    assert exact_match("the Denver Broncos.", golds) == 1.0
    assert exact_match("Broncos of Denver", golds) == 0.0
    assert f1_score("Denver Broncos won", golds) == pytest.approx(0.8)  # precision 2/3, recall 1
    assert f1_score("Broncos", golds) == pytest.approx(1.0)  # "the Broncos" normalises to "broncos"
    assert f1_score("Carolina Panthers", golds) == 0.0
    assert f1_score("the the", ["a"]) == 0.0  # nothing left to overlap (SQuAD v1.1 scores 0)
    assert f1_score("Broncos Broncos", ["Broncos"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # counts, not sets
    with pytest.raises(ValueError, match="gold answer"):
        f1_score("x", [])
