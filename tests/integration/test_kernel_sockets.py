"""A chapter's kernel talks to the runner through Unix sockets in a folder of its own (``execute.kernel_sockets``),
not TCP ports that another process can take between their choice and the kernel's bind ("Address already in use"
when chapters run side by side); the folder is gone after the run."""

import json
import os
from pathlib import Path

import nbformat
import papermill
import pytest

from qkov_lib.runner import execute


@pytest.mark.skipif(os.name != "posix", reason="Unix sockets")
def test_a_kernel_runs_over_unix_sockets_in_a_folder_removed_after(tmp_path):
    code = "from ipykernel.connect import get_connection_info\nprint(get_connection_info())"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with execute.kernel_sockets() as sockets:
        if not sockets:  # a temporary folder whose path is too long for a socket: TCP, as documented
            pytest.skip("the temporary folder's path is too long for a Unix socket here")
        ran = papermill.execute_notebook(
            nb, str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False, **sockets
        )
    info = json.loads(ran.cells[0].outputs[0]["text"])
    folder = Path(info["ip"]).parent
    assert info["transport"] == "ipc" and folder.name.startswith("qkov-kernel-")
    assert not folder.exists()
