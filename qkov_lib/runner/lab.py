"""The chapters in JupyterLab (``make lab``, Binder): the server's contents manager, jupytext's (a chapter's source,
``notebooks/<name>.md``, opens as a notebook) with one addition, so that opening a chapter leaves its tab clean.

jupytext keeps ``language_info`` out of a MyST source (its default metadata filter keeps ``kernelspec`` and
``jupytext``), so the notebook JupyterLab 4.6 loads has none, and it marks the tab unsaved twice with no edit: right
after loading, ``NotebookModel.fromJSON`` adds a placeholder ``language_info`` (``{"name": ""}``) once the document
has been marked clean, and when the kernel connects the notebook writes the kernel's own ``language_info`` over it.
Each is a change to the shared document, which marks it dirty. This contents manager reads a text notebook as
jupytext does and adds the ``language_info`` its kernel will report (asked once per kernel of that kernel's
interpreter): neither step then changes anything. Saving is jupytext's, which leaves ``language_info`` out, so the
source is written back byte for byte. It also shows the chapter's cells as JupyterLab should (``lab_cells``): the
cells the book hides collapsed, the book's references as plain Markdown; saving undoes both. The book and papermill
never see any of it: they read the sources with jupytext.

    jupyter lab --ServerApp.contents_manager_class=qkov_lib.runner.lab.ChapterContentsManager

JupyterLab's own packages (``requirements-lab.txt``) are needed to import this module, not to build the book."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class
from tornado import web

from .lab_cells import ViewError, from_lab, to_lab

# what an ipykernel kernel answers in its kernel_info_reply, printed by the kernel's interpreter
ASK_IPYKERNEL = "import json, ipykernel.ipkernel as k; print(json.dumps(k.IPythonKernel.language_info))"
# a kernel command starting with one of these runs on the server's interpreter (jupyter_client's rule)
SERVER_PYTHON = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
ASK_TIMEOUT = 60  # seconds; importing ipykernel takes one or two
# JupyterLab's settings for the chapters: no autosave, so a parameter tried out in a chapter (its results go to
# data/results/interactive) is never written into the published source unless saved on purpose (which makes the
# chapter stale); no news pop-up
SETTINGS = {
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false"},
}


def kernel_language_info(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The ``language_info`` an ipykernel kernel started with the command ``argv`` (and ``env`` added to this
    process's environment) reports; None for another kind of kernel, or when its interpreter cannot say."""
    if argv[1:3] != ["-m", "ipykernel_launcher"]:
        return None
    python = sys.executable if argv[0] in SERVER_PYTHON else argv[0]
    try:
        done = subprocess.run(
            [python, "-c", ASK_IPYKERNEL],
            capture_output=True,
            text=True,
            check=True,
            timeout=ASK_TIMEOUT,
            env={**os.environ, **(env or {})},
        )
        info = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return info if isinstance(info, dict) else None


_JupytextManager: Any = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)  # a class built at run time


class ChapterContentsManager(_JupytextManager):
    """jupytext's contents manager; a notebook read from a text file (no ``language_info`` of its own) gets the one
    its kernel will report. jupytext's server extension sees a jupytext contents manager and leaves it as it is."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._language_info: dict[str, dict[str, Any] | None] = {}  # kernel name -> its language_info

    async def get(
        self, path: str, content: bool = True, type: str | None = None, format: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if model["type"] == "notebook" and model.get("content") and not path.endswith(".ipynb"):
            metadata = model["content"]["metadata"]
            kernel = metadata.get("kernelspec", {}).get("name")
            if kernel and "language_info" not in metadata:
                info = await self.language_info(kernel)
                if info:
                    metadata["language_info"] = info
            to_lab(model["content"])
        return model

    async def save(self, model: dict[str, Any], path: str = "") -> dict[str, Any]:
        """jupytext's save, of the chapter as it was before ``to_lab`` (with the reader's edits)."""
        if model.get("type") == "notebook" and model.get("content") and not path.endswith(".ipynb"):
            model = {**model, "content": copy.deepcopy(model["content"])}
            try:
                lost = from_lab(model["content"])
            except ViewError as err:
                raise web.HTTPError(400, f"{path}: {err}", reason=f"{path}: {err}") from None
            for i, roles in lost.items():
                self.log.warning(
                    "%s: the edit of cell %d changed the words of %s, which stay as written (plain words)",
                    path,
                    i + 1,
                    ", ".join(roles),
                )
        return await super().save(model, path)

    async def language_info(self, kernel: str) -> dict[str, Any] | None:
        """The ``language_info`` kernel ``kernel`` reports (asked once); None when it cannot be known."""
        if kernel not in self._language_info:
            specs = getattr(self.parent, "kernel_spec_manager", None) or KernelSpecManager()
            try:
                spec = specs.get_kernel_spec(kernel)
            except NoSuchKernel:
                info = None
            else:
                info = await asyncio.to_thread(kernel_language_info, list(spec.argv), dict(spec.env))
                if info is None:
                    self.log.warning(
                        "the language_info of kernel %s is unknown: a chapter opened with it shows as "
                        "unsaved until saved",
                        kernel,
                    )
            self._language_info[kernel] = info
        return self._language_info[kernel]


def write_settings(path: Path) -> None:
    """Merge ``SETTINGS`` into a JupyterLab overrides file (``<prefix>/share/jupyter/lab/settings/overrides.json``),
    keeping what is there (jupytext's default viewers)."""
    settings = json.loads(path.read_text()) if path.exists() else {}
    for plugin, values in SETTINGS.items():
        settings.setdefault(plugin, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")


if __name__ == "__main__":  # python -m qkov_lib.runner.lab OVERRIDES_JSON (make lab, Binder)
    write_settings(Path(sys.argv[1]))
