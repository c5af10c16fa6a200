"""Text alternatives for the book's figures, generated from each figure's own data: one or two sentences saying what
it shows and its main reading (a heatmap panel's largest cell and its share, where each line ends, a bar chart's
largest and smallest bar), for a screen reader and for the printed report. Not the caption: the caption says what the
figure is; this says what a reader would see in it."""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from .tables import listed

MAX_PANELS = 8  # panels named one by one; the rest are counted
_TAGS = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Panel:
    """One subplot: its letter ((a), (b), ...), its title (the subplot's annotation, '' if none) and its traces."""

    letter: str
    title: str
    traces: tuple[go.BaseTraceType, ...]


def array(data: object, dtype: type = float) -> np.ndarray:
    """A trace's data as an array, also where plotly holds it as a typed array (``{"dtype", "bdata", "shape"}``,
    what ``to_plotly_json`` writes for numpy data)."""
    if isinstance(data, dict) and "bdata" in data:
        flat = np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
        shape = data.get("shape")
        flat = flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
        return flat.astype(dtype)
    return np.asarray(data if data is not None else [], dtype=dtype)


def plain(text: object) -> str:
    """Plotly's text (``<br>``, ``<b>``, HTML entities) as plain words on one line."""
    return " ".join(html.unescape(_TAGS.sub(" ", str(text or ""))).split())


def value(v: float, unit: str = "") -> str:
    """A number for a sentence: three significant digits, a percentage to one decimal."""
    if unit == "%":
        return f"{v:.1f}%"
    if v != 0 and (abs(v) >= 1e4 or abs(v) < 1e-3):
        return f"{v:.2e}"
    return f"{v:.3g}"


def short(label: str, default: str) -> str:
    """An axis title's first word, to name a position once the sentence before has named the axis in full."""
    return label.split()[0] if label else default


def _axis_key(trace: go.BaseTraceType, letter: str) -> str:
    ref = getattr(trace, f"{letter}axis", None) or letter
    return ref.replace(letter, f"{letter}axis", 1)


def _domain(fig: go.Figure, key: str) -> tuple[float, float]:
    axis = fig.layout[key] if key in fig.layout else None
    domain = axis.domain if axis is not None and axis.domain is not None else (0.0, 1.0)
    return float(domain[0]), float(domain[1])


def panels(fig: go.Figure) -> list[Panel]:
    """The figure's subplots in the order their traces come, each titled by the annotation ``make_subplots`` puts
    centred above it."""
    groups: dict[tuple[str, str], list[go.BaseTraceType]] = {}
    for trace in fig.data:
        groups.setdefault((_axis_key(trace, "x"), _axis_key(trace, "y")), []).append(trace)
    out = []
    for i, ((xkey, ykey), traces) in enumerate(groups.items()):
        x0, x1 = _domain(fig, xkey)
        top = _domain(fig, ykey)[1]
        title = next(
            (
                plain(a.text)
                for a in fig.layout.annotations
                if a.x is not None
                and a.y is not None
                and abs(a.x - (x0 + x1) / 2) < 0.02
                and abs(a.y - top) < 0.03
                and a.text
            ),
            "",
        )
        out.append(Panel(f"({chr(ord('a') + i)})" if len(groups) > 1 else "", title, tuple(traces)))
    return out


SHARE = re.compile(r"%\{z[^}]*\}%")  # a hover template that prints the cell's value as a percentage


def _words(cells: np.ndarray) -> str:
    """A heatmap of words (its cells' ``customdata``, e.g. verdicts): how many cells have each."""
    words = [plain(w) for w in cells.ravel() if plain(w)]
    tally = {w: words.count(w) for w in dict.fromkeys(words)}
    return (
        listed([f"{n} {'cell reads' if n == 1 else 'cells read'} “{w}”" for w, n in tally.items()])
        if tally
        else "no cells"
    )


def _heatmap(trace: go.Heatmap, x_label: str, y_label: str) -> str:
    """A heatmap's main reading: for one of numbers, its largest cell, its value and where it sits; for one of
    words, how many cells have each word."""
    if trace.customdata is not None:
        cells = array(trace.customdata, object)
        if cells.size and all(isinstance(c, str) for c in cells.ravel()):
            return _words(cells)
    z = array(trace.z)
    if z.size == 0 or not np.isfinite(z).any():
        return "no values"
    row, col = np.unravel_index(np.nanargmax(z), z.shape)
    xs = [plain(v) for v in array(trace.x, object)] if trace.x is not None else list(range(z.shape[1]))
    ys = [plain(v) for v in array(trace.y, object)] if trace.y is not None else list(range(z.shape[0]))
    unit = "%" if SHARE.search(str(trace.hovertemplate or "")) else ""
    where = f"{short(x_label, 'x')} {xs[col]}, {short(y_label, 'y')} {ys[row]}"
    return f"the largest cell, {value(z[row, col], unit)}, is at {where}"


