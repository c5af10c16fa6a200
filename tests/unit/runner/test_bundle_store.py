"""Stored runs in results bundles (qkov_lib/runner/bundle_store.py): a bundle carries the stored runs its units were
made from, byte for byte; an unpack moves them into the scratch store, where a chapter elsewhere takes them instead of
computing them; a damaged or foreign stored run refuses the whole bundle and changes nothing; a unit refused by its
fingerprint can still hand over its runs."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pandas as pd
import pytest
from fake_chapters import fake_module, seal_unit

from qkov_lib.core import results
from qkov_lib.core.budget import DEADLINE_ENV
from qkov_lib.core.chapter import Scope, scoped, stored_runs
from qkov_lib.core.results import RESULTS_ENV, ROOT_ENV
from qkov_lib.runner import bundle, bundle_store, catalog, unpack
from qkov_lib.runs import store
from qkov_lib.runs.store import Batch, Piece

CALLS: list[int] = []


@pytest.fixture
def book(tmp_path, monkeypatch) -> Path:
    """A chapter ``alpha`` whose unit at ``default`` used four stored runs: three in the committed store, one (computed
    with an override, say) in the scratch store; one more scratch run it did not use."""
    monkeypatch.setitem(catalog.CHAPTERS, "alpha", fake_module("alpha", x=1))
    monkeypatch.setitem(catalog.CHAPTERS, "beta", fake_module("beta", x=1))
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "res"))
    monkeypatch.setenv(store.ROOT_ENV, str(tmp_path / "committed"))
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    CALLS.clear()
    monkeypatch.setenv(store.WRITE_ENV, "1")
    used = compute([0, 1, 2])
    monkeypatch.delenv(store.WRITE_ENV)
    used += compute([3])
    compute([4])  # in the scratch store, used by no unit: not packed
    seal_unit(tmp_path / "res" / "default", "alpha", 1)
    meta = results.read_meta(tmp_path / "res" / "default", "alpha")
    results.write_meta(tmp_path / "res" / "default", "alpha", {**meta, "stored_runs": stored_runs(used)})
    CALLS.clear()
    return tmp_path


def compute(seeds: list[int]) -> list[dict]:
    """The runs of ``seeds`` through a batch of chapter ``alpha`` at ``default``; what the chapter used."""
    with scoped(Scope("alpha", "default")) as scope:
        batch = Batch([Piece(f"run-seed{s}", {"seed": s}) for s in seeds], ["qkov_lib.metrics.stats"])
        todo = batch.missing
        batch.compute(
            lambda s: CALLS.append(s) or pd.DataFrame({"seed": [s], "value": [s / 3]}),
            [(seeds[i],) for i in todo],
            1,
            lambda t, out: {todo[t]: {"main": out}},
        )
    return scope.used


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_runs_travel_byte_for_byte_and_are_taken_elsewhere(book, monkeypatch):
    packed = bundle.pack("default", book / "b.tar.gz", book / "res")
    assert packed.units == ["alpha"] and packed.stored_runs == 4
    fresh = book / "fresh"
    done = unpack.unpack(book / "b.tar.gz", fresh)
    assert done.units == ["alpha"] and done.stored_runs == 4
    runs = tree(fresh / "store" / "default" / "alpha")
    assert sorted(n.split("-")[1] for n in runs if n.endswith(".json")) == [f"seed{s}" for s in range(4)]
    committed = tree(book / "committed" / "default" / "alpha")
    for s in range(3):  # the tables' bytes as the committed store holds them
        (name,) = [n for n in runs if n.startswith(f"run-seed{s}-") and n.endswith(".csv")]
        assert runs[name] == committed[f"run-seed{s}.csv"]
    # another checkout (an empty committed store, the bundle's results) computes nothing
    monkeypatch.setenv(ROOT_ENV, str(fresh))
    monkeypatch.setenv(store.ROOT_ENV, str(book / "empty"))
    compute([0, 1, 2, 3])
    assert CALLS == []


def rewrite(path: Path, change) -> None:
    """Apply ``change(files)`` to a bundle's members and write it back with a manifest that matches them (so only
    the stored runs' own checks can refuse it)."""
    with tarfile.open(path, "r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    manifest = json.loads(files.pop(bundle.MANIFEST))
    change(files)
    manifest["files"] = [{"path": n, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for n, d in files.items()]
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [(bundle.MANIFEST, json.dumps(manifest).encode()), *files.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _run(files: dict[str, bytes], suffix: str) -> str:
    return next(n for n in sorted(files) if n.startswith("store/") and n.endswith(suffix))


def _edit_table(files):
    files[_run(files, ".csv")] = b"seed,value\n0,9\n"


def _to_beta(files):
    for name in [n for n in files if n.startswith("store/default/alpha/run-seed0-")]:
        files[name.replace("/alpha/", "/beta/")] = files.pop(name)


def _stray(files):
    files["store/default/alpha/zzz-0123456789ab.csv"] = b"x\n1\n"


def _unknown_chapter(files):
    files["store/default/omega/run-0123456789ab.json"] = b"{}"


def _other_profile(files):
    files["store/smoke/alpha/run-0123456789ab.json"] = b"{}"


HOSTILE = [
    ("an edited table", _edit_table, r"stored run alpha/run-seed\d-\w+ is unusable \(.*sha256 differs"),
    ("a run moved to another chapter", _to_beta, r"stored run beta/run-seed0-\w+ names another run, chapter"),
    ("a file no run lists", _stray, r"holds alpha/zzz-0123456789ab\.csv, which no stored run lists"),
    ("a chapter the book lacks", _unknown_chapter, r"outside the results layout \('store/default/omega/"),
    ("another profile's run", _other_profile, r"outside the results layout \('store/smoke/alpha/"),
]


@pytest.mark.parametrize("change,message", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_bad_stored_run_refuses_the_bundle_and_changes_nothing(book, change, message):
    bundle.pack("default", book / "b.tar.gz", book / "res")
    rewrite(book / "b.tar.gz", change)
    before = tree(book / "res")
    with pytest.raises(bundle.BundleError, match=message):
        unpack.unpack(book / "b.tar.gz", book / "res")
    assert tree(book / "res") == before


def test_a_refused_unit_still_hands_over_its_runs(book):
    bundle.pack("default", book / "b.tar.gz", book / "res")
    refuse = lambda chapter, meta: "its code changed"  # noqa: E731
    with pytest.raises(bundle.BundleError, match="unit alpha is refused \\(its code changed\\); nothing was restored"):
        unpack.unpack(book / "b.tar.gz", book / "fresh", accept=refuse)
    assert not (book / "fresh" / "store").exists()
    done = unpack.unpack(book / "b.tar.gz", book / "fresh", accept=refuse, runs_of_refused=True)
    assert done.units == [] and done.refused == {"alpha": "its code changed"} and done.stored_runs == 4
    assert not (book / "fresh" / "default" / "alpha.json").exists()
    assert bundle_store.find("default", "alpha", "run-seed3", store.sha(_key(book, 3)), book / "fresh") is not None


def _key(book: Path, seed: int) -> dict:
    (meta,) = (book / "res" / "store" / "default" / "alpha").glob(f"run-seed{seed}-*.json")
    return json.loads(meta.read_text())["key"]


def test_a_bundle_never_replaces_a_whole_run_held_here_nor_writes_through_a_link(book):
    """A run held here whole under the same key stays byte for byte, even when the bundle's copy of it differs (a
    resealed forgery); a store folder that is a link refuses the bundle before anything moves."""
    bundle.pack("default", book / "b.tar.gz", book / "res")
    here = book / "res" / "store" / "default" / "alpha"
    before = tree(here)

    def forged(files):
        name = _run(files, ".csv")
        if "seed3" not in name:
            name = next(n for n in files if n.startswith("store/") and "seed3" in n and n.endswith(".csv"))
        files[name] = b"seed,value\n3,9.0\n"
        meta_name = name.removesuffix(".csv") + ".json"
        meta = json.loads(files[meta_name])
        meta["files"][name.rsplit("/", 1)[1]] = hashlib.sha256(files[name]).hexdigest()
        meta.pop(results.SEAL)
        meta[results.SEAL] = results._seal(meta)
        files[meta_name] = json.dumps(meta).encode()

    rewrite(book / "b.tar.gz", forged)
    assert unpack.unpack(book / "b.tar.gz", book / "res").stored_runs == 3  # seed 3, held here, is kept
    assert {k: v for k, v in tree(here).items() if k in before} == before  # the runs held here, as they were
    outside = book / "outside"
    outside.mkdir()
    (book / "fresh").mkdir()
    (book / "fresh" / "store").symlink_to(outside, target_is_directory=True)
    with pytest.raises(bundle.BundleError, match="is a symbolic link, not a folder of the results store"):
        unpack.unpack(book / "b.tar.gz", book / "fresh")
    assert list(outside.iterdir()) == [] and not (book / "fresh" / "default").exists()


def test_a_stored_run_naming_a_file_outside_its_folder_moves_nothing(book):
    """A stored run whose sealed metadata lists a file beside the results (its sha256 right): refused whole."""
    bundle.pack("default", book / "b.tar.gz", book / "res")
    (book / "victim.txt").write_text("keep me\n")

    def names_outside(files):
        meta_name = _run(files, ".json")
        meta = json.loads(files[meta_name])
        meta["files"]["../../../../../victim.txt"] = hashlib.sha256(b"keep me\n").hexdigest()
        meta.pop(results.SEAL)
        files[meta_name] = json.dumps({**meta, results.SEAL: results._seal(meta)}).encode()

    rewrite(book / "b.tar.gz", names_outside)
    before = tree(book)
    with pytest.raises(bundle.BundleError, match=r"names '\.\./\.\./\.\./\.\./\.\./victim\.txt' as one of its files"):
        unpack.unpack(book / "b.tar.gz", book / "fresh")
    assert tree(book) == before
