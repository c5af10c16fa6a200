"""The commit a stored run names (``store_verify.computed_at``): the store's own files, which a computation rewrites
as each of its runs finishes, make no commit '+dirty'; any other tracked file that differs does. Runs git."""

import subprocess

from qkov_lib.core import paths, results
from qkov_lib.runs.store_verify import computed_at


def git(root, *args):
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def test_the_stores_own_files_make_no_commit_dirty_and_code_does(tmp_path, monkeypatch):
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "data" / "store").mkdir(parents=True)
    (tmp_path / "data" / "store" / "run.csv").write_text("a\n1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    head = git(tmp_path, "rev-parse", "HEAD")
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(results, "REPO_ROOT", tmp_path)
    store = tmp_path / "data" / "store"
    assert computed_at(store) == head
    (store / "run.csv").write_text("a\n2\n")  # a run of this computation, written moments before
    assert computed_at(store) == head
    (tmp_path / "code.py").write_text("x = 2\n")  # code that is not the commit's
    assert computed_at(store) == head + "+dirty"
