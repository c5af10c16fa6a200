"""The publishing workflow: valid against the GitHub Actions schema (check-jsonschema's vendored copy, offline), and
consistent with this repository (jobs it needs exist, the make targets and profiles it runs exist)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from qkov_lib.chapter import CHOICES
from qkov_lib.results import REPO_ROOT

WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
LINT = [str(Path(sys.executable).parent / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows"]


def test_there_is_a_workflow():
    assert [p.name for p in WORKFLOWS] == ["book.yml"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_valid(path):
    proc = subprocess.run(LINT + [str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_linter_catches_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  test:\n    steps: not-a-list\n")
    assert subprocess.run(LINT + [str(bad)], capture_output=True).returncode != 0


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_the_repository(path):
    jobs = yaml.safe_load(path.read_text())["jobs"]
    targets = set(re.findall(r"^([a-z]+):", (REPO_ROOT / "Makefile").read_text(), re.M))
    for name, job in jobs.items():
        needs = job.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            assert need in jobs, f"{name} needs unknown job {need}"
        for step in job.get("steps", []):
            for target in re.findall(r"\bmake (\w+)", step.get("run", "")):
                assert target in targets, f"{name} runs make {target}, which the Makefile lacks"
            for profile in re.findall(r"PROFILE=(\w+)", step.get("run", "")):
                assert profile in CHOICES, f"{name} uses unknown profile {profile}"
    on = yaml.safe_load(path.read_text()).get(True) or {}  # YAML 1.1 reads the key `on` as True
    for option in on.get("workflow_dispatch", {}).get("inputs", {}).get("profile", {}).get("options", []):
        assert option in CHOICES


def test_binder_builds_the_pinned_environment_and_opens_chapters_as_notebooks():
    """The chapters' launch links open on Binder: its environment is the pinned one plus the library, and .md files
    open as notebooks (the same setting `make lab` writes into the project's own environment)."""
    binder = REPO_ROOT / "binder"
    assert (binder / "requirements.txt").read_text().split() == ["-r", "../requirements.txt"]
    assert (binder / "runtime.txt").read_text().strip() == "python-3.11"
    post = binder / "postBuild"
    assert post.stat().st_mode & 0o111 and "pip install --no-deps -e ." in post.read_text()
    viewer = "jupytext-config set-default-viewer markdown myst"
    assert viewer in post.read_text()
    assert viewer.split(" ", 1)[1] in (REPO_ROOT / "Makefile").read_text().replace("\\\n\t\t", "")
