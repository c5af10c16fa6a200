"""SQuAD v1.1 (Rajpurkar et al., 2016): questions on Wikipedia paragraphs, each answered by spans of its paragraph;
the relevant tokens are the answer span (Section 7, Table 1's SQuAD row, Figure 5).

Canonical release: ``train-v1.1.json`` for training and ``dev-v1.1.json`` for testing (published sha256 for both).
Offline only ``dev-v1.1.json`` is there (``$QKOV_DATA_DIR/squad``): its articles are split at random (seeded) into
``test_fraction`` of the articles for testing and the rest for training, so that no paragraph is in both.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .registry import DataError, canonical_file, not_found, offline_file, read_json


@dataclass(frozen=True)
class Question:
    """One question: its article's title, the paragraph, the question and every gold answer with its character
    offset in the paragraph (the first answer is the one trained on and read for relevance)."""

    article: str
    context: str
    question: str
    answers: tuple[str, ...]
    starts: tuple[int, ...]


def _questions(path: Path) -> list[list[Question]]:
    """Every question of a SQuAD v1.1 file, grouped by article; one error naming the file when its structure or an
    answer offset is wrong."""
    data = read_json(path)
    if not isinstance(data, dict) or data.get("version") != "1.1" or not isinstance(data.get("data"), list):
        raise DataError(f"{path} is not a SQuAD v1.1 file (no version 1.1 and data list); copy or download it again")
    articles = []
    try:
        for article in data["data"]:
            qs = []
            for para in article["paragraphs"]:
                context = para["context"]
                for qa in para["qas"]:
                    answers = tuple(a["text"] for a in qa["answers"])
                    starts = tuple(int(a["answer_start"]) for a in qa["answers"])
                    if not answers:
                        raise DataError(f"{path}: question {qa['id']} has no answer; the file is not SQuAD v1.1")
                    for text, start in zip(answers, starts):
                        if context[start:start + len(text)] != text:
                            raise DataError(f"{path}: question {qa['id']}'s answer {text!r} is not at offset {start} "
                                            f"of its paragraph; the file is corrupt")
                    qs.append(Question(article["title"], context, qa["question"], answers, starts))
            articles.append(qs)
    except (KeyError, TypeError) as err:
        raise DataError(f"{path} lacks a SQuAD field ({type(err).__name__}: {err}); copy or download it again") \
            from None
    return articles


def _flat(articles: list[list[Question]]) -> list[Question]:
    return [q for qs in articles for q in qs]


def _split_by_article(path: Path, test_fraction: float, seed: int) -> tuple[dict[str, list[Question]], dict]:
    articles = _questions(path)
    n_test = int(round(test_fraction * len(articles)))
    if not 0 < n_test < len(articles):
        raise DataError(f"{path} has {len(articles)} article(s): too few to hold out {test_fraction:.0%} of them")
    test_ids = set(np.random.default_rng(seed).permutation(len(articles))[:n_test].tolist())
    info = {"source": "offline copy of dev-v1.1.json, split by article",
            "split": f"{n_test} of {len(articles)} articles for testing (seed {seed}), the rest for training"}
    return {"train": _flat([a for i, a in enumerate(articles) if i not in test_ids]),
            "test": _flat([a for i, a in enumerate(articles) if i in test_ids])}, info


def load(download: bool = False, test_fraction: float = 0.2, seed: int = 0
         ) -> tuple[dict[str, list[Question]], dict]:
    """Train and test questions and a provenance record: the offline dev file split by article first, else the
    canonical train and dev files from the cache (downloaded when ``download``); one clear error when neither is
    there."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1) (got {test_fraction!r})")
    offline = offline_file("squad/dev-v1.1.json")
    if offline is not None:
        return _split_by_article(offline, test_fraction, seed)
    train_path = canonical_file("squad", "train-v1.1.json", download)
    dev_path = canonical_file("squad", "dev-v1.1.json", download)
    if train_path is None or dev_path is None:
        raise not_found("squad")
    info = {"source": "canonical release", "train": "train-v1.1.json", "test": "dev-v1.1.json"}
    return {"train": _flat(_questions(train_path)), "test": _flat(_questions(dev_path))}, info
