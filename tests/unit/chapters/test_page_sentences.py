"""Sentences a real-data page builds from its setup: how its columns read attention and how it erases tokens, said
once when the run is itself the authors' measurement."""

from qkov_lib.chapters import hatexplain, hatexplain_layers, sva
from qkov_lib.runner.catalog import resolve


def test_the_measurement_sentence_names_both_columns_once_when_they_read_attention_alike():
    official = hatexplain.readings(resolve("hatexplain_layers", "official")[1], hatexplain_layers)
    assert official.startswith('Both columns, "this run" and "this book under official", measure attention')
    assert official.count("the authors' way") == 1 and "96 positions" in official
    default = hatexplain.readings(resolve("hatexplain", "default")[1], hatexplain)
    assert default.count("the companion's way") == 1 and default.count("the authors' way") == 1
    assert "128 positions" in default and "Both columns" not in default


def test_sva_says_how_this_run_erases_tokens_under_each_measurement():
    assert sva.erasure(resolve("sva", "official")[1]) == (
        "this run does the same (7 of the 128 padded positions the read-out attends to most)"
    )
    assert sva.erasure(resolve("sva", "default")[1]) == (
        "this run averages over shares of 1, 5, 10, 20, 50% of each sentence's words"
    )
