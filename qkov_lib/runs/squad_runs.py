"""Section 7's SQuAD row (Table 1) and Figure 5: a GPT-style decoder trained from scratch to generate the answer to
a question about a paragraph window, baseline against faster QK (all seeds at once); per seed, exact match and F1
of the greedy answers, and MRTA, AC, ACMC, sufficiency and comprehensiveness of the attention rollout from the
position that starts the answer onto the window, the gold answer span being the relevant tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..data import squad
from ..data.squad import Example, QAEncoded
from ..data.text import Vocab, seeded_rows
from ..metrics.qa import exact_match, f1_score
from ..metrics.rationale import faithfulness, mass_metrics, readout_attention
from ..models.decoder import DecoderConfig, decode, greedy, init_decoder, next_token_logits
from .real_data import RealRun, Task, fit, run_all
from .real_setup import RealSetup

QA_METRICS = ("F1", "EM", "MRTA", "AC", "ACMC", "sufficiency", "comprehensiveness")
OUTPUTS = ("vocabulary", "window")


@dataclass(frozen=True, kw_only=True)
class SquadSetup(RealSetup):
    """The SQuAD chapter's setup: the real-data one, always with MLP and residual (a GPT block), its length set by
    the window, <q>, the question and <a>; plus the window and cut sizes, the held-out share of articles, and what
    the answer is scored over (the whole vocabulary, or the window's tokens and <eos>)."""

    window: int  # paragraph tokens around the answer
    max_question: int  # question tokens kept
    max_answer: int  # answers longer than this are left out
    test_fraction: float  # the share of articles held out for testing
    output: str  # what the answer is scored over: "vocabulary" or "window"
    init: str = "normal"  # how the decoder's weights start (models.decoder.INITS); the paper states none
    max_len: int = field(init=False, default=0)  # window + question + <q> + <a>
    mlp: bool = field(init=False, default=True)  # a GPT block
    residual: bool = field(init=False, default=True)  # a GPT block

    def __post_init__(self) -> None:
        for name in ("window", "max_question", "max_answer"):
            if not getattr(self, name) >= 1:
                raise ValueError(f"{name} must be an integer >= 1 (got {getattr(self, name)!r})")
        object.__setattr__(self, "max_len", self.window + self.max_question + 2)
        super().__post_init__()
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"test_fraction must lie in (0, 1) (got {self.test_fraction!r})")
        if self.output not in OUTPUTS:
            raise ValueError(f"output must be 'vocabulary' or 'window' (got {self.output!r})")


@dataclass
class PreparedQA:
    """Encoded train and test questions, the test examples (for scoring), the vocabulary, the trivial baseline's
    scores and a provenance record."""

    train: QAEncoded
    test: QAEncoded
    test_examples: list[Example]
    vocab: Vocab
    baseline: dict[str, float]
    info: dict[str, Any]


