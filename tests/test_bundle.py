"""Results bundles (qkov_lib/bundle.py): a pack/unpack round trip restores every file bit for bit; a damaged,
truncated or foreign bundle is refused with one message naming the problem and the fix, and the target folder is
left exactly as it was. The units are sealed here directly (no chapter runs)."""
from __future__ import annotations

import gzip
import io
import json
import re
import tarfile
from pathlib import Path

import pandas as pd
import pytest
from fake_chapters import TINY, fake_module

from qkov_lib import bundle, results
from qkov_lib import reproduce as runner
from qkov_lib.__main__ import main

CELLS = Path("sweeps") / "tiny" / "0123456789abcdef"


def seal_unit(folder: Path, chapter: str, x: int) -> None:
    """A unit as the runner leaves it: tables, an executed notebook, metadata listing every file's sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{chapter}.ipynb").write_text(json.dumps({"cells": [], "x": x}))
    results.save(folder, chapter, {"main": pd.DataFrame({"x": [x]}), "claims": pd.DataFrame({"ok": [True]})},
                 {"profile": folder.name, "git_commit": "0" * 40, "runner_wall_time_s": 1.0})
    meta = results.read_meta(folder, chapter)
    meta["files"] = {p.name: results.sha256_file(p) for p in sorted(folder.glob(f"{chapter}.*"))
                     if p.name != f"{chapter}.json"}
    results.write_meta(folder, chapter, meta)
    results.check(folder, chapter)


@pytest.fixture
def res(tmp_path, monkeypatch) -> Path:
    """A results root with two smoke units, a damaged third, another profile's unit, and a sweep's cells."""
    root = tmp_path / "res"
    for i, chapter in enumerate(["alpha", "beta", "gamma"]):
        seal_unit(root / "smoke", chapter, i)
    (root / "smoke" / "gamma.csv").write_text("x\n99\n")  # damaged: left out of the bundle
    (root / "smoke" / "failed").mkdir()
    (root / "smoke" / "failed" / "alpha.ipynb").write_text("{}")  # a failed run's notebook: not packed
    seal_unit(root / "default", "alpha", 7)
    (root / CELLS).mkdir(parents=True)
    for cell in ("aaaa", "bbbb"):
        (root / CELLS / f"{cell}.csv").write_text(f"cell\n{cell}\n")
    monkeypatch.setattr(bundle, "SWEEP_FOLDERS", {"alpha": lambda profile: [CELLS]})
    monkeypatch.setattr(results, "git_commit", lambda: "c0ffee" * 6 + "c0ff")  # the same bytes every run, so a
    monkeypatch.setattr(bundle.time, "strftime", lambda fmt: "2026-01-01T00:00:00+0000")  # changed byte is the same
    return root


def hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): results.sha256_file(p) for p in sorted(root.rglob("*"))
            if p.is_file() and runner.LOCKS not in p.parts}


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and runner.LOCKS not in p.parts}


def test_round_trip_restores_every_file_bit_for_bit(res, tmp_path, capsys):
    target = tmp_path / "smoke.tar.gz"
    assert main(["results", "pack", "smoke", str(target), "--results", str(res)]) == 0
    out, err = capsys.readouterr()
    assert "packed 2 units of profile smoke and 2 sweep cells" in out and "left out gamma" in err
    fresh = tmp_path / "fresh"
    assert main(["results", "unpack", str(target), "--results", str(fresh)]) == 0
    assert "restored 2 units of profile smoke" in capsys.readouterr().out
    packed = {k: v for k, v in hashes(res).items()
              if k.startswith(("smoke/alpha.", "smoke/beta.", "sweeps/"))}
    assert hashes(fresh) == packed and len(packed) == 2 * 4 + 2
    manifest = bundle.read(target)
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
    bundle.unpack(target, other, profile="smoke")
    assert not (other / "smoke" / "alpha.extra.csv").exists()
    assert (other / "smoke" / "alpha.ipynb").read_bytes() == (res / "smoke" / "alpha.ipynb").read_bytes()
    results.check(other / "smoke", "delta")
    assert not list(other.glob(".unpack-*"))


def test_the_atlas_sweep_hook_names_its_cell_folder():
    (folder,) = bundle._atlas_sweep("smoke")
    assert folder.parts[:2] == ("sweeps", "atlas") and len(folder.parts[2]) == 16


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
    files["smoke/alpha.csv"] = b"x\n1000\n"


DAMAGE = [
    ("a byte changed", flip_a_byte, r"is damaged \(.*\); copy it again, or pack the results again"),
    ("truncated", truncate, r"is truncated \(the archive ends early\); copy it again"),
    ("not an archive", lambda p: p.write_text("hello"), r"is not a results bundle \(not a tar.gz archive\)"),
    ("gzip of no tar", lambda p: p.write_bytes(gzip.compress(b"hello" * 100)), r"no tar archive inside the gzip"),
    ("no manifest", lambda p: write(p, None, members(p)[1]), r"is not a results bundle \(it has no manifest.json\)"),
    ("a foreign manifest", edited(lambda m, f: m.update(format="something-else")), r"not of format 'qkov-results"),
    ("a wrong format version", edited(lambda m, f: m.update(version=2)),
     r"format version 2; this library reads version 1: pack the results again"),
    ("a path escaping the folder", edited(escaping), r"holds a path outside the results layout \('\.\./evil\.csv'"),
    ("an absolute path", edited(absolute), r"holds a path outside the results layout \('/outside/evil\.csv'"),
    ("a link", lambda p: write(p, *members(p), links=("smoke/alpha.link",)), r"smoke/alpha.link, which is not a plain"),
    ("a member not in the manifest", edited(lambda m, f: f.update({"smoke/alpha.more.csv": b"x"})),
     r"holds smoke/alpha.more.csv, which its manifest does not list"),
    ("a manifest entry missing", edited(lambda m, f: f.pop("smoke/beta.csv")),
     r"manifest lists smoke/beta.csv, which the archive lacks"),
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
        bundle.unpack(target, res, profile="default")
    with pytest.raises(bundle.BundleError, match="does not exist or is not a file; give the path of a bundle"):
        bundle.unpack(tmp_path / "nothing.tar.gz", res)
    assert snapshot(res) == before and not list(res.glob(".unpack-*"))


def test_pack_of_no_results_is_one_error_and_writes_nothing(tmp_path):
    with pytest.raises(bundle.BundleError, match="no results of profile 'paper' in .*; run `python -m qkov_lib"):
        bundle.pack("paper", tmp_path / "p.tar.gz", tmp_path / "res")
    assert not list(tmp_path.iterdir())


def test_restored_units_are_reused_by_the_runner(tmp_path, monkeypatch):
    """A unit sealed by the runner's own fingerprint survives pack and unpack as current."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "tiny.md").write_text(TINY)
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", notebooks)
    monkeypatch.setitem(runner.CHAPTERS, "tiny", fake_module("tiny", x=1))
    monkeypatch.setattr(bundle, "SWEEP_FOLDERS", {})
    folder = tmp_path / "res" / "smoke"
    seal_unit(folder, "tiny", 1)
    fp = runner.fingerprint("tiny", "smoke", {"x": 1}, folder.parent)
    runner._seal(folder, "tiny", fp, 60.0)
    bundle.pack("smoke", tmp_path / "b.tar.gz", tmp_path / "res")
    bundle.unpack(tmp_path / "b.tar.gz", tmp_path / "fresh")
    plan = runner.chapter_state("tiny", "smoke", {}, tmp_path / "fresh")
    assert plan.reason is None and plan.estimate_s == 60.0
