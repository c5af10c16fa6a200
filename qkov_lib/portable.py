"""Portable arithmetic: the CPU trainings give the same bits on any x86-64 processor (Intel or AMD, with or without
AVX2 / AVX-512), for a given torch wheel. Turn it off with ``QKOV_PORTABLE=0`` in the environment before Python starts.

What differs between processors otherwise (measured on torch 2.13's CPU wheel; ``docs`` in ``SETTINGS``):

- every batched product (einsum, ``@``) is MKL's ``sgemm_batch``, whose code path MKL picks by vendor and instruction
  set: on an AMD CPU one fixed path (``MKL_ENABLE_INSTRUCTIONS`` is ignored there), on an Intel CPU the AVX-512,
  AVX2 or SSE4.2 path. ``MKL_CBWR=COMPATIBLE`` (conditional numerical reproducibility, the SSE2 branch without
  approximate reciprocals) is the one branch MKL honours on both vendors; the AVX2 / AVX512 branches fall back to
  AUTO on an AMD CPU. It also pins MKL's vector maths (``torch.exp`` of large tensors).
- ATen's vectorised kernels (softmax and its backward, log-softmax / cross-entropy, layer norm, the fused AdamW
  step, ``torch.randn`` of 16 or more numbers, so the initial weights too) follow ``torch.backends.cpu.
  get_cpu_capability()``: AVX-512 and AVX2 add in different orders, and DEFAULT (no AVX2) differs from both.
  ``ATEN_CPU_CAPABILITY=default`` is the one level every x86-64 CPU runs.
- oneDNN is not used by these trainings (``ONEDNN_VERBOSE`` lists no primitive), so no oneDNN cap is set.

Every setting is read when torch first computes (ATen's capability on its first query or dispatch, MKL's branch on its
first call), so ``apply`` must run before that, best before ``import torch``. Child processes inherit the
environment: the papermill kernel of the runner, ``engine.run_independent``'s spawned workers and the workers of a
Dask ``LocalCluster`` get the mode from the process that starts them; workers of an external Dask scheduler need it in
their own environment. On other architectures (ARM, Apple silicon) and on a GPU the mode does not apply.
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import MutableMapping
from pathlib import Path

ENV = "QKOV_PORTABLE"
OFF = ("0", "off", "false", "no")
DOC = f"Portable arithmetic (the same bits on any x86-64 CPU) is on; set {ENV}=0 before starting Python to turn it off."

# the mode, as data: variable -> value, each read by torch's libraries when they first compute
SETTINGS: dict[str, str] = {
    "MKL_CBWR": "COMPATIBLE",  # MKL: one code branch on every x86-64 CPU, Intel or AMD
    "ATEN_CPU_CAPABILITY": "default",  # ATen: the kernels without AVX2 / AVX-512, which every x86-64 CPU runs
}
X86_64 = ("x86_64", "amd64")

# MKL's CNR branches (mkl_cbwr.h) as mkl_cbwr_get(MKL_CBWR_ALL) returns them; 0x10000 flags the strict mode
MKL_BRANCHES = {0: "OFF", 1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2",
                9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"}
MKL_STRICT = 0x10000


class PortableModeError(RuntimeError):
    """Torch already computes with other settings than the portable mode asks for."""


def enabled(environ: MutableMapping[str, str] | None = None) -> bool:
    """Whether the mode is on: unless ``QKOV_PORTABLE`` is 0 / off / false / no, on an x86-64 CPU."""
    env = os.environ if environ is None else environ
    return env.get(ENV, "1").strip().lower() not in OFF and applicable()


def applicable() -> bool:
    """The mode concerns x86-64 CPUs (MKL and ATen's x86 kernels); elsewhere it sets nothing."""
    return platform.machine().lower() in X86_64


def apply(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put ``SETTINGS`` into ``environ`` (default ``os.environ``, so that this process and every child it starts
    afterwards computes in the mode), replacing values set before; nothing when the mode is off. Returns what it set.

    Call it before torch computes (best before ``import torch``). Given ``os.environ`` in a process where torch is
    loaded, it checks that torch runs in the mode, and raises PortableModeError naming what differs when it does not
    (torch computed before the call, or another capability was forced)."""
    env = os.environ if environ is None else environ
    if not enabled(env):
        return {}
    env.update(SETTINGS)
    if env is os.environ and "torch" in sys.modules:
        check()
    return dict(SETTINGS)


def check() -> None:
    """Raise PortableModeError when the mode is on but the loaded torch computes with other settings."""
    if not enabled():
        return
    eff = effective()
    wrong = [f"{name} is {eff[name]} (the mode asks for {want})" for name, want in _wanted().items()
             if eff[name] is not None and eff[name] != want]
    if wrong:
        raise PortableModeError(
            "torch already computes outside the portable mode: " + "; ".join(wrong) + ". Its libraries read the "
            "settings once, when torch first computes: import qkov_lib (or call qkov_lib.portable.apply()) before "
            f"anything computes with torch, or restart the kernel; {ENV}=0 turns the mode off.")


def _wanted() -> dict[str, str]:
    """What ``effective`` reports when torch runs in the mode."""
    return {"cpu_capability": SETTINGS["ATEN_CPU_CAPABILITY"].upper(), "mkl_cbwr": SETTINGS["MKL_CBWR"]}


def effective() -> dict[str, str | None]:
    """For a results unit's metadata: whether the mode is on, each of its variables as this process sees it, the
    capability ATen's kernels run at and MKL's CNR branch (None where it cannot be read). Imports torch."""
    import torch
    out: dict[str, str | None] = {"portable": ("on" if enabled() else "off") if applicable() else
                                  f"not applicable ({platform.machine()})",
                                  **{name: os.environ.get(name) for name in SETTINGS},
                                  "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                                  "mkl_cbwr": mkl_branch()}
    return out


def mkl_branch() -> str | None:
    """MKL's CNR branch in this process (OFF, AUTO, COMPATIBLE, ..., with ",STRICT"), read from the MKL that torch
    links statically (its internal ``mkl_serv_cbwr_get``); None where torch has no MKL or does not export it. Reading
    it fixes the branch, like MKL's first call."""
    import torch
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
