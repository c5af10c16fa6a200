"""The book's JavaScript, served from the build so that the book works offline: plotly.js from the plotly package,
and MathJax (2.7) from an installed copy, Debian's ``libjs-mathjax`` or the folder named by $QKOV_MATHJAX."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

MATHJAX_ENV = "QKOV_MATHJAX"
MATHJAX_SYSTEM = Path("/usr/share/javascript/mathjax")  # apt-get install libjs-mathjax
# what the TeX-AMS_CHTML configuration loads: TeX input, CommonHTML output, its web fonts, English messages
MATHJAX_PARTS = ("MathJax.js", "config/TeX-AMS_CHTML.js", "extensions", "jax/input/TeX", "jax/output/CommonHTML",
                 "jax/element", "fonts/HTML-CSS/TeX/woff", "localization/en")
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
    import plotly
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
