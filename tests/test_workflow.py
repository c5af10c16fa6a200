"""The publishing workflow: valid against the GitHub Actions schema (check-jsonschema's vendored copy, offline), and
consistent with this repository (jobs it needs exist, the make targets and profiles it runs exist)."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from qkov_lib.core.chapter import CHOICES
from qkov_lib.core.results import REPO_ROOT

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
    """The chapters' launch links open on Binder: its environment is its own slim pinned one (tests/test_binder.py)
    plus the library, and .md files open as notebooks (the same setting `make lab` writes into the project's own
    environment)."""
    binder = REPO_ROOT / "binder"
    assert (binder / "runtime.txt").read_text().strip() == "python-3.11"
    post = binder / "postBuild"
    assert post.stat().st_mode & 0o111 and "pip install --no-deps -e ." in post.read_text()
    viewer = "jupytext-config set-default-viewer markdown myst"
    assert viewer in post.read_text()
    assert viewer.split(" ", 1)[1] in (REPO_ROOT / "Makefile").read_text().replace("\\\n\t\t", "")


# ---- the publishing jobs -----------------------------------------------------------------------------------------

BOOK = REPO_ROOT / ".github" / "workflows" / "book.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def condition(expr: str | None, event: str, ref: str, profile: str) -> bool:
    """A job's `if:` for an event on a ref (the few forms this workflow uses: ==, !=, &&, ||, always())."""
    if expr is None:
        return True
    values = {"github.event_name": repr(event), "github.ref": repr(ref), "inputs.profile": repr(profile)}
    python = re.sub(r"github\.event_name|github\.ref|inputs\.profile", lambda m: values[m.group()], expr)
    python = python.replace("&&", " and ").replace("||", " or ").replace("always()", "True")
    assert re.fullmatch(r"[\w\s'\"/=!().-]*", python), f"an `if:` this test cannot read: {expr}"
    return bool(eval(python, {"__builtins__": {}}))


def jobs_that_run(event: str, ref: str, profile: str = "paper") -> list[str]:
    """The jobs that run on an event, in file order: a job's `if:` holds and every job it needs ran (a skipped
    need skips it)."""
    jobs = yaml.safe_load(BOOK.read_text())["jobs"]
    ran: list[str] = []
    for name, job in jobs.items():
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        if all(n in ran for n in needs) and condition(job.get("if"), event, ref, profile):
            ran.append(name)
    return ran


def test_which_jobs_run_on_each_event():
    assert jobs_that_run("pull_request", "refs/pull/7/merge") == ["test", "smoke-book"]
    assert jobs_that_run("push", "refs/heads/feature") == ["test"]
    assert jobs_that_run("push", "refs/heads/main") == ["test", "default-book", "deploy-default"]
    assert jobs_that_run("workflow_dispatch", "refs/heads/main") == ["gpu-book", "deploy-gpu"]
    assert jobs_that_run("workflow_dispatch", "refs/heads/feature") == ["gpu-book"]  # Pages come from main only


def sample(text: str) -> str:
    """A workflow string with the GPU job's profile (paper) for ${{ inputs.profile }} and $PROFILE, X for any other
    expression."""
    text = text.replace("${{ inputs.profile }}", "paper").replace("$PROFILE", "paper")
    return EXPRESSION.sub("X", text)


def qkov_commands(job: dict) -> list[list[str]]:
    """Every `python -m qkov_lib ...` a job runs (one per line), as its arguments."""
    return [shlex.split(line) for step in job.get("steps", [])
            for line in re.findall(r"-m qkov_lib (.*)", sample(step.get("run", "")))]


def test_publishing_jobs_restore_build_pack_and_cache_by_branch():
    from qkov_lib.__main__ import build_parser
    jobs = yaml.safe_load(BOOK.read_text())["jobs"]
    for name, profile in (("default-book", "default"), ("gpu-book", "paper")):
        job = jobs[name]
        (command,) = qkov_commands(job)
        args = build_parser().parse_args(command)  # the command exists and takes these options
        assert args.command == "publish" and args.profile == profile
        assert args.budget_minutes < job["timeout-minutes"] - 30, "leave the setup and the book build time"
        steps = job["steps"]
        uses = [s.get("uses", "").split("@")[0] for s in steps]
        publish_at = next(i for i, s in enumerate(steps) if "qkov_lib publish" in s.get("run", ""))
        restore = next(s for s in steps[:publish_at] if s.get("uses", "").startswith("actions/cache/restore")
                       and "results-" in s["with"]["key"])
        save = next(s for s in steps[publish_at:] if s.get("uses", "").startswith("actions/cache/save")
                    and "results-" in s["with"]["key"])
        assert sample(restore["with"]["path"]) == sample(save["with"]["path"]) == str(args.bundle)
        assert "${{ github.ref_name }}" in restore["with"]["key"] and save["with"]["key"] == restore["with"]["key"]
        assert restore["with"]["restore-keys"] + "${{ github.run_id }}-${{ github.run_attempt }}" == \
            restore["with"]["key"], "the newest cache of the branch is restored; each run saves its own"
        assert save["if"].startswith("always()"), "the results are kept also when a chapter failed"
        assert "actions/upload-pages-artifact" in uses and str(args.site) == ".publish/site"
        assert any("gh run download" in s.get("run", "") for s in steps[:publish_at]), "the artifact fallback"
        assert job["concurrency"]["cancel-in-progress"] is False, "a long build is never cancelled by a push"
    smoke = " ".join(s.get("run", "") for s in jobs["smoke-book"]["steps"])
    assert "make book PROFILE=smoke" in smoke
    assert (REPO_ROOT / ".gitignore").read_text().count(".publish/") == 1
