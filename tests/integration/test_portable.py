"""The portable arithmetic mode (``qkov_lib.core.portable``): a short real-data training (the classifier with fused AdamW
on random token ids, one step of the SQuAD decoder) gives the same bits under several emulated processors with the
mode on, and different bits without it; the mode reaches spawned workers, Dask workers and papermill kernels.

Each run is a fresh process, since torch's libraries read the settings when torch first computes. The emulated
processors: ATen's kernels at another capability (``ATEN_CPU_CAPABILITY``), MKL limited to AVX2 or SSE4.2
(``MKL_ENABLE_INSTRUCTIONS``, honoured on Intel CPUs only), glibc's maths without AVX2 / FMA (``GLIBC_TUNABLES``)
and, where a C compiler is present, MKL dispatching as on an Intel CPU (a preloaded ``mkl_serv_intel_cpu_true``:
MKL is linked into libtorch and takes its vendor check through the PLT), so that MKL's code path changes on an AMD
CPU too, and another C maths library (glibc's ``expf``, ``logf``, ... preloaded one float up).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from qkov_lib.core import portable
from qkov_lib.core.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(not portable.applicable(), reason="the portable mode concerns x86-64 CPUs")

TRAIN = r"""
import hashlib, json
import numpy as np
from qkov_lib.core import portable
portable.apply()
import torch
from qkov_lib.models.decoder import DecoderConfig, decode, init_decoder, next_token_logits
from qkov_lib.models.transformer import ClassifierConfig, classify, init_classifier, trim
from qkov_lib.train.optim import RateSchedule
from qkov_lib.train.training import TrainConfig, train

torch.set_num_threads(1)
rng = np.random.default_rng(0)
seeds = [0, 1, 2]


def digest(params):
    h = hashlib.sha256()
    for name in sorted(params):
        h.update(name.encode() + params[name].detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def run(params, loss_fn, batches, steps):
    tc = TrainConfig(RateSchedule(1e-3, qk_mult=30.0), batch_size=32, optimizer="adamw", weight_decay=1e-4,
                     max_steps=steps, eval_every=steps)
    train(params, loss_fn, tc, batches, lambda p: np.zeros(len(seeds)), seeds, progress=False)
    return digest(params)


# the classifier at HateXplain's `default` shapes (one layer: the read-out row's attention)
steps, vocab = 30, 3000
ids = rng.integers(1, vocab, (steps, 32, 64))
ids[np.arange(64) >= rng.integers(8, 65, (steps, 32))[..., None]] = 0
ids, labels = torch.from_numpy(ids), torch.from_numpy(rng.integers(0, 3, (steps, 32)))
cfg = ClassifierConfig(vocab=vocab, n_classes=3, max_len=64, d_model=64, n_heads=4, d_head=64)


def loss_fn(prm, x, y):
    logits, _ = classify(prm, cfg, trim(x)[0])
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), y[None].expand(len(seeds), -1),
                                             reduction="none").mean(1)


classifier = run(init_classifier(cfg, seeds), loss_fn, lambda step: (ids[step], labels[step]), steps)

# one step of the SQuAD decoder (6 layers, causal, layer norms): answers of up to 8 tokens after <a> = 2
T, answer = 56, 8
x = rng.integers(3, vocab, (32, T))
lengths = rng.integers(20, T - answer, 32)
x[np.arange(T) >= lengths[:, None] + answer] = 0
x[np.arange(32), lengths] = 2
targets = torch.from_numpy(np.stack([x[i, lengths[i] + 1:lengths[i] + 1 + answer] for i in range(32)]))
x = torch.from_numpy(x)
dcfg = DecoderConfig(vocab=vocab, max_len=T)


def answer_loss(prm, ids, y):
    rows = torch.from_numpy(lengths)[:, None] + torch.arange(answer)
    logits = next_token_logits(prm, decode(prm, dcfg, ids)[0], rows)
    nll = torch.nn.functional.cross_entropy(logits.flatten(0, 2), y.expand(len(seeds), -1, -1).flatten(),
                                            reduction="none").view(len(seeds), -1)
    return (nll * (y != 0).flatten()).sum(1) / (y != 0).sum()


