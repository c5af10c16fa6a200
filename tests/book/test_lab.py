"""A chapter in the pinned JupyterLab (requirements-lab.txt), driven by headless Chromium as a reader would use it:
open ``notebooks/fig4_mu_trajectories.md`` (opened as a notebook through jupytext, the setting ``make lab`` writes),
find its tab not marked unsaved once its kernel is idle (the contents manager ``make lab`` names,
``qkov_lib.runner.lab``), set ``profile = "smoke"`` in its parameters cell, Run All, see a plotly figure drawn and the
chapter's references read as words (its citation as "(Petzold, 1983)"), find the result under
``data/results/interactive/smoke/``, close the tab without saving, and find ``git status`` clean. Then every chapter,
before and after Run All: no error box, unrendered key, reference warning, dead link or visible hidden code. JupyterLab runs on a free local port with a token, rooted at
a clone of this repository (its kernel imports the clone's library), with its settings, workspaces and runtime files
in a temporary folder: the test never touches this checkout.

Needs chromium, chromedriver and the packages of requirements-lab.txt; without them it is skipped, unless
QKOV_REQUIRE_BROWSER=1 (as in CI), where their absence fails it. QKOV_LAB_SCREENSHOTS=<folder> keeps a screenshot
before and after Run All there (lab_before.png, lab_after.png, and lab_<chapter>.png for each chapter)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.util import find_spec
from pathlib import Path

import jupytext
import pandas as pd
import pytest

from qkov_lib.core.paths import REPO_ROOT

CHAPTER = "fig4_mu_trajectories"
BIN = Path(sys.executable).parent
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
)  # nothing outside is reachable
RUN_ALL_TIMEOUT = 300  # seconds; the smoke chapter runs in well under a minute
CONTENTS_MANAGER = "qkov_lib.runner.lab.ChapterContentsManager"  # as `make lab` and Binder's postBuild name it
CLEAN_FOR = 3  # seconds the tab must stay unmarked once the kernel is idle


def missing() -> list[str]:
    """What the test needs and this machine lacks."""
    need = {
        "chromium": CHROMIUM,
        "chromedriver": DRIVER,
        "jupyterlab (requirements-lab.txt)": find_spec("jupyterlab"),
        "jupyterlab-myst (requirements-lab.txt)": find_spec("jupyterlab_myst"),
        "jupytext-config": (BIN / "jupytext-config").exists(),
        "git": shutil.which("git"),
    }
    return [name for name, found in need.items() if not found]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path, fake_data_dir, smoke_book):
    """JupyterLab on a free port with a token, rooted at a clone of this repository, its kernels reading the tests'
    tiny real-data copies (``fake_data_dir``: asked for here, not left to an earlier test); yields (url, token,
    clone). The clone's results store starts with the smoke book's runs, as a reader's does after `make book`: a
    run whose key matches is read, not trained again (each test here is about the page, not the training)."""
    lacking = missing()
    if lacking:
        if os.environ.get("QKOV_REQUIRE_BROWSER") == "1":
            pytest.fail(f"the JupyterLab browser test needs {', '.join(lacking)} (.ci/run installs them)")
        pytest.skip(f"not installed: {', '.join(lacking)}")
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    shutil.copytree(smoke_book / "data" / "results" / "store", clone / "data" / "results" / "store")
    home = tmp_path / "jupyter"
    settings = home / "app-settings"
    settings.mkdir(parents=True)
    subprocess.run(
        [
            str(BIN / "jupytext-config"),
            "--settings-file",
            str(settings / "overrides.json"),
            "set-default-viewer",
            "markdown",
            "myst",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run([str(BIN / "python"), "-m", "qkov_lib.runner.lab", str(settings / "overrides.json")], check=True)
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "PYTHONPATH": str(clone),  # the kernel imports the clone's library, not this checkout's
        "JUPYTERLAB_SETTINGS_DIR": str(home / "user-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
    }
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [
            str(BIN / "jupyter-lab"),
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={clone}",
            f"--LabApp.app_settings_dir={settings}",
            "--LabApp.default_url=/lab/tree/notebooks",
            f"--ServerApp.contents_manager_class={CONTENTS_MANAGER}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        + (["--allow-root"] if os.geteuid() == 0 else []),  # a CI container runs as root
        cwd=clone,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > end:
                    raise AssertionError("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, token, clone
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + (f"--user-data-dir={tmp_path / 'chromium'}",):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def wait_for(driver, script: str, timeout: float, what: str):
    """Poll ``script`` (JavaScript returning a value) until it is truthy; that value."""
    end = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def click_text(driver, css: str, text: str) -> None:
    """Click the first element matching ``css`` whose text is ``text``."""
    wait_for(
        driver,
        f"""return [...document.querySelectorAll({css!r})].find(e => e.textContent.trim() === {text!r})
                         || null""",
        30,
        f"{text!r} ({css})",
    ).click()


def shot(driver, name: str) -> None:
    folder = os.environ.get("QKOV_LAB_SCREENSHOTS")
    if folder:
        driver.save_screenshot(str(Path(folder) / name))


ROOT = "const root = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => !p.classList.contains('lm-mod-hidden')) || document;\n"  # noqa: E501
KERNEL = "return (document.querySelector('.jp-Notebook-ExecutionIndicator') || {dataset: {}}).dataset.status"
IDLE_FOR = 3  # seconds the kernel must stay idle after Run All: between two cells it is idle for milliseconds


def set_smoke(browser, name: str) -> None:
    """Type ``profile = "smoke"`` over the first line of the chapter's parameters cell."""
    from selenium.webdriver.common.action_chains import ActionChains  # selenium: only where the browser test runs
    from selenium.webdriver.common.keys import Keys

    wait_for(browser, PARAMETERS, 30, f"{name}'s parameters cell").click()
    ActionChains(browser).key_down(Keys.CONTROL).send_keys(Keys.HOME).key_up(Keys.CONTROL).key_down(
        Keys.SHIFT
    ).send_keys(Keys.END).key_up(Keys.SHIFT).send_keys('profile = "smoke"').perform()


