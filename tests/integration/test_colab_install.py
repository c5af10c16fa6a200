"""The first cell of a Colab notebook, run: in a fresh environment, it installs the companion at this checkout's
commit, and the chapter then runs under papermill (tests/project/test_colab.py checks the notebooks as files)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import nbformat
import pytest

from qkov_lib.core.paths import REPO_ROOT
from qkov_lib.runner import notebooks

REPO = "https://github.com/example-owner/qkov-companion"


def shell_command(line: str) -> list[str]:
    """A ``%pip ...`` line of a cell as the command IPython runs for it (``python -m pip ...``)."""
    import shlex

    assert line.startswith("%pip ")
    return [sys.executable, "-m", "pip", *shlex.split(line[len("%pip ") :])]


def test_the_first_cell_installs_and_the_chapter_runs_in_a_fresh_environment(tmp_path):
    """The first cell of a Colab notebook, pointed at a clone of this checkout at its HEAD, in a fresh venv that sees
    the project's installed packages (a .pth line) but not the project: pip may use no index (so it downloads
    nothing, torch included) and builds with the setuptools installed; the library then imports from the clone pip
    checked out, and the whole notebook runs under papermill with profile smoke, saving into that checkout."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    head = subprocess.run([git, "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("this checkout is not a git repository")
    commit = head.stdout.strip()
    clone = tmp_path / "clone"
    subprocess.run([git, "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    venv = tmp_path / "venv"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "zz_project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    src = tmp_path / "src"
    nb = notebooks.colab_notebook(
        "fig4_mu_trajectories", REPO, commit, source=f"git+file://localhost{clone}", src=str(src)
    )
    first = nb.cells[0].source
    (pip_line,) = [line for line in first.splitlines() if line.startswith("%pip")]
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    cwd = tmp_path / "work"
    cwd.mkdir()
    started = time.monotonic()
    command = shell_command(pip_line)
    command[0] = str(python)
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    print(f"the install took {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    checkout = src / notebooks.CHECKOUT
    assert (
        subprocess.run([git, "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
        == commit
    )
    where = subprocess.run(
        [str(python), "-c", "import qkov_lib, torch; print(qkov_lib.__file__)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.returncode == 0, where.stderr[-3000:]
    assert Path(where.stdout.strip()) == checkout / "qkov_lib" / "__init__.py"
    installed = {p.name.split("-")[0].lower() for p in site.iterdir() if p.suffix == ".dist-info"}
    assert installed == {"qkov_lib"}, f"pip installed more than the companion: {installed}"

    # the whole notebook, first cell included (pip finds everything installed), in that environment
    notebook = tmp_path / "fig4.ipynb"
    nbformat.write(nb, notebook)
    started = time.monotonic()
    run = subprocess.run(
        [
            str(python),
            "-m",
            "papermill",
            str(notebook),
            str(tmp_path / "out.ipynb"),
            "-p",
            "profile",
            "smoke",
            "--cwd",
            str(cwd),
            "-k",
            "python3",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    print(f"the chapter took {time.monotonic() - started:.1f} s under papermill")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = json.loads((tmp_path / "out.ipynb").read_text())
    shown = json.dumps(out["cells"])
    assert "application/vnd.plotly.v1+json" in shown, "the chapter's figure is shown where its cell is"
    saved = list((checkout / "data" / "results" / "interactive" / "smoke").rglob("*.csv"))
    assert saved, "the chapter (its kernel importing the clone's library) saves into the clone's results"
