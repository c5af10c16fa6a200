"""SQuAD v1.1 (Rajpurkar et al., 2016): questions on Wikipedia paragraphs, each answered by spans of its paragraph;
the relevant tokens are the answer span (Section 7, Table 1's SQuAD row, Figure 5).

Canonical release: ``train-v1.1.json`` for training and ``dev-v1.1.json`` for testing (published sha256 for both).
Offline only ``dev-v1.1.json`` is there (``$QKOV_DATA_DIR/squad``): its articles are split at random (seeded) into
``test_fraction`` of the articles for testing and the rest for training, so that no paragraph is in both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .registry import DataError, canonical_file, not_found, offline_file, read_json
from .text import Vocab


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
                        if context[start : start + len(text)] != text:
                            raise DataError(
                                f"{path}: question {qa['id']}'s answer {text!r} is not at offset {start} "
                                f"of its paragraph; the file is corrupt"
                            )
                    qs.append(Question(article["title"], context, qa["question"], answers, starts))
            articles.append(qs)
    except (KeyError, TypeError) as err:
        raise DataError(
            f"{path} lacks a SQuAD field ({type(err).__name__}: {err}); copy or download it again"
        ) from None
    return articles


def _flat(articles: list[list[Question]]) -> list[Question]:
    return [q for qs in articles for q in qs]


def _split_by_article(path: Path, test_fraction: float, seed: int) -> tuple[dict[str, list[Question]], dict]:
    articles = _questions(path)
    n_test = round(test_fraction * len(articles))
    if not 0 < n_test < len(articles):
        raise DataError(f"{path} has {len(articles)} article(s): too few to hold out {test_fraction:.0%} of them")
    test_ids = set(np.random.default_rng(seed).permutation(len(articles))[:n_test].tolist())
    info = {
        "source": "offline copy of dev-v1.1.json, split by article",
        "split": f"{n_test} of {len(articles)} articles for testing (seed {seed}), the rest for training",
    }
    return {
        "train": _flat([a for i, a in enumerate(articles) if i not in test_ids]),
        "test": _flat([a for i, a in enumerate(articles) if i in test_ids]),
    }, info


def load(download: bool = False, test_fraction: float = 0.2, seed: int = 0) -> tuple[dict[str, list[Question]], dict]:
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


TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Lower-cased word and punctuation tokens of ``text`` and each token's character span in it."""
    found = list(TOKEN.finditer(text))
    return [m.group().lower() for m in found], [m.span() for m in found]


@dataclass(frozen=True)
class Example:
    """A question made ready to encode: a window of its paragraph's tokens that holds the first gold answer, their
    character spans in the paragraph, the question's tokens, the answer's token span [start, end) in the window,
    and what scoring needs (the paragraph and every gold answer)."""

    context: list[str]
    spans: list[tuple[int, int]]
    question: list[str]
    answer: tuple[int, int]
    paragraph: str
    golds: tuple[str, ...]

    def text(self, start: int, end: int) -> str:
        """The paragraph's text under window tokens [start, end) (empty when the span is empty)."""
        return self.paragraph[self.spans[start][0] : self.spans[end - 1][1]] if end > start else ""


def examples(
    questions: list[Question], window: int, max_question: int, max_answer: int, seed: int
) -> tuple[list[Example], int]:
    """Every question whose first answer has at most ``max_answer`` tokens, its paragraph cut to a window of
    ``window`` tokens placed at random (seeded) among the placements that hold the answer, so that the answer's
    position in the window says nothing; the question cut to ``max_question`` tokens. Returns the examples and how
    many questions were left out for a long answer."""
    rng = np.random.default_rng(seed)
    out, skipped = [], 0
    for q in questions:
        tokens, spans = tokenize(q.context)
        first, last = q.starts[0], q.starts[0] + len(q.answers[0])
        inside = [i for i, (s, e) in enumerate(spans) if s < last and e > first]
        if not inside or len(inside) > max_answer:
            skipped += 1
            continue
        a, b = inside[0], inside[-1] + 1
        lo, hi = max(0, b - window), max(0, min(a, len(tokens) - window))
        start = int(rng.integers(lo, hi + 1))
        question = tokenize(q.question)[0][:max_question]
        out.append(
            Example(
                tokens[start : start + window],
                spans[start : start + window],
                question,
                (a - start, b - start),
                q.context,
                q.answers,
            )
        )
    return out, skipped


