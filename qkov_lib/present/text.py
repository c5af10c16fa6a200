"""Text for reading: numbers in scientific notation with superscript powers ('6.9 × 10⁻¹⁶'), and tables whose
headers and cells hold LaTeX, as HTML that MathJax typesets in the book and in JupyterLab."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
from IPython.display import HTML

_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def superscript(n: int) -> str:
    """An integer in superscript digits: -16 -> '⁻¹⁶'."""
    return str(n).translate(_SUPERSCRIPT)


def power(exponent: int) -> str:
    """10 to an integer power as a reader writes it: '10⁻¹⁶' (1 for 10⁰, 10 for 10¹)."""
    return {0: "1", 1: "10"}.get(exponent, "10" + superscript(exponent))


def scientific(value: float | None, digits: int = 1) -> str:
    """A number in scientific notation for reading: '6.9 × 10⁻¹⁶', '2.0' (no power for 10⁰), '10⁻³' (a power of
    ten to no digits), '0', and '' for NaN or None."""
    if value is None or not np.isfinite(value):
        return "" if value is None or np.isnan(value) else str(value)
    if value == 0:
        return "0"
    mantissa, exponent_text = f"{value:.{digits}e}".split("e")
    exponent = int(exponent_text)
    if mantissa in ("1", "-1"):  # a power of ten: '10⁻³'
        return mantissa.replace("1", "") + power(exponent)
    return mantissa if exponent == 0 else f"{mantissa} × 10" + superscript(exponent)


_MATH = re.compile(r"\$([^$]+)\$")


def math_html(text: object) -> str:
    """Text with LaTeX between single dollars as HTML: the text escaped, each formula in the span Sphinx gives inline
    maths (``\\(...\\)``), which MathJax typesets in the built book and in JupyterLab; a line break where the text
    has one."""
    text = "" if text is None or (isinstance(text, float) and np.isnan(text)) else str(text)
    parts = _MATH.split(text)
    return "".join(
        html.escape(p).replace("\n", "<br>")
        if i % 2 == 0
        else f'<span class="math notranslate nohighlight">\\({html.escape(p)}\\)</span>'
        for i, p in enumerate(parts)
    )


def math_table(table: pd.DataFrame, index: bool = True) -> HTML:
    """A table whose headers and cells may hold LaTeX in ``$...$`` (``readable`` text otherwise), as HTML whose
    formulas MathJax typesets; empty cells empty. A named index becomes the first columns (one header row)."""
    out = table.copy()
    if index and any(name is not None for name in out.index.names):
        out, index = out.reset_index(), False
    out.columns = _html_index(out.columns)
    out.index = _html_index(out.index)
    out = out.apply(lambda col: col.map(math_html))
    return HTML(out.to_html(escape=False, index=index, na_rep="", classes="qkov-math"))


def _html_index(idx: pd.Index) -> pd.Index:
    if isinstance(idx, pd.MultiIndex):
        return pd.MultiIndex.from_tuples(
            [tuple(math_html(v) for v in t) for t in idx],
            names=[math_html(n) if n is not None else None for n in idx.names],
        )
    return pd.Index([math_html(v) for v in idx], name=math_html(idx.name) if idx.name is not None else None)
