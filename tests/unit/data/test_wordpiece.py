"""bert-base-uncased WordPieces (``qkov_lib.data.wordpiece``): known splits and ids of the published tokeniser, a
post framed by [CLS] and [SEP], each word's relevance carried to its pieces."""

import numpy as np
import pytest

from qkov_lib.data import wordpiece
from qkov_lib.data.text import TextSplit


@pytest.mark.parametrize(
    ("word", "pieces"),
    [
        ("embeddings", ["em", "##bed", "##ding", "##s"]),  # the tokeniser's documented example
        ("tokenization", ["token", "##ization"]),
        ("Hello", ["hello"]),  # lower-cased
        ("Café", ["cafe"]),  # accents stripped
        ("don't", ["don", "'", "t"]),  # punctuation split off
        ("<user>", ["<", "user", ">"]),
    ],
)
def test_known_splits(word, pieces):
    assert wordpiece.pieces(word) == pieces


def test_known_ids_of_bert_base_uncased():
    assert wordpiece.ids("hello") == [7592]
    assert wordpiece.ids("don't") == [2123, 1005, 1056]
    assert wordpiece.ids(" ") == []


def test_a_post_is_framed_and_each_piece_is_relevant_as_its_word_was():
    split = TextSplit("test", [["embeddings", "hello"]], np.array([1]), [np.array([0.5, 0.0])])
    [tokens], [relevant] = (f(wordpiece.split_pieces(split)) for f in (lambda s: s.tokens, lambda s: s.relevant))
    assert tokens == ["[CLS]", "em", "##bed", "##ding", "##s", "hello", "[SEP]"]
    assert relevant.tolist() == [0.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0]


def test_words_stay_words_and_an_unknown_choice_is_named():
    splits = {"test": TextSplit("test", [["a"]], np.array([0]), [None])}
    assert wordpiece.tokenised(splits, "words") is splits
    assert wordpiece.tokenised(splits, "wordpiece")["test"].tokens == [["[CLS]", "a", "[SEP]"]]
    with pytest.raises(ValueError, match="tokens must be one of words, wordpiece"):
        wordpiece.tokenised(splits, "bpe")
