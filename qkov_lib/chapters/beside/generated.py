"""The command line of a module that writes a page's generated table (``book/generated/``): print it, or write it to
``--out``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def main(describe: str, make: Callable[[], str], argv: list[str] | None = None) -> None:
    """Parse ``--out``; write ``make()`` there, or print it (``describe``: the command's one-line description)."""
    parser = argparse.ArgumentParser(description=describe)
    parser.add_argument("--out", type=Path, default=None, help="write here (default: print)")
    args = parser.parse_args(argv)
    text = make()
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text, encoding="utf-8")