def run_all(browser, name: str) -> None:
    """Run All from the menu, and wait until every cell has run: the kernel busy, then idle for ``IDLE_FOR`` s (the
    prompts cannot tell: a hidden cell's input, prompt included, is not in the page)."""
    click_text(browser, ".lm-MenuBar-itemLabel", "Run")
    click_text(browser, ".lm-Menu-itemLabel", "Run All Cells")
    try:
        wait_for(browser, f"return (() => {{{KERNEL}}})() === 'busy'", 20, f"{name}'s kernel to start running")
    except AssertionError:
        pass  # it ran all within a poll
    end, idle_since = time.monotonic() + RUN_ALL_TIMEOUT, None
    while True:
        now = time.monotonic()
        if browser.execute_script(KERNEL) == "idle":
            idle_since = idle_since or now
            if now - idle_since >= IDLE_FOR:
                return
        else:
            idle_since = None
        if now > end:
            raise AssertionError(f"timed out after {RUN_ALL_TIMEOUT} s waiting for {name} to run (Run All)")
        time.sleep(0.25)


PARAMETERS = """return [...document.querySelectorAll('.jp-CodeCell .cm-content')]
                 .find(e => e.textContent.includes('profile = ')) || null"""
STATE = """
const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt:not(.jp-Placeholder-prompt)')]
    .map(p => p.textContent.trim());
const outputs = [...document.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent);
const markdown = [...document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown, .jp-MarkdownCell .myst')];
return {prompts, running: prompts.filter(p => p.includes('*')).length,
        plotly: document.querySelectorAll('.jp-OutputArea .js-plotly-plot, .jp-OutputArea .plot-container').length,
        drawn: document.querySelectorAll('.jp-OutputArea .js-plotly-plot svg.main-svg').length,
        errors: outputs.filter(t => t.includes('Traceback') || /\\w+Error:/.test(t)).map(t => t.slice(0, 800)),
        raw: markdown.map(m => m.textContent).filter(t => /\\{(term|cite:p|numref|doc)\\}`/.test(t)).length,
        text: markdown.map(m => m.textContent).join('\\n'),
        outputs: outputs.join('\\n'),
        dirty: [...document.querySelectorAll('.jp-mod-dirty')]
            .map(e => e.className + ' ' + (e.textContent || '').slice(0, 60))};
"""


