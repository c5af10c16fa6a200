"""The summary's "paper's text against the authors' code": for every chapter whose numbers the authors' notebooks
stored, the paper's number, the authors', this book under `official` and under the build's profile, and whether
`official` gives the authors' number back; read from fake official units in a results root."""
from qkov_lib.metrics.verdicts import DIFFERS, REPRODUCES, UNDECIDED, as_printed


def test_a_number_without_seeds_reproduces_to_the_digits_the_authors_printed():
    assert as_printed(0.149, 0.14883) == REPRODUCES  # rounds to 0.149
    assert as_printed(0.149, 0.1485) == REPRODUCES and as_printed(0.149, 0.1495) == REPRODUCES  # the ends
    assert as_printed(0.149, 0.1484) == DIFFERS and as_printed(0.149, 0.1496) == DIFFERS
    assert as_printed(100.0, 100.04) == REPRODUCES and as_printed(100.0, 100.06) == DIFFERS  # one printed decimal
    assert as_printed(None, 0.149) == UNDECIDED and as_printed(0.149, None) == UNDECIDED  # nothing stored; not run
