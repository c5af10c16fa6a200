"""The committed store against a hostile or damaged checkout (``qkov_lib.runs.store_verify`` and its use by
``runs.store``): a name read from a sealed metadata or a manifest never reaches outside its folder, a store folder
that is a link is refused before anything is written, damage is named in one line (before any training), and
``repair`` rebuilds a manifest from the runs whose seals hold."""

import json
import os
import tempfile

import pandas as pd
import pytest

from qkov_lib.core import files, results
from qkov_lib.core.budget import DEADLINE_ENV
from qkov_lib.core.chapter import Scope, scoped
from qkov_lib.core.results import RESULTS_ENV, ROOT_ENV
from qkov_lib.runs import store, store_verify
from qkov_lib.runs.store import Batch, Piece

CALLS: list[int] = []
EVIL = "../../../../README.md"  # from <root>/data/store/default/tiny: the checkout's README


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A checkout of the test's own: its README, a committed store under data/store, the runner's write switch on."""
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "data" / "results"))
    monkeypatch.setenv(store.ROOT_ENV, str(tmp_path / "data" / "store"))
    monkeypatch.setenv(store.WRITE_ENV, "1")
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    (tmp_path / "README.md").write_text("the checkout's README\n")
    CALLS.clear()
    return tmp_path


def compute(seeds, scale=1.0, chapter="tiny"):
    """The runs of ``seeds`` of ``chapter`` at ``default`` through a batch, computed where the store lacks them."""
    pieces = [Piece(f"run{s}", {"seed": s, "scale": scale}) for s in seeds]
    with scoped(Scope(chapter, "default")):
        batch = Batch(pieces, ["qkov_lib.metrics.stats"])
        todo = batch.missing
        batch.compute(
            lambda s, sc: CALLS.append(s) or pd.DataFrame({"v": [s * sc]}),
            [(seeds[i], scale) for i in todo],
            1,
            lambda t, out: {todo[t]: {"main": out}},
        )


def folder_of(root, chapter="tiny"):
    return root / "data" / "store" / "default" / chapter


def outside(root):
    """Every file of the checkout outside data/, with its bytes."""
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and "data" not in p.parts}


def forge_evil(folder, stem="run0"):
    """A run's sealed metadata and its manifest entry naming the checkout's README among its files, as a hand edit
    would make them (valid seal, valid manifest digest)."""
    meta = results.read_meta(folder, stem)
    meta["files"][EVIL] = results.sha256_file(folder.parents[3] / "README.md")
    results.write_meta(folder, stem, meta)
    listed = json.loads((folder / store_verify.MANIFEST).read_text())
    listed |= {f"{stem}.json": results.sha256_file(folder / f"{stem}.json"), EVIL: meta["files"][EVIL]}
    (folder / store_verify.MANIFEST).write_text(json.dumps(listed))


def test_a_recompute_of_a_run_naming_the_readme_deletes_nothing_outside(root, capsys):
    compute([0])
    forge_evil(folder_of(root))
    before = outside(root)
    compute([0], scale=2.0)  # stale: recomputed, and the last version's files that it no longer has removed
    assert CALLS == [0, 0] and outside(root) == before
    assert store_verify.verify(root / "data" / "store") == []


def test_write_manifest_and_verify_refuse_a_name_outside_the_folder(root):
    compute([0])
    folder = folder_of(root)
    forge_evil(folder)
    with pytest.raises(files.UnsafeName, match=r"run0\.json names '\.\./\.\./\.\./\.\./README\.md' as one of"):
        store_verify.write_manifest(folder)
    problems = store_verify.verify(root / "data" / "store")
    assert any("manifest.json names '../../../../README.md' as one of its files" in p for p in problems), problems
    [state] = store.plan(lambda: compute([0]), Scope("tiny", "default"))
    assert state.state == "damaged" and "README.md" in state.why[0]


@pytest.mark.parametrize("level", ["root", "profile", "chapter"])
def test_a_store_folder_that_is_a_link_is_refused_before_anything_is_written(root, level, tmp_path):
    away = tmp_path / "away"
    away.mkdir()
    link = {"root": root / "data" / "store", "profile": root / "data" / "store" / "default", "chapter": None}[level]
    link = link or folder_of(root)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(away, target_is_directory=True)
    with pytest.raises(store_verify.StoreError, match=rf"{link} is a symbolic link, not a folder of the results store"):
        compute([0])
    assert CALLS == [] and list(away.iterdir()) == []


DAMAGED = {
    "merge-conflict markers": '<<<<<<< HEAD\n{"run0.json": "a"}\n=======\n{"run0.json": "b"}\n>>>>>>> theirs\n',
    "an empty object": "{}",
    "an empty file": "",
    "a JSON list": "[]",
    "not UTF-8": b"\xff\xfe{",
}


@pytest.mark.parametrize("damage", DAMAGED.values(), ids=DAMAGED.keys())
def test_a_damaged_manifest_is_one_line_naming_it_and_the_fix_before_any_training(root, damage):
    compute([0, 1])
    path = folder_of(root) / store_verify.MANIFEST
    path.write_bytes(damage if isinstance(damage, bytes) else damage.encode())
    [line] = store_verify.verify(root / "data" / "store")
    assert line.startswith(f"{path} is damaged (") and line.endswith(store_verify.REPAIR)
    states = store.plan(lambda: compute([0, 1]), Scope("tiny", "default"))
    assert [s.state for s in states] == ["damaged"] * 2 and states[0].why == (line,)
    with pytest.raises(store_verify.StoreError, match="is damaged"):
        compute([0, 1])
    assert CALLS == [0, 1]  # nothing trained again
    assert store_verify.repair(folder_of(root)) == (2, [])
    assert store_verify.verify(root / "data" / "store") == []
    compute([0, 1])
    assert CALLS == [0, 1]  # both read from the store again


def test_a_stray_json_that_is_not_utf8_is_named_before_any_training(root):
    compute([0])
    (folder_of(root) / "stray.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(store_verify.StoreError, match=r"stray\.json is no stored run's metadata \(UnicodeDecodeError"):
        compute([0, 1])
    assert CALLS == [0]
    assert any("stray.json is named by no manifest" in p for p in store_verify.verify(root / "data" / "store"))


def test_a_store_that_cannot_be_written_is_found_before_any_training(root, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)  # as a read-only folder does (root writes one anyway)
    with pytest.raises(store_verify.StoreError, match=r"cannot write into .* \(Permission denied\); make the results"):
        compute([0])
    assert CALLS == [] and not (root / "data" / "store").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_store_folder_is_found_before_any_training(root):
    compute([0])
    folder_of(root).chmod(0o555)
    try:
        with pytest.raises(store_verify.StoreError, match=r"cannot write into .*tiny \(Permission denied\)"):
            compute([0, 1])
    finally:
        folder_of(root).chmod(0o755)
    assert CALLS == [0]


def test_repair_leaves_out_and_names_a_run_whose_seal_fails(root):
    compute([0, 1, 2])
    folder = folder_of(root)
    sealed = (folder / store_verify.MANIFEST).read_bytes()
    (folder / store_verify.MANIFEST).write_text("[]")
    assert store_verify.repair(folder) == (3, [])
    assert (folder / store_verify.MANIFEST).read_bytes() == sealed  # the same manifest, byte for byte
    (folder / "run1.csv").write_text("v\n9.0\n")
    kept, [line] = store_verify.repair(folder)
    assert kept == 2 and line.startswith(f"left out {folder / 'run1.json'}: ") and "sha256 differs" in line
    problems = store_verify.verify(root / "data" / "store")
    assert {p.split(": ")[1] for p in problems} == {
        "run1.csv is named by no manifest (a stray file)",
        "run1.json is named by no manifest (a stray file)",
    }
    [state] = store.plan(lambda: compute([1]), Scope("tiny", "default"))
    assert state.state == "damaged" and "does not name run1.json" in state.why[0]
    compute([0, 1, 2])
    assert CALLS == [0, 1, 2, 1] and store_verify.verify(root / "data" / "store") == []


def test_a_folder_whose_first_manifest_was_never_written_takes_its_next_run(root):
    """A kill between a folder's first run and its first manifest: the next run writes the manifest, naming both."""
    compute([0])
    (folder_of(root) / store_verify.MANIFEST).unlink()
    assert store_verify.damage(folder_of(root), "run0").endswith(
        f"is missing; rebuild it from the sealed runs: {store_verify.REPAIR}"
    )
    compute([0, 1])
    assert CALLS == [0, 0, 1] and store_verify.verify(root / "data" / "store") == []
