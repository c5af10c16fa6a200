"""A chapter's fingerprint: what its published unit depends on, part by part, and why a unit can or cannot be
reused (``stale_reason``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..core import codehash, files, portable, results
from ..core.contents import GATHERERS
from ..core.device import engine_backend, pick_device
from ..core.paths import RESULTS_ROOT
from ..data.registry import data_identity
from . import catalog


def sha(data: bytes) -> str:
    """The sha256 of ``data``, in hex."""
    return hashlib.sha256(data).hexdigest()


def chapter_code(chapter: str) -> codehash.CodeState:
    """The library code the chapter can execute (its imports' closure in qkov_lib) and the numerical libraries'
    versions (``codehash``)."""
    return codehash.chapter_code(catalog.source(chapter))


def fingerprint(
    chapter: str, profile: str, params: dict[str, Any], results_root: Path = RESULTS_ROOT
) -> dict[str, str]:
    """What a chapter's output depends on, part by part: its source (its cells, not the notebook's metadata, which
    JupyterLab rewrites on opening), its resolved parameters, its code (the library
    modules it can execute, docstrings aside, and the numerical libraries' versions), the files and settings of the
    datasets it reads, the portable arithmetic mode's settings, the device and engine that compute (``computed_by``),
    and, for a page that gathers results, the other chapters' units (their metadata, which holds every file's
    sha256); a chapter whose page sets another profile's results beside its own (``BESIDE``, e.g. the authors'
    setup under ``official``) depends on that profile's unit of it too (every chapter's, for a gathering page)."""
    module = catalog.chapter_module(chapter)
    datasets = getattr(module, "DATASETS", ())
    code = chapter_code(chapter)
    parts = {
        "source": codehash.source_digest(catalog.source(chapter)),
        "parameters": sha(json.dumps({"profile": profile, "params": params}, sort_keys=True).encode()),
        "code": code.digest,
        "arithmetic": sha(json.dumps(portable.settings(), sort_keys=True).encode()),
        "engine": sha(json.dumps(computed_by(code), sort_keys=True).encode()),
    }
    if datasets:
        parts["data"] = sha(json.dumps(data_identities(chapter), sort_keys=True).encode())
    if chapter in GATHERERS:
        parts["inputs"] = units_digest(results_root / profile, None)
    for other in getattr(module, "BESIDE", ()):
        if other != profile:
            parts[f"beside {other}"] = units_digest(results_root / other, None if chapter in GATHERERS else chapter)
    return parts


def data_identities(chapter: str) -> dict[str, dict[str, Any]]:
    """The identity of each dataset the chapter reads (``registry.data_identity``: its release and its files'
    sha256), as a unit records it."""
    return {name: data_identity(name) for name in getattr(catalog.chapter_module(chapter), "DATASETS", ())}


def without_data(identities: dict[str, dict[str, Any]]) -> list[str]:
    """The datasets of which nothing is on this disk."""
    return [name for name, identity in identities.items() if identity["release"] is None]


def same_data(recorded: Any, now: dict[str, dict[str, Any]]) -> bool:
    """Whether a unit's data (``recorded``, its metadata's ``data_identity``) is the data here: the same release and
    files, or, for a dataset of which nothing is on this disk, the canonical release (whose files the registry names): a
    unit computed on the canonical data stays current where the data is absent; one computed on other copies does
    not."""
    if not isinstance(recorded, dict) or set(recorded) != set(now):
        return False
    return all(
        recorded[name] == identity
        or (
            identity["release"] is None
            and isinstance(recorded[name], dict)
            and recorded[name].get("release") == "canonical"
        )
        for name, identity in now.items()
    )


def units_digest(folder: Path, chapter: str | None) -> str:
    """The digest of a profile folder's units (their metadata, which holds every file's sha256): ``chapter``'s
    alone, or every chapter's but the gathering pages' (None)."""
    units = sorted(p for p in folder.glob("*.json") if p.stem not in GATHERERS and chapter in (None, p.stem))
    return sha(b"".join(p.name.encode() + p.read_bytes() for p in units))


def computed_by(code: codehash.CodeState) -> dict[str, str]:
    """What computes a chapter's numbers, beyond its code and the arithmetic mode: the device, and the engine that
    trains synthetic stacks where the chapter's code can reach it (the engines agree closely, not to the bit)."""
    device = pick_device()
    out = {"device": device.type}
    if "qkov_lib.train.backends" in code.modules:
        out["synthetic_engine"] = engine_backend(device)
    return out


def stale_reason(final: Path, chapter: str, fp: dict[str, str]) -> tuple[str | None, dict[str, Any]]:
    """Why the published unit cannot be reused (missing, damaged, or an input changed), None when it can; and
    its metadata ({} when unreadable)."""
    try:
        meta = files.check(final, chapter)
    except results.ResultsError as err:
        return str(err), {}
    return unit_reason(meta, chapter, fp), meta


def unit_reason(meta: dict[str, Any], chapter: str, fp: dict[str, str]) -> str | None:
    """Why an intact unit (its metadata) cannot be reused under the fingerprint ``fp``, None when it can: a part of
    the fingerprint changed (the data part is compared by ``same_data``), or it holds no executed notebook."""
    old = meta.get("fingerprint")
    if not isinstance(old, dict):
        return "the results were not written by this runner (a chapter run by hand, or an older version)"
    changed = sorted(k for k in fp.keys() | old.keys() if fp.get(k) != old.get(k))
    if "data" in changed and "data" in fp and same_data(meta.get("data_identity"), data_identities(chapter)):
        changed.remove("data")
    if changed:
        return f"{', '.join(_named(k, chapter, meta) for k in changed)} changed"
    if f"{chapter}.ipynb" not in meta.get("files", {}):
        return "the results hold no executed notebook"
    return None


def _named(part: str, chapter: str, meta: dict[str, Any]) -> str:
    """A changed fingerprint part; for the code, with the modules (and library versions) that changed when the
    unit recorded its code."""
    if part == "engine" and isinstance(meta.get("computed_by"), dict):
        now = computed_by(chapter_code(chapter))
        what = [
            f"{k} {meta['computed_by'].get(k, 'none')} -> {now.get(k, 'none')}"
            for k in sorted(now)
            if meta["computed_by"].get(k) != now.get(k)
        ]
        return f"engine ({', '.join(what)})" if what else part
    if part != "code" or not isinstance(meta.get("code"), dict):
        return part
    what = codehash.what_changed(meta["code"], chapter_code(chapter))
    return f"code ({', '.join(what)})" if what else part
