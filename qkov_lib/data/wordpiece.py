"""BERT's WordPiece tokens (bert-base-uncased), as the authors' HateXplain notebooks read a post (their
``BertTokenizer``, length 128): each word split into its pieces by the tokeniser model the ``blingfire`` package ships
(``bert_base_tok.bin``: bert-base-uncased's 30,522 pieces; lower-cased, accents stripped, punctuation split off), the
post framed by ``[CLS]`` and ``[SEP]``. A word's relevance is carried to each of its pieces, ``[CLS]`` and ``[SEP]``
relevant to nothing (the authors' notebooks do not show how they carried word rationales to pieces)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from .registry import DataError
from .text import TextSplit

TOKENS = ("words", "wordpiece")  # how a post becomes tokens: its words as the dataset gives them, or WordPieces
MODEL = "bert_base_tok"  # blingfire's bert-base-uncased WordPiece model (.bin: text to ids; .i2w: ids to text)
CLS, SEP, UNK_ID = "[CLS]", "[SEP]", 100  # bert-base-uncased's specials; an unreadable character reads as [UNK]
WORD_LIMIT = 128  # pieces read from one word at most (no word of HateXplain comes near)


@functools.cache
def _models() -> tuple[Any, Any, Any]:
    """blingfire and its two bert-base-uncased models (loaded once per process)."""
    try:
        import blingfire  # lazy: only WordPiece tokens need it
    except ImportError:
        raise DataError(
            "WordPiece tokens need blingfire: pip install -r requirements.txt (it pins blingfire)"
        ) from None
    folder = Path(blingfire.__file__).parent
    return (
        blingfire,
        blingfire.load_model(str(folder / f"{MODEL}.bin")),
        blingfire.load_model(str(folder / f"{MODEL}.i2w")),
    )


@functools.cache
def _piece(piece_id: int) -> str:
    """A piece's entry in bert-base-uncased's vocabulary: its text, with ``##`` before a piece that only continues a
    word (the model's text of a piece drops the ``##``; a piece that starts a word is the one id of its text)."""
    blingfire, _, i2w = _models()
    if piece_id == UNK_ID:
        return "[UNK]"
    text = blingfire.ids_to_text(i2w, np.array([piece_id], dtype=np.uint32), skip_special_tokens=False)
    return text if ids(text) == [piece_id] else f"##{text}"


def ids(word: str) -> list[int]:
    """The bert-base-uncased ids of one word's pieces (none for a word of spaces or control characters)."""
    blingfire, text_to_ids, _ = _models()
    return [int(i) for i in blingfire.text_to_ids(text_to_ids, word, WORD_LIMIT, UNK_ID) if i != 0]


def pieces(word: str) -> list[str]:
    """One word as bert-base-uncased WordPieces (``"unbelievably"`` -> ``["unbeliev", "##ably"]``)."""
    return [_piece(i) for i in ids(word)]


def split_pieces(split: TextSplit) -> TextSplit:
    """Every example of ``split`` as ``[CLS]``, its words' WordPieces, ``[SEP]``; each piece relevant as its word
    was (relevance weights kept as they are: 0/1 or the annotators' mean)."""
    tokens, relevant = [], []  # type: list[list[str]], list[np.ndarray | None]
    for words, rel in zip(split.tokens, split.relevant):
        per_word = [pieces(w) for w in words]
        tokens.append([CLS, *(p for ps in per_word for p in ps), SEP])
        if rel is None:
            relevant.append(None)
            continue
        spread = np.repeat(np.asarray(rel), [len(ps) for ps in per_word])
        relevant.append(np.concatenate([np.zeros(1, spread.dtype), spread, np.zeros(1, spread.dtype)]))
    return TextSplit(split.name, tokens, split.labels, relevant, split.groups)


def tokenised(splits: dict[str, TextSplit], tokens: str) -> dict[str, TextSplit]:
    """The splits as ``tokens`` says (``TOKENS``): unchanged for ``words``, WordPieces for ``wordpiece``."""
    if tokens not in TOKENS:
        raise ValueError(f"tokens must be one of {', '.join(TOKENS)} (got {tokens!r})")
    return splits if tokens == "words" else {name: split_pieces(s) for name, s in splits.items()}
