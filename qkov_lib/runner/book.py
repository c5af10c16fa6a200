"""Rendering the book with Jupyter Book 1.x: its configuration (the repository, when one is named) and its JavaScript,
served from the build so that the book works offline: plotly.js from the plotly package, and MathJax (2.7) from an
installed copy, Debian's ``libjs-mathjax`` or the folder named by $QKOV_MATHJAX."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import plotly
import yaml

from ..core import files
from ..core.chapter import ParameterError
from ..core.contents import chapter_names
from ..core.paths import REPO_ROOT
from . import book_ext
from .book_ext import REPOSITORY
from .published import origin_url, repository_url

REPO_URL_ENV = "QKOV_REPO_URL"  # the repository's web address, e.g. https://github.com/OWNER/REPO
BRANCH_ENV = "QKOV_BRANCH"  # the branch the chapters' launch and source links name (default: main)

MATHJAX_ENV = "QKOV_MATHJAX"
MATHJAX_SYSTEM = Path("/usr/share/javascript/mathjax")  # apt-get install libjs-mathjax
# what the TeX-AMS_CHTML configuration loads: TeX input, CommonHTML output, its web fonts, English messages
MATHJAX_PARTS = (
    "MathJax.js",
    "config/TeX-AMS_CHTML.js",
    "extensions",
    "jax/input/TeX",
    "jax/output/CommonHTML",
    "jax/element",
    "fonts/HTML-CSS/TeX/woff",
    "localization/en",
)
# loaded when no copy is installed: the same MathJax from a CDN, so formulas then need the internet
CDN_SHIM = """// No local MathJax was found when this book was built (see the README: libjs-mathjax or QKOV_MATHJAX);
// formulas are typeset by MathJax from a CDN, which needs the internet.
(function () {
  var s = document.createElement("script");
  s.src = "https://cdn.jsdelivr.net/npm/mathjax@2.7.9/MathJax.js?config=TeX-AMS_CHTML";
  document.head.appendChild(s);
})();
"""


def copy_plotly(static: Path) -> None:
    static.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", static / "plotly.min.js")


def mathjax_source() -> Path | None:
    """An installed MathJax 2 folder: $QKOV_MATHJAX, else Debian's; None when there is neither."""
    for folder in (os.environ.get(MATHJAX_ENV), MATHJAX_SYSTEM):
        if folder and (Path(folder) / "MathJax.js").is_file():
            return Path(folder)
    return None


def copy_mathjax(static: Path) -> bool:
    """Put MathJax's needed parts under ``static/mathjax`` (links resolved); True when a local copy was found, else
    a loader for the CDN is written there instead."""
    target = static / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    source = mathjax_source()
    if source is None:
        (target / "MathJax.js").write_text(CDN_SHIM)
        return False
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / part, target / part)
    return True


def _book_config(root: Path, repo_url: str | None, branch: str) -> Path:
    """The book's configuration: ``_config.yml`` itself, or, given a repository URL, a copy under ``_build`` that
    adds the repository (its link on every page, and the chapters' launch links, qkov_lib/runner/book_ext.py)."""
    config = root / "_config.yml"
    if not repo_url:
        return config
    if not re.fullmatch(r"https?://[^\s/]+/[^\s]+", repo_url):
        raise ParameterError(f"repository URL {repo_url!r} is not an http(s) URL, e.g. https://github.com/OWNER/REPO")
    settings = yaml.safe_load(config.read_text())
    settings["repository"] = {"url": repo_url.rstrip("/"), "branch": branch}
    # the launch links' repository (book_ext): Jupyter Book's own default fills html_theme_options' otherwise
    settings.setdefault("sphinx", {}).setdefault("config", {})[REPOSITORY] = repo_url.rstrip("/")
    settings.setdefault("html", {})["use_repository_button"] = True
    derived = root / "_build" / "_config.repository.yml"
    derived.parent.mkdir(parents=True, exist_ok=True)
    derived.write_text(yaml.safe_dump(settings, sort_keys=False))
    return derived


