"""A training step of the real-data classifiers (Table 1, Table 5): the last layer's attention read through the head
matrices (``models.transformer.readout_heads``) against keys and values formed at every position, as before.

The last layer has one query, the read-out row, so q.(W_K^T x_t) = (W_K q).x_t and sum_t a_t W_V^T x_t =
W_V^T (sum_t a_t x_t): the two big products [S, B T, d] x [d, H d_head] (and their backward) are gone. A step is
forward, backward and the fused AdamW update over every seed (``training.train``, one torch thread), on random ids of
the `default` profile's shapes: 5 seeds, batch 32, up to 64 tokens, the vocabulary sizes of the offline datasets.
Both variants run interleaved in one process, best of ``--repeat``.

Profile of the SVA step before (torch.profiler, self CPU time): the six big batched products ~45%, the copies
einsum makes for their per-head layouts ~20%, zero-filling the embedding's dense gradient ~8%, AdamW ~7%.

Usage: python benchmarks/bench_classifier.py [--steps N] [--repeat N]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import torch

from qkov_lib.models import transformer
from qkov_lib.models.transformer import classify, init_classifier, trim
from qkov_lib.runner.catalog import resolve
from qkov_lib.train.training import train

CHAPTERS = {"hatexplain": (24_994, 3), "sva": (8_983, 2), "hatexplain_layers": (24_994, 3)}  # vocabulary, classes


def per_position_heads(x, queries, blocked, w_q, w_k, w_v):
    """The last layer as before: keys and values of every position, then attention of the read-out row."""
    q, k, v = (torch.einsum("sbtd,shde->sbhte", t, w) for t, w in ((queries, w_q), (x, w_k), (x, w_v)))
    attn = transformer.scaled_attention(q @ k.transpose(-1, -2), blocked, w_q.shape[-1])
    return attn, attn @ v


def ms_per_step(chapter: str, steps: int, heads) -> float:
    """Milliseconds per training step of ``chapter``'s default classifier with ``heads`` as its last layer."""
    setup = replace(resolve(chapter, "default")[1], epochs=1)  # ``steps`` steps
    vocab, classes = CHAPTERS[chapter]
    cfg = setup.model(vocab, classes)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1, vocab, (steps, len(setup.seeds), setup.batch_size, setup.max_len), generator=gen)
    lengths = torch.randint(8, setup.max_len + 1, ids.shape[:-1], generator=gen)
    ids[torch.arange(setup.max_len) >= lengths[..., None]] = 0
    labels = torch.randint(0, classes, ids.shape[:-1], generator=gen)
    params = init_classifier(cfg, list(setup.seeds))

    def loss_fn(prm, x, y):
        logits, _ = classify(prm, cfg, trim(x)[0])
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(1)

    transformer.readout_heads, before = heads, transformer.readout_heads
    try:
        start = time.perf_counter()
        train(
            params,
            loss_fn,
            setup.train_config(setup.qk_mult, steps),
            lambda step: (ids[step], labels[step]),
            lambda prm: np.zeros(len(setup.seeds)),
            list(setup.seeds),
            progress=False,
        )
        return (time.perf_counter() - start) / steps * 1e3
    finally:
        transformer.readout_heads = before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    variants = {"per position (before)": per_position_heads, "readout_heads": transformer.readout_heads}
    print(f"classifier training step, `default` shapes, {args.steps} steps, one torch thread, best of {args.repeat}")
    print(f"{'chapter':18}" + "".join(f"{name + ' ms':>26}" for name in variants) + f"{'faster by':>11}")
    for chapter in CHAPTERS:
        best = dict.fromkeys(variants, float("inf"))
        for _ in range(args.repeat):  # interleaved
            for name, heads in variants.items():
                best[name] = min(best[name], ms_per_step(chapter, args.steps, heads))
        before, after = best.values()
        print(f"{chapter:18}" + "".join(f"{t:>26.1f}" for t in best.values()) + f"{before / after:>10.2f}x")


if __name__ == "__main__":
    main()
