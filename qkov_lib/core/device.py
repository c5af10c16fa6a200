"""Device choice (CUDA, then MPS, then CPU; QKOV_DEVICE forces one), which engine trains the synthetic stacks
(QKOV_ENGINE), how many worker processes (QKOV_WORKERS), and a description of the environment."""

from __future__ import annotations

import hashlib
import os
import platform
import re

import numpy
import torch

ENV_VAR = "QKOV_DEVICE"
WORKERS_ENV = "QKOV_WORKERS"
ENGINE_ENV = "QKOV_ENGINE"
CHOICES = ("cpu", "cuda", "mps")
BACKENDS = ("compiled", "torch")


def _available(name: str) -> bool:
    if name == "cuda":
        return torch.cuda.is_available()
    if name == "mps":
        return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    return name == "cpu"


def pick_device() -> torch.device:
    """CUDA when present, else MPS, else CPU; the environment variable QKOV_DEVICE overrides the choice."""
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced:
        if forced not in CHOICES:
            raise ValueError(f"{ENV_VAR}={forced!r} is not a device; allowed: {', '.join(CHOICES)} (or unset it)")
        if not _available(forced):
            raise RuntimeError(
                f"{ENV_VAR}={forced!r} was asked for but is not available here; unset {ENV_VAR} or set it to 'cpu'"
            )
        return torch.device(forced)
    return torch.device(next(name for name in ("cuda", "mps", "cpu") if _available(name)))


def engine_backend(device: torch.device) -> str:
    """Which engine trains synthetic stacks on ``device``: ``compiled`` (numba) on a CPU, ``torch`` elsewhere, unless
    QKOV_ENGINE says otherwise. The two agree to 1e-5 of how far the parameters move, not to the bit, so the engine
    is part of a result's identity."""
    forced = os.environ.get(ENGINE_ENV, "").strip().lower()
    if forced and forced not in BACKENDS:
        raise ValueError(f"{ENGINE_ENV}={forced!r} is not an engine; allowed: {', '.join(BACKENDS)} (or unset it)")
    if forced == "compiled" and device.type != "cpu":
        raise ValueError(f"{ENGINE_ENV}=compiled trains on the CPU only, not on {device}; unset it or set it to torch")
    return forced or ("compiled" if device.type == "cpu" else "torch")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def _cpu_model(info: dict[str, str]) -> str:
    return info.get("model name") or platform.processor() or platform.machine()


def _cpu_id(info: dict[str, str]) -> str:
    """Vendor, family, model, stepping and a digest of the feature flags: a virtual machine often names its CPU
    generically, and MKL and torch choose their kernels by these, not by the name."""
    if not info:
        return platform.machine()
    features = info.get("flags") or info.get("Features", "")  # x86 names them flags, ARM Features
    flags = hashlib.sha256(" ".join(sorted(features.split())).encode()).hexdigest()[:12]
    return (
        f"{info.get('vendor_id', '?')} family {info.get('cpu family', '?')} model {info.get('model', '?')} "
        f"stepping {info.get('stepping', '?')}, flags {flags}"
    )


def describe(device: torch.device | None = None) -> dict[str, str]:
    """Device, its name, and what a number can depend on beyond code, data and seeds: library versions, and the CPU
    model and instruction set that torch's kernels are chosen by. (Not the core count: training runs one torch
    thread per process, ``workers.run_independent``.)"""
    device = device or pick_device()
    info = _cpuinfo()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_model(info)
    return {
        "device": device.type,
        "device_name": name,
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "cpu": _cpu_model(info),
        "cpu_id": _cpu_id(info),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "synthetic_engine": engine_backend(device),
    }


def cpu_workers(device: torch.device) -> int:
    """How many processes may train independent stacks side by side: one per CPU core on the CPU (each on one torch
    thread: two threads on two small stacks spin and slow down), one on a GPU; QKOV_WORKERS overrides."""
    forced = os.environ.get(WORKERS_ENV, "").strip()
    if forced:
        if not re.fullmatch(r"[0-9]+", forced) or int(forced) < 1:
            raise ValueError(
                f"{WORKERS_ENV}={forced!r} is not a number of processes; set it to a whole number >= 1, "
                f"written in the digits 0-9, or unset it"
            )
        return int(forced)
    return (os.cpu_count() or 1) if device.type == "cpu" else 1
