"""qkov_lib: the library behind the companion to arXiv 2608.06776 ("Faster Query-Key Learning Sharpens Attention").

Importing it first turns on the portable arithmetic mode (``portable``: the same bits on any x86-64 CPU with AVX2),
before torch, numpy's BLAS or numba compute; ``QKOV_PORTABLE=0`` turns it off."""

from .core import portable

__version__ = "0.1.0"

try:
    portable.apply(strict=False)
except ValueError:  # a QKOV_PORTABLE of no known level: the runner's checks and chapter.start report it, once
    pass