def fixed_span_baseline(
    train: list[Example], test: list[Example], max_answer: int, n_select: int = 2000
) -> dict[str, float]:
    """The trivial baseline: the window span of a fixed start and length with the best mean F1 on (an evenly spaced
    ``n_select`` of) the training examples, applied to the test examples; its start, length, EM and F1 (percent)."""
    window = max(len(e.context) for e in train)
    train = train[:: max(1, len(train) // n_select)]

    def mean_f1(data: list[Example], start: int, length: int) -> float:
        return float(np.mean([f1_score(e.text(start, min(start + length, len(e.context))), e.golds) for e in data]))

    best = max(((s, n) for s in range(window) for n in range(1, max_answer + 1)), key=lambda sn: mean_f1(train, *sn))
    start, length = best
    preds = [e.text(start, min(start + length, len(e.context))) for e in test]
    return {
        "start": start,
        "length": length,
        "EM": 100 * float(np.mean([exact_match(p, e.golds) for p, e in zip(preds, test)])),
        "F1": 100 * float(np.mean([f1_score(p, e.golds) for p, e in zip(preds, test)])),
    }


def _subset(data: list[Example], n: int | None, seed: int) -> list[Example]:
    """A seeded random subset of n examples (None: all), order kept."""
    return [data[i] for i in seeded_rows(len(data), n, seed)]


def prepare(s: SquadSetup) -> PreparedQA:
    """Load (offline split by article, or the canonical files), cut windows, subsample as the profile says, build
    the vocabulary on train, encode, and score the trivial fixed-span baseline."""
    splits, info = squad.load(download=s.download, test_fraction=s.test_fraction, seed=s.data_seed)
    cut = dict(window=s.window, max_question=s.max_question, max_answer=s.max_answer)
    train, long_train = squad.examples(splits["train"], **cut, seed=s.data_seed)
    test, long_test = squad.examples(splits["test"], **cut, seed=s.data_seed + 1)
    train, test = _subset(train, s.max_train, s.data_seed), _subset(test, s.max_test, s.data_seed)
    vocab = squad.vocabulary(train, s.min_freq)
    baseline = fixed_span_baseline(train, test, s.max_answer)
    info = dict(
        info,
        **{
            "train questions": len(train),
            "test questions": len(test),
            f"questions left out for an answer over {s.max_answer} tokens": long_train + long_test,
            "vocabulary": len(vocab),
        },
    )
    return PreparedQA(
        squad.encode(train, vocab, s.max_answer), squad.encode(test, vocab, s.max_answer), test, vocab, baseline, info
    )


def baseline_table(baseline: dict[str, float]) -> pd.DataFrame:
    """The trivial baseline's one row: the fixed span (start and length in window tokens), its EM and F1 (%)."""
    return pd.DataFrame(
        [
            {
                "predictor": "fixed span of the window",
                "start": int(baseline["start"]),
                "length": int(baseline["length"]),
                "EM": round(baseline["EM"], 1),
                "F1": round(baseline["F1"], 1),
            }
        ]
    ).set_index("predictor")


def model_config(data: PreparedQA, s: SquadSetup) -> DecoderConfig:
    return DecoderConfig(
        vocab=len(data.vocab),
        max_len=data.train.ids.shape[1] + s.max_answer + 1,
        d_model=s.d_model,
        n_heads=s.n_heads,
        d_head=s.d_head,
        n_layers=s.n_layers,
        d_mlp=s.d_mlp,
        activation=s.activation,
        biases=s.biases,
        init=s.init,
    )


def allowed_tokens(ids: torch.Tensor, vocab: Vocab, s: SquadSetup) -> torch.Tensor | None:
    """What the answer may be made of: the window's tokens and <eos> (``output = "window"``), or None, the whole
    vocabulary (``"vocabulary"``)."""
    if s.output == "vocabulary":
        return None
    return squad.window_tokens(ids, vocab.stoi["<q>"], vocab.stoi["<eos>"], s.window)


def _answer_loss(
    params: dict[str, torch.Tensor],
    cfg: DecoderConfig,
    ids: torch.Tensor,
    targets: torch.Tensor,
    answer_id: int,
    allowed: torch.Tensor | None,
    smoothing: float = 0.0,
) -> torch.Tensor:
    """Mean cross-entropy per seed of the answer tokens and <eos>, each predicted from the position before it,
    over the vocabulary or over the ``allowed`` tokens [S, B, K], with ``smoothing`` as label smoothing."""
    start = (ids == answer_id).int().argmax(-1)  # [S, B], the <a> position
    rows = (start[..., None] + torch.arange(targets.shape[-1], device=ids.device)).clamp(max=ids.shape[-1] - 1)
    logits = next_token_logits(params, decode(params, cfg, ids)[0], rows, allowed)
    if allowed is None:
        classes = targets
    else:  # each target's place among the allowed tokens; padding (weight 0) points at <eos>, a finite logit
        classes = torch.where(targets != 0, squad.token_slots(allowed, targets), allowed.shape[-1] - 1)
    nll = torch.nn.functional.cross_entropy(
        logits.flatten(0, 2), classes.flatten(), reduction="none", label_smoothing=smoothing
    )
    weights = (targets != 0).float().flatten()
    return (nll * weights).view_as(targets).sum((1, 2)) / (targets != 0).sum((1, 2)).clamp(min=1)


def train_condition(
    data: PreparedQA, s: SquadSetup, qk_mult: float, device: torch.device, progress: bool = True, desc: str = "training"
) -> tuple[dict[str, torch.Tensor], pd.DataFrame]:
    """One decoder per seed, trained by ``real_data.fit`` on the answer tokens; returns the parameters and the
    training answer NLL curve."""
    cfg, answer_id = model_config(data, s), data.vocab.stoi["<a>"]
    params = init_decoder(cfg, list(s.seeds), device)

    def loss_fn(prm, x, y, smoothing=0.0):
        return _answer_loss(prm, cfg, x, y, answer_id, allowed_tokens(x, data.vocab, s), smoothing)

    smoothed = (lambda prm, x, y: loss_fn(prm, x, y, s.label_smoothing)) if s.label_smoothing else None
    curve = fit(
        params,
        loss_fn,
        data.train.ids.to(device),
        data.train.targets.to(device),
        s,
        qk_mult,
        progress,
        desc,
        probe=512,
        chunk=128,
        train_loss=smoothed,
    )
    return params, curve


def answer_text(tokens: list[int], example: Example, vocab: Vocab) -> str:
    """A generated answer as text: the paragraph's own characters where the tokens (up to <eos>) are a span of the
    window, else the words joined by spaces. A token of the window reads as the window's word at its first
    position (so an <unk> of the window reads as that word)."""
    eos = vocab.stoi["<eos>"]
    window = vocab.ids(example.context)
    words = [
        example.context[window.index(t)] if t in window else vocab.itos[t]
        for t in (tokens[: tokens.index(eos)] if eos in tokens else tokens)
    ]
    n = len(words)
    for start in range(len(example.context) - n + 1):
        if n and example.context[start : start + n] == words:
            return example.text(start, start + n)
    return " ".join(words)


@torch.no_grad()
def evaluate_condition(
    params: dict[str, torch.Tensor], data: PreparedQA, s: SquadSetup
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Per seed: EM and F1 of the greedy answers; MRTA, AC, ACMC (attention rollout from <a> onto the window, the
    gold answer's first token's probability as the true-class probability), sufficiency and comprehensiveness
    (erasing window tokens only). Also each question's relevant mass and gold probability [S, N] for Figure 5."""
    cfg, dev, test = model_config(data, s), params["embed"].device, data.test
    q_id, eos = data.vocab.stoi["<q>"], data.vocab.stoi["<eos>"]
    answers: list[torch.Tensor] = []
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("mass", "prob", "suff", "comp")}
    for i in range(0, test.prompts.shape[0], s.eval_batch):
        prompts = test.prompts[i : i + s.eval_batch].to(dev)
        width = max(int((prompts != 0).sum(-1).max()), 1)
        prompts, rel = prompts[:, :width], test.relevant[i : i + s.eval_batch, :width].to(dev)
        allowed = allowed_tokens(prompts, data.vocab, s)  # of the full window, also when words are erased
        answers.append(greedy(params, cfg, prompts, s.max_answer + 1, eos, allowed).cpu())
        last = (prompts != 0).sum(-1) - 1

        def predict(ids: torch.Tensor, allowed: torch.Tensor | None = allowed) -> torch.Tensor:
            ends = (ids != 0).sum(-1) - 1  # the <a> position, wherever erasure moved it
            hidden = decode(params, cfg, ids)[0]
            return torch.softmax(next_token_logits(params, hidden, ends[..., None], allowed)[:, :, 0], -1)

        hidden, attns = decode(params, cfg, prompts)
        S = hidden.shape[0]
        top_row = attns[-1].gather(3, last[None, :, None, None, None].expand(S, -1, cfg.n_heads, 1, width))
        att = readout_attention([*attns[:-1], top_row], prompts, s.identity_weight)
        probs = torch.softmax(next_token_logits(params, hidden, last[:, None], allowed)[:, :, 0], -1)
        gold = test.targets[i : i + s.eval_batch, :1].to(dev)
        gold = (gold if allowed is None else squad.token_slots(allowed, gold))[:, 0]
        parts["mass"].append((att * rel).sum(-1))
        parts["prob"].append(probs.gather(-1, gold.expand(S, -1)[..., None]).squeeze(-1))
        window = torch.arange(width, device=dev) < (prompts == q_id).int().argmax(-1, keepdim=True)
        suff, comp = faithfulness(
            predict, prompts.expand(S, -1, -1), att, s.k_percents, s.erase, full=probs, words=window.expand(S, -1, -1)
        )
        parts["suff"].append(suff)
        parts["comp"].append(comp)
    cat = {k: torch.cat(v, dim=1).cpu() for k, v in parts.items()}
    tokens = torch.cat(answers, dim=1)
    rows = []
    for i, seed in enumerate(s.seeds):
        texts = [answer_text(tokens[i, j].tolist(), e, data.vocab) for j, e in enumerate(data.test_examples)]
        masses = mass_metrics(cat["mass"][i : i + 1], cat["prob"][i : i + 1], s.threshold, s.confidence)
        rows.append(
            {
                "seed": seed,
                "F1": 100 * float(np.mean([f1_score(t, e.golds) for t, e in zip(texts, data.test_examples)])),
                "EM": 100 * float(np.mean([exact_match(t, e.golds) for t, e in zip(texts, data.test_examples)])),
                **{k: float(v[0]) for k, v in masses.items()},
                "sufficiency": float(cat["suff"][i].mean()),
                "comprehensiveness": float(cat["comp"][i].mean()),
            }
        )
    return pd.DataFrame(rows), {"mass": cat["mass"].numpy(), "prob_true": cat["prob"].numpy()}


def run_conditions(data: PreparedQA, s: SquadSetup, device: torch.device, progress: bool = True) -> RealRun:
    """Baseline and faster QK side by side in two processes on the CPU (one torch thread each)."""
    return run_all(data, [s], device, progress, Task(train_condition, evaluate_condition))[0]
