"""Exact match and F1 of a predicted answer against SQuAD's gold answers, with SQuAD v1.1's answer normalisation
(Rajpurkar et al., 2016): lower case, punctuation removed, the articles a/an/the removed, whitespace collapsed; each
score is the best over the gold answers (Section 7, Table 1's SQuAD column)."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's normalisation, in its order: lower case, drop punctuation, drop articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals some normalised gold answer, else 0.0."""
    return float(any(normalize_answer(prediction) == normalize_answer(g) for g in golds))


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    """The best token-overlap F1 over the gold answers (tokens: the normalised text split on whitespace)."""
    if not golds:
        raise ValueError("a question needs at least one gold answer")
    return max(_f1(prediction, g) for g in golds)