def test_a_chapter_runs_in_jupyterlab_and_leaves_the_repository_clean(lab, browser):
    url, token, clone = lab
    started = time.monotonic()
    source = (clone / "notebooks" / f"{CHAPTER}.md").read_text()
    assert "{cite:p}`" in source and "{term}`" in source  # the roles this test looks for
    browser.get(f"{url}/lab/tree/notebooks/{CHAPTER}.md?token={token}")
    # opened as a notebook (jupytext), its kernel started and idle
    wait_for(
        browser,
        "return document.querySelectorAll('.jp-Notebook .jp-Cell').length > 5",
        120,
        "the chapter opened as a notebook",
    )
    wait_for(
        browser,
        """return [...document.querySelectorAll('.jp-Toolbar-kernelName')]
                         .some(e => e.textContent.includes('Python 3'))""",
        60,
        "the notebook's kernel",
    )
    wait_for(
        browser,
        "return document.querySelector('.jp-Notebook-ExecutionIndicator[data-status=\"idle\"]')",
        60,
        "the kernel to be idle",
    )
    # no autosave: a run longer than its interval never writes an edited parameter into the chapter's source
    plugin = "@jupyterlab/docmanager-extension:plugin"
    with urllib.request.urlopen(f"{url}/lab/api/settings/{plugin}?token={token}", timeout=10) as reply:
        schema = json.load(reply)["schema"]  # overrides.json becomes the schema's defaults
    assert schema["properties"]["autosave"]["default"] is False
    # opening changes nothing: the tab stays unmarked once the kernel has connected (and written its language_info)
    end = time.monotonic() + CLEAN_FOR
    while time.monotonic() < end:
        before = browser.execute_script(STATE)
        assert before["dirty"] == [], f"the tab is marked unsaved with no edit: {before['dirty']}"
        time.sleep(0.5)
    assert before["raw"] == 0, "MyST roles shown raw (is jupyterlab-myst loaded?)"
    assert "(Petzold, 1983)" not in before["text"]  # in a hidden cell's output: there once the chapter has run
    shot(browser, "lab_before.png")

    set_smoke(browser, CHAPTER)
    assert wait_for(browser, PARAMETERS, 5, "the parameters cell").text.startswith('profile = "smoke"\n')

    # Run All, from the menu
    run_all(browser, CHAPTER)
    after = wait_for(
        browser, f"const s = (() => {{{STATE}}})(); return s.drawn > 0 ? s : null", 60, "a drawn plotly figure"
    )
    assert after["errors"] == [], after["errors"]
    assert after["plotly"] >= 1 and after["raw"] == 0
    assert "(Petzold, 1983)" in after["text"] + after["outputs"], "the {cite:p} citation is not read as words"
    shot(browser, "lab_after.png")
    saved = sorted((clone / "data" / "results" / "interactive" / "smoke").rglob("*"))
    assert any(p.is_file() for p in saved), "no result under data/results/interactive/smoke in the clone"
    assert any(CHAPTER in p.as_posix() for p in saved)

    # close the tab without saving
    assert after["dirty"], "the edited parameters cell marks the tab unsaved"
    click_text(browser, ".lm-MenuBar-itemLabel", "File")
    click_text(browser, ".lm-Menu-itemLabel", "Close Tab")
    dialog = wait_for(
        browser,
        """return [...document.querySelectorAll('.jp-Dialog button')]
                      .find(b => /Discard|Don.t Save/i.test(b.textContent)) || null""",
        30,
        "the unsaved-work dialog",
    )
    dialog.click()
    wait_for(browser, "return document.querySelectorAll('.jp-Notebook').length === 0", 30, "the tab to close")
    print(f"JupyterLab: opened, edited, ran and closed {CHAPTER} in {time.monotonic() - started:.0f} s")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", f"the clone changed:\n{status.stdout}"
    assert (clone / "notebooks" / f"{CHAPTER}.md").read_text() == source


def test_a_chapter_opens_with_its_kernels_language_info_and_saves_back_byte_for_byte(tmp_path):
    """The contents manager of ``make lab`` (``qkov_lib.runner.lab``): a chapter read as a notebook carries the
    ``language_info`` its kernel reports (here the python3 kernel, this interpreter), which JupyterLab would
    otherwise add and so mark the tab unsaved; saving that notebook writes the source back unchanged; an ``.ipynb``
    keeps its own."""
    pytest.importorskip("jupyter_server", reason="JupyterLab's packages (requirements-lab.txt)")
    from ipykernel.ipkernel import IPythonKernel

    from qkov_lib.runner.lab import ChapterContentsManager, kernel_language_info

    source = (REPO_ROOT / "notebooks" / f"{CHAPTER}.md").read_bytes()
    (tmp_path / "chapter.md").write_bytes(source)
    (tmp_path / "plain.ipynb").write_text(
        '{"cells": [], "metadata": {"kernelspec": {"name": "python3", '
        '"display_name": "Python 3", "language": "python"}}, '
        '"nbformat": 4, "nbformat_minor": 5}'
    )
    manager = ChapterContentsManager(root_dir=str(tmp_path))

    async def open_and_save():
        model = await manager.get("chapter.md")
        await manager.save({"type": "notebook", "format": "json", "content": model["content"]}, "chapter.md")
        return model, await manager.get("plain.ipynb")

    model, plain = asyncio.run(open_and_save())
    assert model["type"] == "notebook"
    assert model["content"]["metadata"]["language_info"] == IPythonKernel.language_info
    assert (tmp_path / "chapter.md").read_bytes() == source
    assert "language_info" not in plain["content"]["metadata"]
    assert kernel_language_info(["bash", "-c", "true"]) is None  # not an ipykernel kernel: nothing is guessed


