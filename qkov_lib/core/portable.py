"""Portable arithmetic: the CPU trainings give the same bits on any x86-64 processor with AVX2 and FMA (Intel Core
since 2013, AMD since 2015; with or without AVX-512), for a given torch wheel. Turn it off with ``QKOV_PORTABLE=0`` in
the environment before Python starts; ``QKOV_PORTABLE=x86-64`` extends it to CPUs without AVX2, slower, and then the
bits also depend on the C library's maths functions (glibc's ``expf``, ``logf``, ...), which the AVX2 level does not
call.

What differs between processors otherwise (measured with torch 2.13's CPU wheel, MKL 2024.2, oneDNN 3.12):

- every batched product (einsum, ``@``) is MKL's ``sgemm_batch``, whose code path MKL picks by vendor and instruction
  set: on an AMD CPU one path of its own (``MKL_ENABLE_INSTRUCTIONS`` is ignored there), on an Intel CPU the
  AVX-512, AVX2 or SSE4.2 path, all four different. ``MKL_CBWR=COMPATIBLE`` (conditional numerical reproducibility:
  the SSE2 branch without approximate reciprocals) is the one branch MKL keeps on both vendors; asked for the AVX2 or
  AVX512 branch, MKL on an AMD CPU falls back to AUTO, its own path. It also pins MKL's vector maths (``torch.exp``).
- ATen's vectorised kernels (softmax and its backward, log-softmax / cross-entropy, layer norm, the fused AdamW step,
  ``torch.randn`` of 16 or more numbers, so the initial weights too) follow ``torch.backends.cpu.
  get_cpu_capability()``: the AVX-512, AVX2 and DEFAULT kernels give three different results.
  ``ATEN_CPU_CAPABILITY=avx2`` is the level every CPU with AVX2 runs (on one without, ATen falls back to DEFAULT, and
  ``apply`` warns); ``default`` the level every x86-64 CPU runs, but its softmax, log-softmax and ``randn`` call the
  C library's maths functions (a libm whose ``expf``, ``logf``, ... are one float off changes them; the AVX2 kernels
  do not notice it), so that its bits depend on the libm too.
- oneDNN is not used by these trainings (``ONEDNN_VERBOSE`` lists no primitive), so no oneDNN cap is set; the
  trainings run one torch thread per process already (``workers.run_independent``).
- the compiled engine of the synthetic chapters (``compiled.py``) multiplies through numpy's OpenBLAS, which picks its
  kernels by CPU (on an Intel CPU with AVX-512 its SkylakeX kernels, on this AMD CPU its Haswell ones: different
  bits), and numba compiles it for the host's CPU and features (for an AVX-512 Intel CPU, other code: other bits).
  ``OPENBLAS_CORETYPE=Haswell`` and ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` of a Haswell CPU pin both, at no
  measurable cost.

Every setting is read when torch first computes (ATen's capability on its first query or dispatch, MKL's branch on its
first call), so ``apply`` must run before that, best before ``import torch``. Child processes inherit the
environment: the papermill kernel of the runner, ``engine.run_independent``'s spawned workers and the workers of a
Dask ``LocalCluster`` get the mode from the process that starts them; workers of an external Dask scheduler need it in
their own environment. On other architectures (ARM, Apple silicon) and on a GPU the mode does not apply.

Cost, one thread, against the mode off (CPU time, best of 8, on an AMD EPYC with AVX-512): a HateXplain classifier step
~1.1x, a SQuAD decoder step ~1.7-1.9x (~3x where MKL takes its Intel AVX-512 path), a synthetic engine step 1.4-1.7x
(~2-2.5x on MKL's Intel path): MKL's SSE2 branch is the price; ATen's AVX2 kernels cost nothing against AVX-512's.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import warnings
from collections.abc import Mapping, MutableMapping
from pathlib import Path

ENV = "QKOV_PORTABLE"
OFF = ("0", "off", "false", "no")
ON = ("", "1", "on", "true", "yes")
DOC = (
    f"Portable arithmetic (the same bits on any x86-64 CPU with AVX2) is on; {ENV}=0 before starting Python turns "
    f"it off ({ENV}=x86-64: also on CPUs without AVX2, slower)."
)

# LLVM's features of a Haswell CPU (AVX2 and FMA, no AVX-512): what the compiled engine is compiled for in the mode
HASWELL = (
    "+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+f16c,+fma,+fsgsbase,+fxsr,+lzcnt,+mmx,+movbe,+pclmul,+popcnt,"
    "+sahf,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave,+xsaveopt"
)
# the mode, as data: per level, variable -> value, each read by torch's or numpy's libraries, or by numba, when they
# first compute
LEVELS: dict[str, dict[str, str]] = {
    "avx2": {
        "MKL_CBWR": "COMPATIBLE",  # MKL: one code branch on every x86-64 CPU, Intel or AMD
        "ATEN_CPU_CAPABILITY": "avx2",  # ATen: the AVX2 kernels (every Intel CPU since 2013, AMD since 2015)
        "OPENBLAS_CORETYPE": "Haswell",  # numpy's OpenBLAS (the compiled engine's products): its AVX2 kernels
        "NUMBA_CPU_NAME": "haswell",  # the compiled engine's code: for this CPU and these features, not the host's
        "NUMBA_CPU_FEATURES": HASWELL,
    },
    "x86-64": {
        "MKL_CBWR": "COMPATIBLE",
        "ATEN_CPU_CAPABILITY": "default",  # ATen: the kernels every x86-64 CPU runs (they call libm)
        "OPENBLAS_CORETYPE": "Prescott",  # OpenBLAS's SSE3 kernels
        "NUMBA_CPU_NAME": "x86-64",
        "NUMBA_CPU_FEATURES": "+64bit,+cmov,+cx8,+fxsr,+mmx,+sse,+sse2",
    },
}
DEFAULT_LEVEL = "avx2"
SETTINGS = LEVELS[DEFAULT_LEVEL]
VARIABLES = tuple(sorted({name for level in LEVELS.values() for name in level}))
X86_64 = ("x86_64", "amd64")

# MKL's CNR branches (mkl_cbwr.h) as mkl_cbwr_get(MKL_CBWR_ALL) returns them; 0x10000 flags the strict mode
MKL_BRANCHES = {
    0: "OFF",
    1: "OFF",
    2: "AUTO",
    3: "COMPATIBLE",
    4: "SSE2",
    6: "SSSE3",
    7: "SSE4_1",
    8: "SSE4_2",
    9: "AVX",
    10: "AVX2",
    11: "AVX512_MIC",
    12: "AVX512",
    13: "AVX512_MIC_E1",
    14: "AVX512_E1",
}
MKL_STRICT = 0x10000


class PortableModeError(RuntimeError):
    """Torch already computes with other settings than the portable mode asks for."""


def applicable() -> bool:
    """The mode concerns x86-64 CPUs (MKL and ATen's x86 kernels); elsewhere it sets nothing."""
    return platform.machine().lower() in X86_64


def level(environ: Mapping[str, str] | None = None) -> str | None:
    """The level ``QKOV_PORTABLE`` asks for: avx2 (unset, 1, on), x86-64, or None (0, off, or not an x86-64 CPU)."""
    value = (os.environ if environ is None else environ).get(ENV, "").strip().lower()
    if value in OFF or not applicable():
        return None
    if value in ON:
        return DEFAULT_LEVEL
    if value in LEVELS:
        return value
    raise ValueError(f"{ENV}={value!r}: use 1 (on: CPUs with AVX2), x86-64 (also CPUs without, slower) or 0 (off)")


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the mode is on (``QKOV_PORTABLE`` not 0 / off / false / no, on an x86-64 CPU)."""
    return level(environ) is not None


def settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the mode sets in this environment ({} when off)."""
    lvl = level(environ)
    return dict(LEVELS[lvl]) if lvl else {}


def apply(environ: MutableMapping[str, str] | None = None, strict: bool = True) -> dict[str, str]:
    """Put the mode's variables into ``environ`` (default ``os.environ``, so that this process and every child it
    starts afterwards computes in the mode), replacing values set before; nothing when the mode is off. Returns what it
    set.

    Call it before torch computes (best before ``import torch``). Given ``os.environ`` in a process where torch is
    loaded, it checks that torch runs in the mode, and raises PortableModeError naming what differs when torch
    computed before the call (with ``strict=False`` it warns). On a CPU without AVX2 the avx2 level cannot hold: ATen
    runs its DEFAULT kernels, and it warns (a process that imports torch later finds the same in ``effective``)."""
    env = os.environ if environ is None else environ
    wanted = settings(env)
    env.update(wanted)
    if wanted.get("ATEN_CPU_CAPABILITY") == "avx2" and cpu_flags() and not {"avx2", "fma"} <= cpu_flags():
        warnings.warn(
            f"this CPU has no AVX2: ATen runs its DEFAULT kernels, and the numbers may differ from those of "
            f"CPUs with AVX2 ({ENV}=x86-64 gives every x86-64 CPU the same bits)",
            RuntimeWarning,
            stacklevel=2,
        )
    elif wanted and env is os.environ and "torch" in sys.modules:
        try:
            check()
        except PortableModeError as err:
            if strict:
                raise
            warnings.warn(str(err), RuntimeWarning, stacklevel=2)
    return wanted


def check() -> None:
    """Raise PortableModeError when the mode is on but the loaded torch computes with other settings."""
    wanted = settings()
    if not wanted:
        return
    eff = effective()
    expect = {"cpu_capability": wanted["ATEN_CPU_CAPABILITY"].upper(), "mkl_cbwr": wanted["MKL_CBWR"]}
    if expect["cpu_capability"] == "AVX2" and cpu_flags() and not {"avx2", "fma"} <= cpu_flags():
        del expect["cpu_capability"]  # ATen cannot run AVX2 kernels here: ``apply`` warned
    wrong = [
        f"{name} is {eff[name]} (the mode asks for {want})"
        for name, want in expect.items()
        if eff[name] is not None and eff[name] != want
    ]
    if wrong:
        raise PortableModeError(
            "torch computes outside the portable mode: " + "; ".join(wrong) + ". Torch's libraries read the settings "
            "once, when torch first computes: import qkov_lib (or call qkov_lib.core.portable.apply()) before anything "
            f"computes with torch, or restart the kernel; {ENV}=0 turns the mode off."
        )


def effective() -> dict[str, str | None]:
    """For a results unit's metadata: the mode (its level, off, or not applicable), each of its variables as this
    process sees it, the capability ATen's kernels run at and MKL's CNR branch (None where it cannot be read).
    Imports torch, and fixes both, as torch's first computation would."""
    import torch  # lazy: this module must load before torch (qkov_lib applies the mode first)

    mode = (level() or "off") if applicable() else f"not applicable ({platform.machine()})"
    return {
        "portable": mode,
        **{name: os.environ.get(name) for name in VARIABLES},
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_cbwr": mkl_branch(),
    }


def mkl_branch() -> str | None:
    """MKL's CNR branch in this process (OFF, AUTO, COMPATIBLE, ..., with ",STRICT"), read from the MKL that torch
    links statically (its internal ``mkl_serv_cbwr_get``); None where torch has no MKL or does not export it."""
    import torch  # lazy: as in ``effective``

    lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    try:
        get = ctypes.CDLL(str(lib)).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    value = get(~0)  # MKL_CBWR_ALL
    if value < 0:
        return None
    name = MKL_BRANCHES.get(value & ~MKL_STRICT, f"branch {value & ~MKL_STRICT}")
    return name + (",STRICT" if value & MKL_STRICT else "")


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()
