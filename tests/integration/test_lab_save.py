"""JupyterLab's save through the book's contents manager (``runner.lab``), which starts the chapter's kernel once to
learn its ``language_info``: view metadata that does not check is an HTTP 400, and nothing is written."""

from __future__ import annotations

import pytest

from qkov_lib.core.paths import NOTEBOOKS_DIR
from qkov_lib.runner.lab_cells import KEY


def test_the_server_answers_garbled_metadata_with_a_400_and_writes_nothing(tmp_path):
    pytest.importorskip("jupyter_server")
    import asyncio

    from tornado import web

    from qkov_lib.runner.lab import ChapterContentsManager

    source = NOTEBOOKS_DIR / "lemma3.md"
    (tmp_path / "lemma3.md").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    manager = ChapterContentsManager(root_dir=str(tmp_path))
    model = asyncio.run(manager.get("lemma3.md"))
    cell = next(c for c in model["content"]["cells"] if KEY in c["metadata"])
    cell["metadata"][KEY] = {"source": 1}
    before = (tmp_path / "lemma3.md").read_bytes()
    with pytest.raises(web.HTTPError) as err:
        asyncio.run(manager.save({"type": "notebook", "format": "json", "content": model["content"]}, "lemma3.md"))
    assert err.value.status_code == 400 and "qkov_lab metadata is garbled" in err.value.log_message
    assert (tmp_path / "lemma3.md").read_bytes() == before