# every chapter, as a reader sees it: what the book hides, hidden; every reference readable; no error box
PAGE = (
    ROOT
    + """const cells = [...root.querySelectorAll('.jp-Notebook > .jp-WindowedPanel-outer .jp-Cell, .jp-Notebook .jp-Cell')]
    .filter((c, i, all) => all.indexOf(c) === i);
const found = [...root.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown, .jp-MarkdownCell .myst,'
    + ' .jp-OutputArea-output')];
const rendered = found.filter(e => !found.some(o => o !== e && o.contains(e)));  // each text once
return {
  cells: cells.map(c => ({code: c.classList.contains('jp-CodeCell'),
                          input: !!c.querySelector('.jp-InputArea:not(.lm-mod-hidden) .jp-InputArea-editor')})),
  boxes: rendered.map(e => e.textContent).join('\\n').split(/Unknown (?:Directive|Role)/).length - 1,
  warnings: [...root.querySelectorAll('.jp-Notebook span.text-yellow-600[title]')]
      .map(e => e.title + ': ' + e.textContent.trim()),
  links: [...root.querySelectorAll('.jp-MarkdownCell a, .jp-OutputArea-output a')]
      .map(a => a.getAttribute('href') || ''),
  errors: [...root.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent)
      .filter(t => t.includes('Traceback') || /\\w+Error:/.test(t)).map(t => t.slice(0, 800)),
  prose: [...root.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent).join('\\n'),
  text: rendered.map(e => e.textContent).join('\\n'),
  drawn: root.querySelectorAll('.jp-OutputArea .js-plotly-plot svg.main-svg').length,
};
"""
)
SHOWN_FIRST = """(document.querySelector('.jp-OutputArea .js-plotly-plot')
    || document.querySelector('.jp-OutputArea-output .jp-RenderedMarkdown, .jp-OutputArea-output .myst')
    || document.querySelector('.jp-Cell')).scrollIntoView()"""  # the screenshot: a figure, else the first prose
HIDES_INPUT = {"remove-input", "hide-input", "remove-cell", "hide-cell"}
RAW = re.compile(r"\{(?:glue|term|doc|numref|cite)[:\w]*\}`|\{\{\w+\}\}")  # a role or a placeholder left as text
DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(?![\w.])")


def glue_keys(source: str) -> list[str]:
    """The keys a chapter's Markdown glues by role (jupyterlab-myst shows them as bare words)."""
    return re.findall(r"\{glue(?::\w+)?\}`([^`]+)`", source)


def problems(page: dict, source_cells: list, keys: list[str], clone: Path) -> dict[str, list[str]]:
    """What a reader should not see on a chapter's page, by kind (each an empty list on a good page)."""
    hidden_code = [
        f"cell {i}"
        for i, (cell, shown) in enumerate(zip(source_cells, page["cells"]))
        if cell.cell_type == "code" and HIDES_INPUT & set(cell.metadata.get("tags", [])) and shown["input"]
    ]
    dead = []
    for href in page["links"]:
        if href == "#" or (href.startswith("/files/") and not (clone / href.split("?")[0][7:]).is_file()):
            dead.append(href)
    keys_shown = [k for k in keys if k in page["text"].split()]
    return {
        "error boxes": ["Unknown Directive/Role"] * page["boxes"] + page["errors"],
        "unrendered keys": keys_shown + RAW.findall(page["text"]),
        "reference warnings": page["warnings"],
        "dead links": dead,
        "visible hidden code": hidden_code,
    }


def result_numbers(folder: Path, chapter: str) -> list[float]:
    """Every number in a chapter's saved tables, numeric cells and the numbers written in text cells."""
    from qkov_lib.core.results import load

    tables, _ = load(folder, chapter)
    values = []
    for table in tables.values():
        for column in table.columns:
            for v in table[column].dropna():
                text = str(v)
                values += [float(v)] if isinstance(v, (int, float)) else [float(t) for t in DECIMAL.findall(text)]
    return values


def significant(token: str) -> int:
    """How many significant digits a printed number has, trailing zeros left out ('0.0909': 3, '10.0': 1)."""
    return len(token.lstrip("-").replace(".", "").lstrip("0").rstrip("0"))


