"""Results bundles (qkov_lib/runner/bundle.py): a pack/unpack round trip restores every file bit for bit; a damaged,
truncated or foreign bundle is refused with one message naming the problem and the fix, and the target folder is
left exactly as it was. The units are sealed here directly (no chapter runs)."""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
from fake_chapters import fake_module, seal_unit, tiny_book

from qkov_lib.__main__ import main
from qkov_lib.core import results
from qkov_lib.runner import bundle, bundle_check, catalog, units, unpack
from qkov_lib.runner import fingerprint as fingerprints
from qkov_lib.runner import plan as plan_mod

CELLS = Path("sweeps") / "tiny" / "0123456789abcdef"


@pytest.fixture
def res(tmp_path, monkeypatch) -> Path:
    """A results root with two smoke units, a damaged third, another profile's unit, and a sweep's loose cells
    (written by a sweep run outside any chapter: no bundle carries them)."""
    root = tmp_path / "res"
    for i, chapter in enumerate(["alpha", "beta", "gamma"]):
        monkeypatch.setitem(catalog.CHAPTERS, chapter, fake_module(chapter, x=1))
        seal_unit(root / "smoke", chapter, i)
    (root / "smoke" / "gamma.csv").write_text("x\n99\n")  # damaged: left out of the bundle
    (root / "smoke" / "failed").mkdir()
    (root / "smoke" / "failed" / "alpha.ipynb").write_text("{}")  # a failed run's notebook: not packed
    seal_unit(root / "default", "alpha", 7)
    (root / CELLS).mkdir(parents=True)
    for cell in ("aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"):
        (root / CELLS / f"{cell}.csv").write_text(f"cell\n{cell}\n")
    monkeypatch.setattr(results, "git_commit", lambda: "c0ffee" * 6 + "c0ff")  # the same bytes every run, so a
    monkeypatch.setattr(bundle.time, "strftime", lambda fmt: "2026-01-01T00:00:00+0000")  # changed byte is the same
    return root


def hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): results.sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and units.LOCKS not in p.parts
    }


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and units.LOCKS not in p.parts
    }


def test_round_trip_restores_every_file_bit_for_bit(res, tmp_path, capsys):
    target = tmp_path / "smoke.tar.gz"
    assert main(["results", "pack", "smoke", str(target), "--results", str(res)]) == 0
    out, err = capsys.readouterr()
    assert "packed 2 units of profile smoke and 0 stored runs" in out and "left out gamma" in err
    fresh = tmp_path / "fresh"
    assert main(["results", "unpack", str(target), "--results", str(fresh)]) == 0
    assert "restored 2 units of profile smoke" in capsys.readouterr().out
    packed = {k: v for k, v in hashes(res).items() if k.startswith(("smoke/alpha.", "smoke/beta."))}
    assert hashes(fresh) == packed and len(packed) == 2 * 4
    manifest = bundle_check.read(target)
    assert manifest["format"] == bundle.FORMAT and manifest["version"] == bundle.VERSION
    assert manifest["profile"] == "smoke" and {f["path"]: f["sha256"] for f in manifest["files"]} == packed
    for chapter in ("alpha", "beta"):
        results.check(fresh / "smoke", chapter)


def test_unpack_replaces_a_unit_whole_and_leaves_the_others(res, tmp_path):
    target = tmp_path / "b.tar.gz"
    bundle.pack("smoke", target, res)
    other = tmp_path / "other"
    seal_unit(other / "smoke", "alpha", 42)
    (other / "smoke" / "alpha.extra.csv").write_text("x\n1\n")  # a table the restored unit lacks
    seal_unit(other / "smoke", "delta", 3)
    unpack.unpack(target, other, profile="smoke")
    assert not (other / "smoke" / "alpha.extra.csv").exists()
    assert (other / "smoke" / "alpha.ipynb").read_bytes() == (res / "smoke" / "alpha.ipynb").read_bytes()
    results.check(other / "smoke", "delta")
    assert not list(other.glob(".unpack-*"))


