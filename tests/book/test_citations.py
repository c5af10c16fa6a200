"""The project's papers: every work the book cites is in the bibliography with a link (DOI, arXiv or URL), every
bibliography entry is cited or listed on purpose, and CITATION.cff is valid Citation File Format."""

import re
import subprocess
import sys
from pathlib import Path

from pybtex.database import parse_file

from qkov_lib import __version__
from qkov_lib.core.paths import REPO_ROOT

BIB = REPO_ROOT / "book" / "references.bib"
SOURCES = sorted((REPO_ROOT / "notebooks").glob("*.md")) + sorted((REPO_ROOT / "book").glob("*.md"))
CITE = re.compile(r"\{cite(?::[pt])?\}`([^`]+)`")


def cited_keys() -> set[str]:
    return {key.strip() for path in SOURCES for keys in CITE.findall(path.read_text()) for key in keys.split(",")}


def test_every_cited_work_is_in_the_bibliography_with_a_link():
    entries = parse_file(str(BIB)).entries
    assert cited_keys() - set(entries) == set()
    unlinked = [key for key, e in entries.items() if not {"doi", "url", "eprint"} & {f.lower() for f in e.fields}]
    assert unlinked == []


def test_every_bibliography_entry_is_cited():
    assert set(parse_file(str(BIB)).entries) - cited_keys() == set()


def test_citation_file_is_valid_and_current():
    cff = REPO_ROOT / "CITATION.cff"
    lint = [str(Path(sys.executable).parent / "check-jsonschema"), "--builtin-schema", "vendor.citation-file-format"]
    proc = subprocess.run(lint + [str(cff)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = cff.read_text()
    assert f'version: "{__version__}"' in text and "arXiv:2608.06776" in text
    assert "MIT License" in (REPO_ROOT / "LICENSE").read_text() and "license: MIT" in text
