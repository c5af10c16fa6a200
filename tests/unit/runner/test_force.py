"""``reproduce --force`` reaches the chapter's kernel as the store's ``recompute`` mode (``store_modes.forcing``):
the stored runs are computed afresh too, not only the page; with the store off it stays off."""

import pytest

from qkov_lib.runner import execute
from qkov_lib.runs import store, store_modes


@pytest.mark.parametrize(
    ("force", "mode", "kernel"),
    [(True, "", store_modes.RECOMPUTE), (False, "", ""), (True, "off", "off"), (False, "off", "off")],
)
def test_the_kernel_gets_the_store_mode_of_force(tmp_path, monkeypatch, force, mode, kernel):
    seen = []
    monkeypatch.setenv(store.OFF_ENV, mode)
    monkeypatch.setattr(
        execute.papermill, "execute_notebook", lambda *a, **k: seen.append(execute.os.environ[store.OFF_ENV])
    )
    with pytest.raises(execute.ChapterFailed, match="saved no results"):
        execute.run_notebook("theorem1", "smoke", {}, tmp_path, tmp_path, progress=False, force=force)
    assert seen == [kernel] and execute.os.environ[store.OFF_ENV] == mode  # put back after the run