def shows_a_result(prose: str, values: list[float]) -> str | None:
    """A number of the rendered outputs, of at least two significant digits (not a round setting such as a rate
    of 0.1), that is one of the results as rounded on the page (or in percent)."""
    for token in DECIMAL.findall(prose):
        if significant(token) < 2:
            continue
        digits, p = len(token.split(".")[1]), float(token)
        if any(abs(round(x, digits) - p) < 1e-9 for v in values for x in (v, 100 * v)):
            return token
    return None


def open_chapter(browser, url: str, token: str, name: str, cells: int) -> None:
    """Open a chapter and wait until its kernel is idle and each of its ``cells`` is drawn, its Markdown rendered."""
    browser.get(f"{url}/lab/tree/notebooks/{name}.md?reset&token={token}")  # reset: no tab of a past page restored
    wait_for(
        browser,
        f"""{ROOT}const cells = root.querySelectorAll('.jp-Notebook .jp-Cell');
            return cells.length === {cells} && [...root.querySelectorAll('.jp-Notebook .jp-MarkdownCell')]
                .every(c => c.querySelector('.jp-RenderedMarkdown, .myst'))""",
        120,
        f"{name} opened, its {cells} cells drawn",
    )
    wait_for(
        browser,
        "return document.querySelector('.jp-Notebook-ExecutionIndicator[data-status=\"idle\"]')",
        120,
        f"{name}'s kernel to be idle",
    )
    time.sleep(1)  # jupyterlab-myst renders the Markdown cells


def run_all_at_smoke(browser, name: str) -> None:
    set_smoke(browser, name)
    run_all(browser, name)
    time.sleep(2)  # the Markdown outputs render


def close_without_saving(browser, url: str, token: str) -> None:
    tabs = browser.execute_script("return document.querySelectorAll('.jp-NotebookPanel').length")
    click_text(browser, ".lm-MenuBar-itemLabel", "File")
    click_text(browser, ".lm-Menu-itemLabel", "Close Tab")
    dialog = browser.execute_script(
        "return [...document.querySelectorAll('.jp-Dialog button')]"
        ".find(b => /Discard|Don.t Save/i.test(b.textContent)) || null"
    )
    if dialog:
        dialog.click()
    wait_for(browser, f"return document.querySelectorAll('.jp-NotebookPanel').length < {tabs}", 30, "the tab to close")
    with urllib.request.urlopen(f"{url}/api/sessions?token={token}", timeout=10) as reply:
        for session in json.load(reply):  # the kernel of the closed chapter stops: 16 would not fit beside each other
            request = urllib.request.Request(f"{url}/api/sessions/{session['id']}?token={token}", method="DELETE")
            urllib.request.urlopen(request, timeout=30).read()


def test_every_chapter_reads_in_jupyterlab_as_in_the_book_before_and_after_run_all(lab, browser):
    """All 16 chapters, in the order the runner runs them (the gathering pages last, so that they read the chapters
    just run): opened, then Run All at ``smoke``. Before and after, no error box, no unrendered key, no reference
    warning, no dead link and no visible code of a cell the book hides; after, no traceback, and a number of the
    chapter's saved results appears in its outputs. Prints the counts, chapter by chapter."""
    from qkov_lib.core.contents import chapter_names, run_order

    url, token, clone = lab
    interactive = clone / "data" / "results" / "interactive" / "smoke"
    rows, failures = [], []
    for name in run_order(chapter_names()):
        source = (clone / "notebooks" / f"{name}.md").read_text()
        cells, keys = jupytext.reads(source, "md:myst").cells, glue_keys(source)
        open_chapter(browser, url, token, name, len(cells))
        before = problems(browser.execute_script(PAGE), cells, keys, clone)
        run_all_at_smoke(browser, name)
        page = browser.execute_script(PAGE)
        after = problems(page, cells, keys, clone)
        browser.execute_script(SHOWN_FIRST)
        shot(browser, f"lab_{name}.png")
        close_without_saving(browser, url, token)
        number = shows_a_result(page["prose"], result_numbers(interactive, name))
        rows.append((name, {k: (len(before[k]), len(after[k])) for k in before}, number))
        for when, found in (("before", before), ("after", after)):
            failures += [f"{name} {when} Run All: {kind}: {items[:5]}" for kind, items in found.items() if items]
        if number is None:
            failures.append(f"{name}: no number of its saved results in its outputs")
    print("\nchapter: " + " · ".join(f"{k} (before, after Run All)" for k in rows[0][1]) + " · a result shown")
    for name, counts, number in rows:
        print(f"{name}: " + " · ".join(f"{b}, {a}" for b, a in counts.values()) + f" · {number}")
    assert failures == [], "\n".join(failures)