decoder = run(init_decoder(dcfg, seeds), answer_loss, lambda step: (x, targets), 1)
print(json.dumps({"classifier": classifier, "decoder": decoder, **portable.effective()}))
"""

NO_AVX = "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX2,-FMA,-AVX"
# a processor's environment as seen by torch's libraries, emulated on this one
EMULATED = {
    "as is": {},
    "AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "SSE4.2": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "GLIBC_TUNABLES": NO_AVX},
}
# The flags of this CPU that the tests may use; QKOV_TEST_HIDE_CPU_FLAGS (comma-separated, e.g. avx512f) hides some, to
# run the suite as on a CPU without them (a test that needs a hidden flag is skipped, as it is on such a CPU)
HIDDEN_FLAGS = frozenset(os.environ.get("QKOV_TEST_HIDE_CPU_FLAGS", "").replace(",", " ").split())
HOST_FLAGS = portable.cpu_flags() - HIDDEN_FLAGS
HAS_AVX2 = {"avx2", "fma"} <= HOST_FLAGS
FAKE_INTEL = "int mkl_serv_intel_cpu_true(void) { return 1; }\nint mkl_serv_intel_cpu(void) { return 1; }\n"
# another C maths library, crudely: glibc's expf, logf, ... one float up
OTHER_LIBM = """#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#define F(f) float f(float x) { static float (*g)(float); if (!g) g = dlsym(RTLD_NEXT, #f); \\
                               return nextafterf(g(x), 1e30f); }
#define D(f) double f(double x) { static double (*g)(double); if (!g) g = dlsym(RTLD_NEXT, #f); \\
                                 return nextafter(g(x), 1e300); }
F(expf) F(logf) F(log1pf) F(expm1f) F(sinf) F(cosf) F(tanhf) D(exp) D(log) D(log1p) D(expm1) D(sin) D(cos) D(tanh)
"""


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (*portable.VARIABLES, "MKL_ENABLE_INSTRUCTIONS", "GLIBC_TUNABLES", "LD_PRELOAD", portable.ENV)
    }
    return {**env, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]), **extra}


def _python(code: str, extra: dict[str, str], args: list[str] = (), timeout: int = 300) -> dict:
    """Run ``code`` in a fresh interpreter with ``extra`` in its environment; its last line of output, as JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=_env(extra),
        timeout=timeout,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _trainings(settings: dict[str, dict[str, str]]) -> dict[str, dict]:
    with ThreadPoolExecutor(len(settings)) as pool:
        futures = {name: pool.submit(_python, TRAIN, extra) for name, extra in settings.items()}
        return {name: f.result() for name, f in futures.items()}


def _preload(folder: Path, source: str) -> dict[str, str]:
    """LD_PRELOAD of a library built from C ``source`` ({} without a C compiler or off Linux)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or platform.system() != "Linux":
        return {}
    (folder / "lib.c").write_text(source)
    lib = folder / "lib.so"
    if subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(folder / "lib.c"), "-ldl", "-lm"]).returncode:
        return {}
    return {"LD_PRELOAD": str(lib)}


@pytest.fixture(scope="module")
def fake_intel(tmp_path_factory) -> dict[str, str]:
    """MKL told that it runs on an Intel CPU (its vendor check, ``mkl_serv_intel_cpu_true``, preloaded)."""
    return _preload(tmp_path_factory.mktemp("fake_intel"), FAKE_INTEL)


@pytest.fixture(scope="module")
def other_libm(tmp_path_factory) -> dict[str, str]:
    return _preload(tmp_path_factory.mktemp("other_libm"), OTHER_LIBM)


def test_mode_as_data():
    env = {"PATH": "/bin"}
    assert portable.apply(env) == portable.SETTINGS and env == {"PATH": "/bin", **portable.SETTINGS}
    assert {
        k: portable.SETTINGS[k] for k in ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE", "NUMBA_CPU_NAME")
    } == {
        "MKL_CBWR": "COMPATIBLE",
        "ATEN_CPU_CAPABILITY": "avx2",
        "OPENBLAS_CORETYPE": "Haswell",
        "NUMBA_CPU_NAME": "haswell",
    }
    env = {portable.ENV: "0", "ATEN_CPU_CAPABILITY": "avx2"}
    assert portable.apply(env) == {} and env == {portable.ENV: "0", "ATEN_CPU_CAPABILITY": "avx2"}
    assert portable.settings({portable.ENV: "x86-64"})["ATEN_CPU_CAPABILITY"] == "default"
    assert portable.level({portable.ENV: "1"}) == portable.level({}) == "avx2"
    assert not portable.enabled({portable.ENV: "off"}) and portable.enabled({})
    with pytest.raises(ValueError, match="QKOV_PORTABLE='fast'"):
        portable.level({portable.ENV: "fast"})
    assert f"{portable.ENV}=0" in portable.DOC


@pytest.mark.parametrize("level", ["x86-64", "avx2"])
def test_same_bits_on_every_emulated_processor(level, fake_intel, other_libm):
    """Mode on: identical parameters after 30 AdamW steps of the classifier and one decoder step, whatever
    capability, MKL path or glibc variant the processor would otherwise give; the metadata names the mode. At the
    avx2 level, not on the emulated CPU without AVX2 (ATen would run its DEFAULT kernels there), but with another
    C maths library too: its kernels do not call it (the DEFAULT kernels do)."""
    if level == "avx2" and not HAS_AVX2:
        pytest.skip("this CPU has no AVX2")
    settings = dict(EMULATED) if level == "x86-64" else {k: v for k, v in EMULATED.items() if k != "SSE4.2"}
    if fake_intel:
        settings["Intel AVX-512"] = fake_intel
    if other_libm and level == "avx2":
        settings["another libm"] = other_libm
    runs = _trainings(
        {name: {**extra, portable.ENV: level if level == "x86-64" else "1"} for name, extra in settings.items()}
    )
    capability = portable.LEVELS[level]["ATEN_CPU_CAPABILITY"].upper()
    for name, run in runs.items():
        assert (run["portable"], run["cpu_capability"]) == (level, capability), (name, run)
        assert run["mkl_cbwr"] in ("COMPATIBLE", None), (name, run)
    for key in ("classifier", "decoder"):
        assert len({run[key] for run in runs.values()}) == 1, {name: run[key][:12] for name, run in runs.items()}


def test_other_bits_without_the_mode(fake_intel):
    """Mode off: ATen's AVX2 kernels against those without AVX2 (and, where it can be emulated, MKL's Intel path
    against this CPU's) give other parameters: the test above could fail."""
    settings = {
        "default": {portable.ENV: "0", "ATEN_CPU_CAPABILITY": "default"},
        "avx2": {portable.ENV: "0", "ATEN_CPU_CAPABILITY": "avx2"},
    }
    if fake_intel:
        settings["avx2, Intel's MKL path"] = {**settings["avx2"], **fake_intel}
    runs = _trainings(settings)
    if runs["avx2"]["cpu_capability"] != "AVX2":
        pytest.skip("this CPU has no AVX2: ATen runs its default kernels either way")
    assert {run["portable"] for run in runs.values()} == {"off"}
    assert runs["default"]["classifier"] != runs["avx2"]["classifier"]
    assert runs["default"]["decoder"] != runs["avx2"]["decoder"]
    if fake_intel and _vendor() == "AuthenticAMD":  # on an Intel CPU the preload changes nothing
        assert runs["avx2, Intel's MKL path"]["decoder"] != runs["avx2"]["decoder"]