SPECIALS = ("<q>", "<a>", "<eos>")  # before the question, before the answer, after it


@dataclass
class QAEncoded:
    """Examples as decoder input. ``ids`` [N, L]: window, <q>, question, <a>, answer, <eos>, padding; ``rows`` and
    ``targets`` [N, A]: the positions whose next token is an answer token or <eos>, and those tokens (``weights``
    1.0 where real, 0.0 where the answer is shorter); ``prompts`` [N, P]: the input up to <a> (its last token);
    ``relevant`` [N, P]: the window tokens of the first gold answer."""

    ids: torch.Tensor
    rows: torch.Tensor
    targets: torch.Tensor
    weights: torch.Tensor
    prompts: torch.Tensor
    relevant: torch.Tensor


def vocabulary(train: list[Example], min_freq: int) -> Vocab:
    """The words of the training windows, questions and answers seen ``min_freq`` times, after the specials."""
    texts = [e.context + e.question for e in train]
    return Vocab(texts, min_freq, extra=SPECIALS)


def window_tokens(ids: torch.Tensor, q_id: int, eos: int, window: int) -> torch.Tensor:
    """The tokens an answer may be made of, [..., window + 1]: each distinct token of the window (the ids before
    ``<q>``, at their first position; 0 elsewhere), then ``<eos>``. ``ids`` [..., L] encoded as ``encode`` does."""
    win = ids[..., :window]
    win = win * (torch.arange(win.shape[-1], device=ids.device) < (ids == q_id).int().argmax(-1, keepdim=True))
    earlier = torch.ones(win.shape[-1], win.shape[-1], dtype=torch.bool, device=ids.device).tril(-1)
    win = win.masked_fill(((win[..., :, None] == win[..., None, :]) & earlier).any(-1), 0)
    return torch.cat([win, torch.full_like(win[..., :1], eos)], dim=-1)


def token_slots(allowed: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Each token's place among the ``allowed`` tokens [..., K] (the first match; 0 where it is not allowed), for
    tokens [..., A]."""
    return (allowed[..., None, :] == tokens[..., None]).int().argmax(-1)


def encode(data: list[Example], vocab: Vocab, max_answer: int) -> QAEncoded:
    """``QAEncoded`` for ``data``; answers longer than ``max_answer`` tokens are cut (``examples`` leaves them
    out already)."""
    q, a, eos = (vocab.stoi[s] for s in SPECIALS)
    prompts = [[*vocab.ids(e.context), q, *vocab.ids(e.question), a] for e in data]
    answers = [[*vocab.ids(e.context[e.answer[0] : e.answer[1]])[:max_answer], eos] for e in data]
    P, A = max(map(len, prompts)), max_answer + 1
    n = len(data)
    ids, prompt_ids = torch.zeros(n, P + A, dtype=torch.long), torch.zeros(n, P, dtype=torch.long)
    rows, targets, weights = torch.zeros(n, A, dtype=torch.long), torch.zeros(n, A, dtype=torch.long), torch.zeros(n, A)
    relevant = torch.zeros(n, P, dtype=torch.bool)
    for i, (prompt, answer, e) in enumerate(zip(prompts, answers, data)):
        k, m = len(prompt), len(answer)
        ids[i, : k + m] = torch.tensor(prompt + answer)
        prompt_ids[i, :k] = torch.tensor(prompt)
        rows[i] = torch.arange(k - 1, k - 1 + A).clamp(max=k + m - 2)
        targets[i, :m], weights[i, :m] = torch.tensor(answer), 1.0
        relevant[i, e.answer[0] : e.answer[1]] = True
    return QAEncoded(ids, rows, targets, weights, prompt_ids, relevant)
