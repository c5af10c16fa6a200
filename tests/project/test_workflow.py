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
from qkov_lib.core.paths import REPO_ROOT

WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONS = sorted((REPO_ROOT / ".github" / "actions").glob("*/action.yml"))  # the workflow's own composite actions
LINT = [str(Path(sys.executable).parent / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows"]
LINT_ACTION = [LINT[0], "--builtin-schema", "vendor.github-actions"]


def test_there_is_a_workflow():
    assert [p.name for p in WORKFLOWS] == ["book.yml"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_valid(path):
    proc = subprocess.run(LINT + [str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", ACTIONS, ids=lambda p: p.parent.name)
def test_action_is_valid(path):
    proc = subprocess.run(LINT_ACTION + [str(path)], capture_output=True, text=True)
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
        for step in steps_of(job):
            for target in re.findall(r"\bmake (\w+)", step.get("run", "")):
                assert target in targets, f"{name} runs make {target}, which the Makefile lacks"
            for profile in re.findall(r"PROFILE=(\w+)", step.get("run", "")):
                assert profile in CHOICES, f"{name} uses unknown profile {profile}"
    on = yaml.safe_load(path.read_text()).get(True) or {}  # YAML 1.1 reads the key `on` as True
    for option in on.get("workflow_dispatch", {}).get("inputs", {}).get("profile", {}).get("options", []):
        assert option in CHOICES


def test_binder_builds_the_pinned_environment_and_opens_chapters_as_notebooks():
    """The chapters' launch links open on Binder: its environment is its own slim pinned one (tests/project/test_binder.py)
    plus the library, and .md files open as notebooks (the same setting `make lab` writes into the project's own
    environment), through the same contents manager."""
    binder = REPO_ROOT / "binder"
    assert (binder / "runtime.txt").read_text().strip() == "python-3.11"
    post = binder / "postBuild"
    assert post.stat().st_mode & 0o111 and "pip install --no-deps -e ." in post.read_text()
    viewer = "jupytext-config set-default-viewer markdown myst"
    assert viewer in post.read_text()
    assert viewer.split(" ", 1)[1] in (REPO_ROOT / "Makefile").read_text().replace("\\\n\t\t", "")
    manager = "qkov_lib.runner.lab.ChapterContentsManager"  # a chapter's tab opens clean (tests/book/test_lab.py)
    assert f'"contents_manager_class"] = "{manager}"' in post.read_text()
    assert f"--ServerApp.contents_manager_class={manager}" in (REPO_ROOT / "Makefile").read_text()


# ---- the publishing jobs -----------------------------------------------------------------------------------------

BOOK = REPO_ROOT / ".github" / "workflows" / "book.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}", re.S)
STATUS = re.compile(r"\b(always|cancelled|success|failure)\(\)")


def evaluate(expr: str, values: dict[str, object]) -> object:
    """An expression of this workflow (the few forms it uses: ==, !=, !, &&, ||, parentheses, strings, status
    functions) with ``values`` for its contexts (name -> value); an unknown context is an error."""
    names = re.compile(r"\b(?:github|inputs|needs|steps)\.[\w.-]+")
    python = STATUS.sub("_", names.sub("_", re.sub(r"'[^']*'", "_", expr)))
    assert re.fullmatch(r"[\w\s=!()&|]*", python), f"an expression this test cannot read: {expr}"
    python = STATUS.sub(lambda m: repr(values[m.group()]), names.sub(lambda m: repr(values[m.group()]), expr))
    python = python.replace("&&", " and ").replace("||", " or ").replace("!=", " != ")
    python = re.sub(r"!(?!=)", " not ", python)
    return eval(python, {"__builtins__": {}})


def decided_false(condition: str, values: dict[str, object]) -> bool:
    """Whether a step's `if:` is false for ``values`` alone: one of its top-level `&&` parts names only those
    contexts and is false (the rest, hashFiles and step outcomes, decided on the runner)."""
    for part in EXPRESSION.sub(r"\1", condition).split(" && "):
        named = re.findall(r"\b(?:inputs|github|steps|needs)\.[\w.-]+", part)
        if named and all(n in values for n in named) and "(" not in part and not evaluate(part, values):
            return True
    return False


def jobs_that_run(event: str, ref: str, profile: str = "paper", failing: frozenset[str] = frozenset()) -> list[str]:
    """The jobs that run on an event, in file order (those in ``failing`` fail, the others succeed): a job runs when
    its `if:` holds, which without a status function also needs every job it needs to have succeeded."""
    jobs = yaml.safe_load(BOOK.read_text())["jobs"]
    results: dict[str, str] = {}
    for name, job in jobs.items():
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        expr = EXPRESSION.sub(r"\1", str(job.get("if", "true")))
        values = {
            "github.event_name": event,
            "github.ref": ref,
            "inputs.profile": profile,
            "always()": True,
            "github.ref_type": "tag" if ref.startswith("refs/tags/") else "branch",
            "cancelled()": False,
            **{f"needs.{n}.result": results[n] for n in needs},
        }
        succeeded = all(results[n] == "success" for n in needs)
        values["success()"], values["failure()"] = succeeded, any(results[n] == "failure" for n in needs)
        runs = bool(evaluate(expr.replace("true", "True") if expr == "true" else expr, values))
        runs = runs and (succeeded or bool(STATUS.search(expr)))
        results[name] = ("failure" if name in failing else "success") if runs else "skipped"
    return [name for name, result in results.items() if result != "skipped"]


def test_which_jobs_run_on_each_event():
    assert jobs_that_run("pull_request", "refs/pull/7/merge") == ["test", "smoke-book"]
    assert jobs_that_run("push", "refs/heads/feature") == ["test"]
    main = ["test", "default-book", "official-book", "deploy"]
    assert jobs_that_run("push", "refs/heads/main") == main  # official after default, the deploy last
    assert jobs_that_run("push", "refs/heads/main", failing=frozenset({"default-book"})) == main  # official still
    assert jobs_that_run("push", "refs/heads/main", failing=frozenset({"official-book"})) == main  # default deploys
    assert jobs_that_run("push", "refs/heads/main", failing=frozenset({"default-book", "official-book"})) == main[:3]
    assert jobs_that_run("push", "refs/heads/main", failing=frozenset({"test"})) == ["test"]
    assert jobs_that_run("push", "refs/tags/v1.0") == ["test", "release-results"]  # the release keeps the results
    assert jobs_that_run("workflow_dispatch", "refs/heads/main") == ["gpu-book", "deploy-gpu"]
    assert jobs_that_run("workflow_dispatch", "refs/heads/feature") == ["gpu-book"]  # Pages come from main only


def test_the_deploy_takes_the_site_of_the_last_book_that_built():
    jobs = yaml.safe_load(BOOK.read_text())["jobs"]
    deploy = next(s for s in jobs["deploy"]["steps"] if s.get("uses", "").startswith("actions/deploy-pages"))
    (name,) = EXPRESSION.findall(deploy["with"]["artifact_name"])
    for official, expected in (("success", "pages-official"), ("failure", "pages-default")):
        assert evaluate(name, {"needs.official-book.result": official}) == expected
    uploads = {
        job: [s["with"]["name"] for s in steps_of(jobs[job]) if "upload-pages-artifact" in s.get("uses", "")]
        for job in ("default-book", "official-book")
    }
    assert uploads == {"default-book": ["pages-default"], "official-book": ["pages-official"]}


def action(uses: str) -> dict:
    """A local composite action (``uses: ./.github/actions/<name>``), parsed."""
    return yaml.safe_load((REPO_ROOT / uses / "action.yml").read_text())


def steps_of(job: dict) -> list[dict]:
    """A job's steps with each local composite action's steps in its place, its `${{ inputs.* }}` and the
    expressions over them evaluated with what the job passes (else the input's default); `github.*` becomes
    '<github.NAME>'."""
    out = []
    for step in job.get("steps", []):
        if not step.get("uses", "").startswith("./"):
            out.append(step)
            continue
        declared = action(step["uses"])["inputs"]
        given = {k: str(v) for k, v in step.get("with", {}).items()}
        values = {f"inputs.{k}": given.get(k, spec.get("default", "")) for k, spec in declared.items()}

        def fill(value: object) -> object:
            if isinstance(value, dict):
                return {k: fill(v) for k, v in value.items()}
            if not isinstance(value, str):
                return value
            return EXPRESSION.sub(
                lambda m: (
                    str(evaluate(m.group(1), {**values, **GITHUB}))
                    if "inputs." in m.group(1) or "github." in m.group(1)
                    else m.group(0)
                ),
                value,
            )

        out += [
            {k: fill(v) if k != "if" else v for k, v in s.items()}
            for s in action(step["uses"])["runs"]["steps"]
            if not decided_false(str(s.get("if", "")), values)
        ]
    return out


GITHUB = {
    f"github.{k}": f"<github.{k}>"
    for k in ("ref_name", "run_id", "run_attempt", "token", "server_url", "repository", "event_name", "ref")
}


def shell(step: dict) -> str:
    """A step's script with its `env` put in and any other expression as X."""
    text = step.get("run", "")
    for k, v in (step.get("env") or {}).items():
        text = text.replace(f'"${k}"', shlex.quote(str(v))).replace(f"${k}", str(v))
    return EXPRESSION.sub("X", text)


def qkov_commands(job: dict, steps: list[dict] | None = None) -> list[list[str]]:
    """Every `python -m qkov_lib ...` a job runs (one per line, its steps expanded), as its arguments."""
    return [
        shlex.split(line)
        for step in (steps_of(job) if steps is None else steps)
        for line in re.findall(r"-m qkov_lib (.*)", shell(step))
    ]


PUBLISHERS = (("default-book", "default"), ("official-book", "official"), ("gpu-book", "paper"))
SITES = ("default", "paper", "official")  # every profile's book the site keeps


@pytest.mark.parametrize("name, profile", PUBLISHERS)
def test_publishing_jobs_restore_build_pack_and_cache_by_branch(name, profile):
    from qkov_lib.__main__ import build_parser

    job = yaml.safe_load(BOOK.read_text())["jobs"][name]
    if profile == "paper":  # the GPU job's profile is the Run workflow choice
        job = yaml.safe_load(yaml.safe_dump(job).replace("${{ inputs.profile }}", "paper"))
    steps = steps_of(job)
    publish_at = next(i for i, s in enumerate(steps) if "qkov_lib publish" in s.get("run", ""))
    (command,) = qkov_commands(job, steps[publish_at : publish_at + 1])
    args = build_parser().parse_args(command)  # the command exists and takes these options
    assert args.command == "publish" and args.profile == profile and args.fetch
    assert args.budget_minutes > 0 and args.budget_minutes < job["timeout-minutes"] - 30, (
        "a time budget that leaves the setup and the book build time"
    )
    assert args.strict == (profile == "paper")
    assert args.repo_url == "<github.server_url>/<github.repository>"

    def cache(kind: str, before: bool) -> list[dict]:
        part = steps[:publish_at] if before else steps[publish_at:]
        return [s for s in part if s.get("uses", "").startswith(f"actions/cache/{kind}")]

    key = f"results-{profile}-<github.ref_name>-<github.run_id>-<github.run_attempt>"
    (restore,) = [s for s in cache("restore", True) if s["with"]["key"] == key]  # its own cache key
    (save,) = [s for s in cache("save", False) if s["with"]["key"] == key]
    assert restore["with"]["path"] == save["with"]["path"] == str(args.bundle) == f".publish/results-{profile}.tar.gz"
    assert restore["with"]["restore-keys"] + "<github.run_id>-<github.run_attempt>" == key, (
        "the newest cache of the branch is restored; each run saves its own"
    )
    assert save["if"].startswith("always()"), "the results are kept also when a chapter failed"
    fallback = next(s for s in steps[:publish_at] if "gh run download" in s.get("run", ""))
    assert f"results-{profile}" in shell(fallback), "the artifact fallback fetches this profile's results"
    upload = next(
        s
        for s in steps[publish_at:]
        if s.get("uses", "").startswith("actions/upload-artifact") and s["with"]["name"] == f"results-{profile}"
    )
    assert upload["with"]["path"] == str(args.bundle) and upload["if"].startswith("always()")

    assert str(args.site) == ".publish/site"
    restored = {s["with"]["path"] for s in cache("restore", True)}
    assert {f".publish/site/{p}" for p in SITES if p != profile} <= restored, "the site keeps the other books"
    (own,) = [s for s in cache("save", False) if s["with"]["path"] == f".publish/site/{profile}"]
    assert own["with"]["key"] == f"site-{profile}-<github.ref_name>-<github.run_id>-<github.run_attempt>"
    for other in SITES:
        if other != profile:
            (r,) = [s for s in cache("restore", True) if s["with"]["path"] == f".publish/site/{other}"]
            assert r["with"]["restore-keys"] == f"site-{other}-<github.ref_name>-"
    assert any("upload-pages-artifact" in s.get("uses", "") for s in steps[publish_at:])
    assert job["concurrency"]["cancel-in-progress"] is False, "a long build is never cancelled by a push"
    assert profile in job["concurrency"]["group"] or "inputs.profile" in job["concurrency"]["group"], (
        "one build per profile at a time"
    )


def test_the_default_book_reads_the_last_official_results_beside_its_own():
    from qkov_lib.__main__ import build_parser

    job = yaml.safe_load(BOOK.read_text())["jobs"]["default-book"]
    steps = steps_of(job)
    unpack = next(i for i, s in enumerate(steps) if "results unpack" in s.get("run", ""))
    publish_at = next(i for i, s in enumerate(steps) if "qkov_lib publish" in s.get("run", ""))
    venv = next(i for i, s in enumerate(steps) if s.get("run", "").strip() == "make venv")
    assert venv < unpack < publish_at
    (command,) = qkov_commands(job, [steps[unpack]])
    args = build_parser().parse_args(command)
    assert args.profile == "official" and str(args.file).startswith(".publish/beside/")
    restore = next(
        s
        for s in steps[:unpack]
        if s.get("uses", "").startswith("actions/cache/restore") and s["with"]["path"] == str(args.file)
    )
    assert restore["with"]["restore-keys"] == "results-official-<github.ref_name>-"
    assert not [
        s for s in steps if s.get("uses", "").startswith("actions/cache/save") and "official" in s["with"]["key"]
    ], "read, never saved under official's key"
    official = steps_of(yaml.safe_load(BOOK.read_text())["jobs"]["official-book"])
    assert not any("results unpack" in s.get("run", "") for s in official)


def test_the_official_book_follows_the_default_one_on_the_hosted_runner():
    jobs = yaml.safe_load(BOOK.read_text())["jobs"]
    official, default = jobs["official-book"], jobs["default-book"]
    assert official["needs"] == "default-book" and official["runs-on"] == default["runs-on"] == "ubuntu-latest"
    assert official["concurrency"]["group"] != default["concurrency"]["group"]
    assert set(jobs["deploy"]["needs"]) == {"default-book", "official-book"}
    on = yaml.safe_load(BOOK.read_text())[True]
    assert on["workflow_dispatch"]["inputs"]["profile"]["options"] == ["paper"], "official is built on every push"
    assert jobs["gpu-book"]["runs-on"] == ["self-hosted", "gpu"]


@pytest.mark.parametrize("path", ACTIONS, ids=lambda p: p.parent.name)
def test_a_composite_action_uses_every_input_and_its_callers_pass_only_those(path):
    spec = yaml.safe_load(path.read_text())
    declared = set(spec["inputs"])
    used = set(re.findall(r"\binputs\.([\w-]+)", yaml.safe_dump(spec["runs"])))
    assert used == declared, f"declared but unused: {declared - used}; used but undeclared: {used - declared}"
    required = {k for k, v in spec["inputs"].items() if v.get("required")}
    uses = f"./{path.parent.relative_to(REPO_ROOT)}"
    callers = [
        s
        for job in yaml.safe_load(BOOK.read_text())["jobs"].values()
        for s in job.get("steps", [])
        if s.get("uses") == uses
    ]
    assert callers, f"no job uses {uses}"
    for step in callers:
        assert required <= set(step.get("with", {})) <= declared, step
    assert all(s.get("shell") for s in spec["runs"]["steps"] if "run" in s), "a composite's run step names its shell"


def test_the_smoke_book_and_the_publishing_folder():
    jobs = yaml.safe_load(BOOK.read_text())["jobs"]
    smoke = " ".join(s.get("run", "") for s in jobs["smoke-book"]["steps"])
    assert "make book PROFILE=smoke" in smoke
    assert (REPO_ROOT / ".gitignore").read_text().count(".publish/") == 1
