"""The committed results store (``data/store``): every file accounted for by its folder's manifest, every stored run
intact under its seal, only the committed profiles, plain CSV and JSON, within its size budget; its bytes the same on
a clone that converts line endings (``.gitattributes``)."""

import shutil
import subprocess

import pytest

from qkov_lib.core.paths import REPO_ROOT, STORE_ROOT
from qkov_lib.runs import store, store_verify


def test_every_committed_file_is_named_by_a_manifest_and_sealed():
    assert store_verify.verify(STORE_ROOT) == []


def test_only_the_committed_profiles_in_plain_csv_and_json_within_the_budget():
    files = [p for p in STORE_ROOT.rglob("*") if p.is_file()]
    assert {p.relative_to(STORE_ROOT).parts[0] for p in files} <= set(store.STORED_PROFILES)
    assert {p.suffix for p in files} <= {".csv", ".json"}
    size_mb = sum(p.stat().st_size for p in files) / 1e6
    assert size_mb <= store.BUDGET_MB, f"the committed store holds {size_mb:.1f} MB, over its {store.BUDGET_MB} MB"


@pytest.mark.skipif(shutil.which("git") is None or not (REPO_ROOT / ".git").exists(), reason="not a git checkout")
def test_a_clone_that_converts_line_endings_reads_the_store_byte_for_byte(tmp_path):
    """A clone with ``core.autocrlf=true`` (Git for Windows' default) checks a store folder out with CRLF line
    endings, and every run reads as damaged; under the checkout's ``.gitattributes`` its bytes are the committed
    ones (this checkout's attributes, given to the clone as its own)."""
    folder = "data/store/default/fig3_incentive"

    def git(*args: str, cwd=tmp_path / "clone") -> None:
        subprocess.run(["git", "-c", "core.autocrlf=true", *args], cwd=cwd, check=True, capture_output=True)

    git("clone", "--no-checkout", "--quiet", str(REPO_ROOT), "clone", cwd=tmp_path)
    git("checkout", "HEAD", "--", folder)
    assert store_verify.verify(tmp_path / "clone" / "data" / "store") != []  # CRLF: every sha256 differs
    shutil.rmtree(tmp_path / "clone" / folder)
    shutil.copyfile(REPO_ROOT / ".gitattributes", tmp_path / "clone" / ".git" / "info" / "attributes")
    git("checkout", "HEAD", "--", folder)
    assert store_verify.verify(tmp_path / "clone" / "data" / "store") == []
