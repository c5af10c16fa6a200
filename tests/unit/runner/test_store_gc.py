"""``results gc`` (``qkov_lib.runner.store_gc``): the committed runs no current plan lists are found, and removed
with ``--remove``, only in chapters whose every run is current and in folders no chapter owns; the store stays
sound (each manifest rewritten, an emptied folder removed)."""

from argparse import Namespace

import pandas as pd
import pytest

from qkov_lib.core import results
from qkov_lib.runner import catalog, store_gc, stored
from qkov_lib.runs import store, store_verify


def sealed(root, folder, *names):
    """Stored runs with one table each, sealed, and the folder's manifest."""
    path = root / "default" / folder
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        results.save(
            path, name, {"main": pd.DataFrame({"x": [1]})}, {"run": name, "chapter": folder, "profile": "default"}
        )
    store_verify.write_manifest(path)


@pytest.fixture
def layout(tmp_path, monkeypatch):
    root = tmp_path / "store"
    monkeypatch.setenv(store.ROOT_ENV, str(root))
    sealed(root, "alpha", "run-0", "renamed-0")  # alpha lists run-0 alone, all current: renamed-0 is unused
    sealed(root, "alpha--part", "late-0")  # a part of alpha stored apart, listed
    sealed(root, "beta", "run-0", "old-0")  # beta has a stale run: not swept, old-0 kept
    sealed(root, "removed", "run-0")  # no chapter owns it: unused whole
    listed = {
        "alpha": [store.RunState("run-0", "current"), store.RunState("late-0", "current", folder="alpha--part")],
        "beta": [store.RunState("run-0", "stale")],
    }
    monkeypatch.setattr(catalog, "CHAPTERS", dict.fromkeys(["alpha", "beta", "summary"]))
    monkeypatch.setattr(stored, "has_stored_runs", lambda chapter: chapter in listed)
    monkeypatch.setattr(stored, "chapter_runs", lambda c, p: stored.ChapterRuns(c, p, listed[c]))
    return root


def test_gc_lists_then_removes_only_what_no_current_plan_uses(layout, capsys):
    assert store_gc.command(Namespace(profile="default", remove=False)) == 1  # beta could not be swept
    out = capsys.readouterr().out
    assert "alpha: 1 run(s) no current key uses: renamed-0" in out and "removed: 1 run(s)" in out
    assert "beta: not swept (not every run current" in out and "old-0" not in out
    assert out.strip().endswith("default: 2 stored run(s) no current key uses, found (--remove removes them)")
    assert (layout / "default" / "alpha" / "renamed-0.json").exists()  # listing removes nothing
    store_gc.command(Namespace(profile="default", remove=True))
    left = sorted(str(p.relative_to(layout)) for p in layout.rglob("*.json"))
    assert left == [
        "default/alpha--part/late-0.json",
        "default/alpha--part/manifest.json",
        "default/alpha/manifest.json",
        "default/alpha/run-0.json",
        "default/beta/manifest.json",
        "default/beta/old-0.json",
        "default/beta/run-0.json",
    ]
    assert not (layout / "default" / "removed").exists() and not list(layout.rglob("renamed-0*"))
    assert store_verify.verify(layout) == []