STACK = r"""
import hashlib, json
from qkov_lib.core import portable
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
data = count_set(synthetic_data(cfg, [0, 1], 320, 16)[0], cfg.vocab)
members = [Member(s, s, RunSpec(rates=RateSchedule(0.5, qk_mult=3.0), max_steps=300)) for s in (0, 1)]
start = {k: v.detach() for k, v in init_params(AttentionConfig("FAFO", vocab=cfg.vocab, init="balanced",
                                                               init_scale=0.3), [0, 1]).items()}
with one_thread(), flush_denormals():
    out = train_stack(start, members, StackConfig.of("FAFO", target_nll=0, eval_every=100),
                      FixedBatches(data, members, 32).take, data.query_ids, progress=False)
h = hashlib.sha256()
for p in out.params:
    for k in sorted(p):
        h.update(p[k].numpy().tobytes())
print(json.dumps({"stack": h.hexdigest(), **portable.effective()}))
"""


# Other processors for the compiled engine, emulated by asking numba and OpenBLAS for their code: (numba's CPU name,
# OpenBLAS's core type, the flags the host must have to run that code). Only targets this CPU executes can be asked
# for; the others are skipped with the reason.
TARGETS = {
    "Intel AVX-512": ("skylake-avx512", "SkylakeX", {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}),
    "AVX without FMA": ("sandybridge", "Sandybridge", {"avx", "sse4_2"}),
}


def test_the_compiled_engine_gives_the_same_bits_in_the_mode():
    """The synthetic chapters' compiled engine: this CPU's own choices and numba's code and OpenBLAS's kernels for
    other processors (emulated by asking for them) give different parameters with the mode off, and the same with it
    on (the mode pins both). A target this CPU cannot execute is left out, and said so."""
    runnable = {name: (cpu, core) for name, (cpu, core, needs) in TARGETS.items() if needs <= HOST_FLAGS}
    for name in TARGETS.keys() - runnable.keys():
        print(
            f"left out {name}: this CPU lacks {', '.join(sorted(TARGETS[name][2] - HOST_FLAGS))}, and its code would "
            f"die of an illegal instruction"
        )
    if not runnable:
        pytest.skip(f"this CPU runs none of the emulated targets ({', '.join(TARGETS)})")
    envs = {"this CPU": {}} | {
        name: {"NUMBA_CPU_NAME": cpu, "OPENBLAS_CORETYPE": core} for name, (cpu, core) in runnable.items()
    }
    with ThreadPoolExecutor(2) as pool:
        runs = {
            (name, mode): pool.submit(_python, STACK, {portable.ENV: mode, **env})
            for name, env in envs.items()
            for mode in ("0", "1")
        }
        runs = {key: future.result() for key, future in runs.items()}
    off = {name: runs[name, "0"]["stack"] for name in envs}
    on = {name: runs[name, "1"]["stack"] for name in envs}
    assert len(set(off.values())) > 1, f"without the mode every processor gave the same bits: {off}"
    assert len(set(on.values())) == 1, f"with the mode the processors disagree: {on}"
    assert {runs[name, "1"]["NUMBA_CPU_NAME"] for name in envs} == {"haswell"}