def test_loose_sweep_cells_neither_travel_nor_get_in(res, tmp_path):
    """Cells carry no key or seal: a bundle leaves them out, and one that holds them (say, only them, with numbers
    altered by hand) is refused whole, the results folder unchanged (a chapter's settings travel as stored runs)."""
    target = tmp_path / "smoke.tar.gz"
    bundle.pack("smoke", target, res)
    assert not any(f["path"].startswith("sweeps/") for f in bundle_check.read(target)["files"])
    cell = f"{CELLS.as_posix()}/aaaaaaaaaaaaaaaa.csv"
    data = b"cell\nforged\n"
    write(
        target,
        {
            **members(target)[0],
            "files": [{"path": cell, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}],
        },
        {cell: data},
    )
    before = hashes(res)
    with pytest.raises(bundle.BundleError, match=r"names a path outside the results layout \('sweeps/tiny/"):
        unpack.unpack(target, res)
    assert hashes(res) == before


def members(path: Path) -> tuple[dict, dict[str, bytes]]:
    with tarfile.open(path, "r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    return json.loads(files.pop(bundle.MANIFEST)), files


def write(path: Path, manifest: dict | None, files: dict[str, bytes], links: tuple[str, ...] = ()) -> None:
    with tarfile.open(path, "w:gz") as tar:
        head = [(bundle.MANIFEST, json.dumps(manifest).encode())] if manifest is not None else []
        items = head + list(files.items())
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def edited(change):
    """A damage that rewrites the archive: ``change(manifest, files)`` edits them in place."""

    def damage(path: Path) -> None:
        manifest, files = members(path)
        change(manifest, files)
        write(path, manifest, files)

    return damage


def escaping(manifest, files):
    manifest["files"].append({"path": "../evil.csv", "sha256": "0" * 64, "size": 1})
    files["../evil.csv"] = b"x"


def absolute(manifest, files):
    manifest["files"].append({"path": "/outside/evil.csv", "sha256": "0" * 64, "size": 1})
    files["/outside/evil.csv"] = b"x"


def altered(manifest, files):
    files["smoke/alpha.csv"] = b"x\n9\n"  # the same size as the packed "x\n0\n"


DAMAGE = [
    ("a byte changed", flip_a_byte, r"is damaged \(.*\); copy it again, or pack the results again"),
    ("truncated", truncate, r"is truncated \(the archive ends early\); copy it again"),
    ("not an archive", lambda p: p.write_text("hello"), r"is not a results bundle \(not a tar.gz archive\)"),
    ("gzip of no tar", lambda p: p.write_bytes(gzip.compress(b"hello" * 100)), r"no tar archive inside the gzip"),
    ("no manifest", lambda p: write(p, None, members(p)[1]), r"is not a results bundle \(it has no manifest.json\)"),
    ("a foreign manifest", edited(lambda m, f: m.update(format="something-else")), r"not of format 'qkov-results"),
    (
        "a wrong format version",
        edited(lambda m, f: m.update(version=1)),  # a bundle of loose sweep cells, from before the store
        r"format version 1; this library reads version 2: pack the results again",
    ),
    ("a path escaping the folder", edited(escaping), r"names a path outside the results layout \('\.\./evil\.csv'"),
    ("an absolute path", edited(absolute), r"names a path outside the results layout \('/outside/evil\.csv'"),
    (
        "a link",
        lambda p: write(p, *members(p), links=("smoke/alpha.link.csv",)),
        r"smoke/alpha.link.csv, which is not a plain",
    ),
    (
        "a member not in the manifest",
        edited(lambda m, f: f.update({"smoke/alpha.more.csv": b"x"})),
        r"holds smoke/alpha.more.csv, which its manifest does not list",
    ),
    (
        "a manifest entry missing",
        edited(lambda m, f: f.pop("smoke/beta.csv")),
        r"manifest lists smoke/beta.csv, which the archive lacks",
    ),
    ("a file altered", edited(altered), r"is damaged: smoke/alpha.csv differs from its manifest \(sha256\)"),
    ("a malformed manifest", edited(lambda m, f: m.update(files="all")), r"has a malformed manifest"),
]


@pytest.mark.parametrize("damage,message", [d[1:] for d in DAMAGE], ids=[d[0] for d in DAMAGE])
def test_a_bad_bundle_is_refused_and_the_target_is_untouched(res, tmp_path, capsys, damage, message):
    target = tmp_path / "b.tar.gz"
    bundle.pack("smoke", target, res)
    damage(target)
    before = snapshot(res)
    assert main(["results", "unpack", str(target), "--results", str(res)]) == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and str(target) in err
    assert re.search(message, err), err
    assert snapshot(res) == before and not list(res.glob(".unpack-*"))


def test_a_bundle_of_another_profile_or_no_file_is_refused(res, tmp_path):
    target = tmp_path / "b.tar.gz"
    bundle.pack("smoke", target, res)
    before = snapshot(res)
    with pytest.raises(bundle.BundleError, match="holds the results of profile 'smoke', not 'default'; give a bundle"):
        unpack.unpack(target, res, profile="default")
    with pytest.raises(bundle.BundleError, match="does not exist or is not a file; give the path of a bundle"):
        unpack.unpack(tmp_path / "nothing.tar.gz", res)
    assert snapshot(res) == before and not list(res.glob(".unpack-*"))


def test_pack_of_no_results_is_one_error_and_writes_nothing(tmp_path):
    with pytest.raises(bundle.BundleError, match="no results of profile 'paper' in .*; run `python -m qkov_lib"):
        bundle.pack("paper", tmp_path / "p.tar.gz", tmp_path / "res")
    assert not list(tmp_path.iterdir())


def test_restored_units_are_reused_by_the_runner(tmp_path, monkeypatch):
    """A unit sealed by the runner's own fingerprint survives pack and unpack as current."""
    tiny_book(tmp_path, monkeypatch)
    folder = tmp_path / "res" / "smoke"
    seal_unit(folder, "tiny", 1)
    fp = fingerprints.fingerprint("tiny", "smoke", {"x": 1}, folder.parent)
    units.seal(folder, "tiny", fp, 60.0)
    bundle.pack("smoke", tmp_path / "b.tar.gz", tmp_path / "res")
    unpack.unpack(tmp_path / "b.tar.gz", tmp_path / "fresh")
    plan = plan_mod.chapter_state("tiny", "smoke", {}, tmp_path / "fresh")
    assert plan.reason is None and plan.estimate_s == 60.0


# ---- hostile bundles: checked whole before anything moves; nothing changes in the results folder or beside it -------


def sha_tree(root: Path) -> dict[str, str]:
    """The sha256 of every file under ``root`` (the results folder and the folders beside it), but the locks."""
    return {
        p.relative_to(root).as_posix(): results.sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and units.LOCKS not in p.parts
    }


def rewritten(path: Path, change) -> None:
    """Rewrite the bundle after ``change(manifest, files)``, the manifest's sizes and sha256 made to match the files
    (so that only the check under test can refuse it)."""
    manifest, files = members(path)
    change(manifest, files)
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    manifest["files"] = [{"path": name, "sha256": digests[name], "size": len(files[name])} for name in files]
    write(path, manifest, files)


def _outside_unit(root: Path) -> Path:
    """A folder beside the results holding files named like a unit's, which a bundle must never touch."""
    outside = root / "outside"
    outside.mkdir()
    for name in ("alpha.json", "alpha.csv", "alpha.ipynb"):
        (outside / name).write_text("keep me\n")
    return outside


def _profile(value):
    def change(manifest, files):
        manifest["profile"] = value

    return change


def _renamed(old: str, new: str):
    def change(manifest, files):
        files[new] = files.pop(old)

    return change


def _only(name: str, data: bytes):
    def change(manifest, files):
        files.clear()
        files[name] = data

    return change


def _big_stray(manifest, files):
    files["smoke/alpha.big.csv"] = b"0" * (8 << 20)  # listed in the manifest, in no unit's metadata


def _hand_edited_unit(manifest, files):
    meta = json.loads(files["smoke/alpha.json"])
    meta["device"] = "cuda"  # its seal no longer matches
    files["smoke/alpha.json"] = json.dumps(meta).encode()


def _names_outside(manifest, files):
    """alpha's sealed metadata lists a file beside the results (with its sha256): the seal holds, the name does not."""
    meta = json.loads(files["smoke/alpha.json"])
    meta["files"]["../../../outside/alpha.csv"] = hashlib.sha256(b"keep me\n").hexdigest()
    meta.pop(results.SEAL)
    files["smoke/alpha.json"] = json.dumps({**meta, results.SEAL: results._seal(meta)}).encode()


HOSTILE = [
    (
        "a unit naming a file beside the results",
        lambda root: _names_outside,
        r"unit alpha fails its own check \(.*alpha\.json names '\.\./\.\./\.\./outside/alpha\.csv' as one of its "
        r"files, which is not a plain file name",
    ),
    (
        "profile an absolute folder",
        lambda root: _profile(str(root / "outside")),
        r"names profile '/.*outside', which is not one of this book's \(smoke, default, paper, official\)",
    ),
    ("profile sweeps", lambda root: _profile("sweeps"), r"names profile 'sweeps', which is not one of this book's"),
    ("profile ..", lambda root: _profile(".."), r"names profile '\.\.', which is not one of this book's"),
    ("profile smoke/sub", lambda root: _profile("smoke/sub"), r"names profile 'smoke/sub', which is not one"),
    ("profile empty", lambda root: _profile(""), r"names profile '', which is not one of this book's"),
    ("profile Smoke", lambda root: _profile("Smoke"), r"names profile 'Smoke', which is not one of this book's"),
    (
        "a dot inside the chapter part",
        lambda root: _only("smoke/alpha.x.json", b"{}"),
        r"names a path outside the results layout \('smoke/alpha\.x\.json'",
    ),
    (
        "a chapter the book does not have",
        lambda root: _renamed("smoke/alpha.csv", "smoke/omega.csv"),
        r"names a path outside the results layout \('smoke/omega\.csv'",
    ),
    (
        "an archive of sweep cells only",
        lambda root: _only(f"{CELLS.as_posix()}/aaaaaaaaaaaaaaaa.csv", b"cell\nforged\n"),
        r"names a path outside the results layout \('sweeps/tiny/0123456789abcdef/aaaaaaaaaaaaaaaa\.csv'",
    ),
    (
        "a big member of no unit",
        lambda root: _big_stray,
        r"holds smoke/alpha\.big\.csv, which its unit's metadata does not list",
    ),
    (
        "a unit file without its unit",
        lambda root: lambda m, f: f.pop("smoke/beta.json"),
        r"holds smoke/beta\..*, which belongs to no unit",
    ),
    (
        "a unit that fails its own check",
        lambda root: _hand_edited_unit,
        r"unit alpha fails its own check \(.*seal differs.*\); nothing was restored, the local unit is kept",
    ),
]


@pytest.mark.parametrize("make,message", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_hostile_bundle_changes_nothing_inside_or_beside_the_results(res, tmp_path, capsys, make, message):
    """A manifest's profile, a member's path, a member of no unit, a unit failing its check: one message, exit 1,
    and the sha256 of every file in the results folder and beside it as before (the good local units kept)."""
    _outside_unit(tmp_path)
    target = tmp_path / "b.tar.gz"
    bundle.pack("smoke", target, res)
    rewritten(target, make(tmp_path))
    before = sha_tree(tmp_path)
    assert main(["results", "unpack", str(target), "--results", str(res)]) == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err and re.search(message, err), err
    assert sha_tree(tmp_path) == before and not list(res.glob(".unpack-*"))


def test_sizes_are_checked_before_a_member_is_inflated(res, tmp_path, capsys, monkeypatch):
    """A manifest that understates a member's size is refused from the archive's header, before the member is read;
    one past the cap is refused from the manifest alone."""
    target = tmp_path / "b.tar.gz"
    bundle.pack("smoke", target, res)
    manifest, files = members(target)
    next(f for f in manifest["files"] if f["path"] == "smoke/alpha.ipynb")["size"] -= 1
    write(target, manifest, files)
    before = sha_tree(tmp_path)
    read = []
    monkeypatch.setattr(bundle_check, "_stream", lambda *a: read.append(a))
    assert main(["results", "unpack", str(target), "--results", str(res)]) == 1
    assert re.search(r"holds smoke/alpha\.ipynb at \d+ bytes, but its manifest says \d+", capsys.readouterr().err)
    assert read == [] and sha_tree(tmp_path) == before
    monkeypatch.setattr(bundle_check, "MAX_MEMBER", 3)
    bundle.pack("smoke", target, res)
    before = sha_tree(tmp_path)
    assert main(["results", "unpack", str(target), "--results", str(res)]) == 1
    assert re.search(r"lists 'smoke/.*' at \d+ bytes, past the cap of 3", capsys.readouterr().err)
    assert read == [] and sha_tree(tmp_path) == before


def test_members_are_streamed_not_held_in_memory(tmp_path, monkeypatch):
    """A unit with a 24 MB table unpacks with well under 24 MB of Python memory at its peak."""
    monkeypatch.setitem(catalog.CHAPTERS, "alpha", fake_module("alpha", x=1))
    folder = tmp_path / "res" / "smoke"
    seal_unit(folder, "alpha", 1)
    big = pd.DataFrame({"x": range(3_000_000)})  # about 24 MB of CSV
    results.save(folder, "alpha", {"main": big}, results.read_meta(folder, "alpha"))
    meta = results.read_meta(folder, "alpha")
    meta["files"]["alpha.ipynb"] = results.sha256_file(folder / "alpha.ipynb")
    results.write_meta(folder, "alpha", meta)
    (folder / "alpha.claims.csv").unlink()  # no longer part of the unit
    bundle.pack("smoke", tmp_path / "b.tar.gz", tmp_path / "res")
    assert (folder / "alpha.csv").stat().st_size > 20e6
    tracemalloc.start()
    unpack.unpack(tmp_path / "b.tar.gz", tmp_path / "fresh")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8e6, f"{peak / 1e6:.1f} MB"
    assert sha_tree(tmp_path / "fresh" / "smoke") == sha_tree(folder)


def test_pack_onto_a_folder_a_file_or_a_full_disk_is_one_error(res, tmp_path, monkeypatch, capsys):
    (tmp_path / "afile").write_text("x")
    cases = [
        (tmp_path, r"is a folder; give the bundle's file name"),
        (tmp_path / "afile" / "b.tar.gz", r"cannot write .*b\.tar\.gz \(File exists\); name a file in a writable"),
    ]
    for target, message in cases:
        before = sha_tree(tmp_path)
        assert main(["results", "pack", "smoke", str(target), "--results", str(res)]) == 1
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and re.search(message, err), err
        assert sha_tree(tmp_path) == before

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(bundle, "_write_bundle", full)
    before = sha_tree(tmp_path)
    assert main(["results", "pack", "smoke", str(tmp_path / "b.tar.gz"), "--results", str(res)]) == 1
    assert re.search(r"cannot write .*b\.tar\.gz \(No space left on device\); free space", capsys.readouterr().err)
    assert sha_tree(tmp_path) == before


def test_a_bundle_and_a_page_copied_in_keep_the_umasks_mode(res, tmp_path):
    """Written through a temporary file (mode 0600), then given the mode a plain ``open`` gives: 0644 under 022."""
    old = os.umask(0o022)
    try:
        bundle.pack("smoke", tmp_path / "b.tar.gz", res)
        units.copy_in(res / "smoke" / "alpha.ipynb", tmp_path / "book" / "alpha.ipynb")
    finally:
        os.umask(old)
    for path in (tmp_path / "b.tar.gz", tmp_path / "book" / "alpha.ipynb"):
        assert path.stat().st_mode & 0o777 == 0o644, path
