"""The size gate: every module of the library stays within 450 lines (modules of one job; a module past it is split
by what it does, not trimmed of its docstrings)."""

from qkov_lib.core.paths import PACKAGE_DIR

MAX_LINES = 450


def test_no_module_of_the_library_exceeds_450_lines():
    sizes = {p.relative_to(PACKAGE_DIR).as_posix(): len(p.read_text().splitlines()) for p in PACKAGE_DIR.rglob("*.py")}
    assert len(sizes) > 50  # the whole package was read
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split each by its jobs): {over}"