def _vendor() -> str:
    try:
        return next(
            (
                line.split(":")[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("vendor_id")
            ),
            "",
        )
    except OSError:
        return ""


def test_torch_loaded_with_other_settings_is_reported():
    """Torch that computed before the mode was applied: apply() raises, naming the capability it found."""
    out = _python(
        "import json, torch\nnatural = torch.backends.cpu.get_cpu_capability()\n"
        "from qkov_lib.core import portable\ntry:\n    portable.apply(); err = ''\n"
        "except portable.PortableModeError as e:\n    err = str(e)\n"
        "print(json.dumps({'natural': natural, 'err': err}))",
        {},
    )
    if out["natural"] == portable.SETTINGS["ATEN_CPU_CAPABILITY"].upper() or not HAS_AVX2:  # (no AVX2: a warning)
        assert out["err"] == ""
    else:
        assert f"cpu_capability is {out['natural']}" in out["err"] and portable.ENV in out["err"]


REACH = r"""
import json, sys
from qkov_lib.core import portable
portable.apply()
from qkov_lib.core.workers import run_independent
seen = {"spawned workers": run_independent(portable.effective, [(), ()], 2)}
if sys.argv[1] == "all":
    from qkov_lib.runs.sweep import dask_client
    with dask_client(workers=1) as client:
        seen["Dask LocalCluster worker"] = [client.submit(portable.effective, pure=False).result()]
    import nbformat, papermill
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import json\nfrom qkov_lib.core import portable\nprint(json.dumps(portable.effective()))")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    done = papermill.execute_notebook(nb, None, kernel_name="python3", progress_bar=False,
                                      extra_arguments=["--IPKernelApp.log_level=ERROR"])
    seen["papermill kernel"] = [json.loads(done.cells[0].outputs[0]["text"])]
print(json.dumps(seen))
"""


def test_reaches_every_process():
    """The settings the parent applies reach the workers of ``workers.run_independent`` (spawned), a Dask
    LocalCluster's worker and papermill's kernel (the runner's way to run a chapter)."""
    pytest.importorskip("distributed")
    pytest.importorskip("papermill")
    seen = _python(REACH, {}, args=["all"])
    assert set(seen) == {"spawned workers", "Dask LocalCluster worker", "papermill kernel"}
    for where, reports in seen.items():
        for eff in reports:
            assert (eff["portable"], eff["cpu_capability"], eff["mkl_cbwr"]) == (
                "avx2",
                "AVX2" if HAS_AVX2 else "DEFAULT",
                "COMPATIBLE",
            ), (where, eff)


def test_off_reaches_workers_too():
    """With QKOV_PORTABLE=0 the workers compute with MKL's default branch (so the test above could fail)."""
    for eff in _python(REACH, {portable.ENV: "0"}, args=["spawn"])["spawned workers"]:
        assert eff["portable"] == "off" and eff["mkl_cbwr"] in ("OFF", None), eff


def test_this_machine_reproduces_the_committed_reference(smoke_book):
    """The smoke real-data chapters' tables (run by the session's smoke book, in portable mode) and the short
    trainings give the sha256 committed in tests/expected/portable.json: on any x86-64 machine with AVX2, the same
    bits. A deliberate change regenerates the file (``make portable-reference``)."""
    from portable_reference import EXPECTED, table_digests, training_digests

    expected = json.loads(EXPECTED.read_text())
    got = {"tables": table_digests(smoke_book / "data" / "results" / "smoke"), "trainings": training_digests()}
    differ = [
        f"{kind} {name}"
        for kind in expected
        for name in expected[kind] | got[kind]
        if expected[kind].get(name) != got[kind].get(name)
    ]
    assert not differ, (
        f"{len(differ)} result(s) differ from the committed reference: {', '.join(differ)}; if the "
        "change is deliberate, run `make portable-reference` and commit tests/expected/portable.json"
    )