def _ends(traces: Sequence[go.BaseTraceType]) -> list[tuple[str, float, float]]:
    """(name, last x, last y) of each named line with finite data, once per name."""
    ends: dict[str, tuple[float, float]] = {}
    for t in traces:
        if not isinstance(t, go.Scatter) or t.x is None or t.y is None or t.hoverinfo == "skip":
            continue
        x, y = array(t.x, object), array(t.y, object)
        keep = [i for i in range(min(len(x), len(y))) if _finite(y[i])]
        name = plain(t.name) or "line"
        if keep and name not in ends:
            ends[name] = (x[keep[-1]], float(y[keep[-1]]))
    return [(name, x, y) for name, (x, y) in ends.items()]


def _finite(v: object) -> bool:
    try:
        return v is not None and math.isfinite(float(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _lines(traces: Sequence[go.BaseTraceType], x_label: str = "") -> str:
    """Where the lines end: the highest and the lowest first, the rest counted."""
    ends = sorted(_ends(traces), key=lambda e: -e[2])
    if not ends:
        return ""
    if len(ends) == 1:
        name, x, y = ends[0]
        return f"{name} ends at {value(y)} (x = {x})"
    if value(ends[0][2]) == value(ends[-1][2]):
        return (
            f"at the last {x_label or 'point'}, {'both' if len(ends) == 2 else f'all {len(ends)}'} lines "
            f"end at {value(ends[0][2])}"
        )
    named = [ends[0], ends[-1]] if len(ends) > 2 else ends
    parts = [
        f"{name} highest at {value(y)}" if i == 0 else f"{name} lowest at {value(y)}"
        for i, (name, _, y) in enumerate(named)
    ]
    more = f", of {len(ends)} lines" if len(ends) > 2 else ""
    return f"at the last {x_label or 'point'}, {listed(parts)}{more}"


def _bars(traces: Sequence[go.BaseTraceType]) -> str:
    bars = [
        (plain(x), float(y))
        for t in traces
        if isinstance(t, go.Bar)
        for x, y in zip(array(t.x, object), array(t.y, object))
        if _finite(y)
    ]
    if not bars:
        return ""
    high, low = max(bars, key=lambda b: b[1]), min(bars, key=lambda b: b[1])
    return f"{len(bars)} bars, the tallest {high[0]} ({value(high[1])}), the shortest {low[0]} ({value(low[1])})"


def reading(panel: Panel, x_label: str = "", y_label: str = "") -> str:
    """A panel's main reading in a clause."""
    heat = [t for t in panel.traces if isinstance(t, go.Heatmap)]
    if heat:
        return _heatmap(heat[0], x_label, y_label)
    return _bars(panel.traces) or _lines(panel.traces, x_label) or "no data"


def kind(fig: go.Figure) -> str:
    names = {type(t).__name__ for t in fig.data}
    if "Heatmap" in names:
        return "heatmap"
    if "Bar" in names:
        return "bar chart"
    modes = {str(getattr(t, "mode", "") or "lines") for t in fig.data}
    return "line chart" if any("lines" in m for m in modes) else "scatter plot"


def axis_titles(fig: go.Figure) -> tuple[str, str]:
    """The x and y titles: the first axis's own title, else the figure-wide one ``make_subplots`` writes as an
    annotation (``x_title``, ``y_title``: the only annotations not above a panel)."""
    x, y = plain(fig.layout.xaxis.title.text), plain(fig.layout.yaxis.title.text)
    for note in fig.layout.annotations:
        if note.textangle == -90 and not y:
            y = plain(note.text)
        elif note.yanchor == "top" and note.y is not None and note.y <= 0 and not x:
            x = plain(note.text)
    return x, y


def describe(fig: go.Figure) -> str:
    """One or two sentences: the figure's kind, its axes and panels, then each panel's main reading (the first
    ``MAX_PANELS`` panels; the rest counted)."""
    shown = panels(fig)
    if not shown:
        return "An empty figure."
    x, y = axis_titles(fig)
    axes = f" of {y} against {x}" if x and y else (f" against {x}" if x else "")
    count = f" in {len(shown)} panels" if len(shown) > 1 else ""
    first = f"A {kind(fig)}{axes}{count}."
    parts = []
    for p in shown[:MAX_PANELS]:
        label = p.title if re.match(r"\([a-z]\)", p.title) else " ".join(s for s in (p.letter, p.title) if s)
        parts.append(f"{label}: {reading(p, x, y)}" if label else reading(p, x, y))
    rest = len(shown) - MAX_PANELS
    tail = f"; and {rest} more panels" if rest > 0 else ""
    second = "; ".join(parts) + tail
    return f"{first} {second[0].upper()}{second[1:]}."
