"""The compiled engine's disk cache: a first run compiles the kernels, the next loads them from numba's cache, and
both give the same bits (two fresh interpreters)."""

import os
import subprocess
import sys

from qkov_lib.core.device import ENGINE_ENV

CACHED_RUN = """
import hashlib, qkov_lib
from qkov_lib.train.backends import train_stack
from qkov_lib.data.synthetic import SyntheticConfig
from qkov_lib.train.counts import count_set, FixedBatches
from qkov_lib.train.stack import Member, RunSpec, StackConfig
from qkov_lib.train.stack_optim import flush_denormals
from qkov_lib.models import AttentionConfig, init_params
from qkov_lib.train.optim import RateSchedule
from qkov_lib.runs.synthetic_runs import synthetic_data
from qkov_lib.core.workers import one_thread
cfg = SyntheticConfig()
counts = count_set(synthetic_data(cfg, [0, 1], 256, 16)[0], cfg.vocab)
digest = hashlib.sha256()
for par in ("FAFO", "FACO", "CAFO", "CACO"):
    members = [Member(s, s, RunSpec(rates=RateSchedule(0.5, qk_mult=3.0), max_steps=200)) for s in (0, 1)]
    start = {k: v.detach() for k, v in init_params(AttentionConfig(par, vocab=cfg.vocab, init="balanced",
                                                                   init_scale=0.3), [0, 1]).items()}
    with one_thread(), flush_denormals():
        out = train_stack(start, members, StackConfig.of(par, target_nll=0, eval_every=50),
                          FixedBatches(counts, members, 32).take, counts.query_ids, progress=False)
    digest.update(repr(out.curves).encode())
    for p in out.params:
        for k in sorted(p):
            digest.update(p[k].numpy().tobytes())
print(digest.hexdigest())
"""


def test_a_freshly_compiled_engine_gives_the_bits_of_its_cached_kernels(tmp_path):
    """The first run on a machine compiles the kernels, the next ones load them from numba's disk cache: both give
    the same parameters and loss curves, bit for bit (a reassociated loss sum once gave other curves on first run)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), ENGINE_ENV: "compiled"}
    fresh, cached = (
        subprocess.run(
            [sys.executable, "-c", CACHED_RUN], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    )
    assert any((tmp_path / "numba").rglob("*.nbc")), "the first run left no cached kernels"
    assert fresh == cached