BUILD_STAMP = ".qkov-build.json"  # <root>/_build/.qkov-build.json: the last build that succeeded, and its inputs


GENERATED_STATIC = ("plotly.min.js", "mathjax")  # what every build writes into book/_static (copy_plotly, copy_mathjax)


def book_inputs(root: Path, config: Path) -> str:
    """A digest of what the book's pages depend on besides the chapters' notebooks: the configuration, the table of
    contents, the book's own pages, style sheet and bibliography, and the Sphinx extension's code. Sphinx notices a
    changed notebook by itself; a change here rebuilds every page (``--all``): Sphinx copies the style sheet only
    when it writes pages, so an edit of it alone would otherwise not reach the built book."""

    def own(path: Path) -> bool:
        parts = path.relative_to(root / "book").parts
        return parts[0] != "chapters" and not (parts[0] == "_static" and parts[1] in GENERATED_STATIC)

    files = [root / "_config.yml", root / "_toc.yml", config, Path(book_ext.__file__)]
    files += sorted(p for p in (root / "book").rglob("*") if p.is_file() and own(p))
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root) if path.is_relative_to(root) else path.name).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def needs_full_build(stamp: Path, inputs: str, strict: bool) -> bool:
    """Rebuild every page unless the last build succeeded with the same inputs and was at least as strict (so the
    pages Sphinx does not reread had no warning)."""
    try:
        last = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return True
    return last.get("inputs") != inputs or (strict and not last.get("strict"))


def link_branch(branch: str | None = None) -> str:
    """The branch the links name: ``branch``, else $QKOV_BRANCH, else main (a branch name git allows in a URL)."""
    name = branch or os.environ.get(BRANCH_ENV) or "main"
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", name) or name.startswith(("-", "/")) or ".." in name:
        raise ParameterError(
            f"branch {name!r} is not a branch name for a link (letters, digits, '.', '_', '-', '/'), e.g. main"
        )
    return name


def build_book(
    root: Path = REPO_ROOT,
    out_dir: Path | None = None,
    strict: bool = True,
    repo_url: str | None = None,
    branch: str | None = None,
) -> Path:
    """Render the book with Jupyter Book 1.x from executed chapters (no execution at build time); returns index.html.
    ``repo_url`` (default $QKOV_REPO_URL, else the clone's own ``origin`` where it is a GitHub repository) adds the
    repository link and each chapter's launch links, which name ``branch`` (default $QKOV_BRANCH, else main); without
    one the pages have neither."""
    out_dir = out_dir or root / "book" / "chapters"
    missing = [c for c in chapter_names() if not (out_dir / f"{c}.ipynb").exists()]
    if missing:
        raise ParameterError(
            f"chapters not yet executed: {', '.join(missing)}; run 'python -m qkov_lib reproduce' first"
        )
    static = root / "book" / "_static"
    copy_plotly(static)
    if not copy_mathjax(static):
        print(f"no local MathJax (install libjs-mathjax, or set {MATHJAX_ENV}): formulas will load it from a CDN")
    repo = repo_url or os.environ.get(REPO_URL_ENV) or repository_url(origin_url())
    config = _book_config(root, repo, link_branch(branch))
    stamp, inputs = root / "_build" / BUILD_STAMP, book_inputs(root, config)
    full = needs_full_build(stamp, inputs, strict)
    stamp.unlink(missing_ok=True)  # a failed or interrupted build leaves none: the next one rebuilds every page
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "--config", str(config)]
    cmd += ["--all"] if full else []  # else Sphinx rereads only the notebooks that changed
    cmd += ["-W", "-n", "--keep-going"] if strict else []
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        files.write_atomic(stamp, json.dumps({"inputs": inputs, "strict": strict}) + "\n")
    else:
        raise RuntimeError(
            f"jupyter-book build failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return root / "_build" / "html" / "index.html"
