"""The rendered smoke book in headless Chromium, served over local HTTP with every outside host unresolvable: each
page's plotly figures draw their SVG, each formula is typeset by the book's own MathJax, the console shows no
error (but the listed, explained ones), the page holds no machine path, traceback or stderr output, plotly.js is
loaded exactly where there are figures, and no page is wider than a 1280-pixel window.

Needs ``chromium`` and ``chromium-driver`` (Debian packages; ``.ci/run`` installs them). Without them the test is
skipped, unless QKOV_REQUIRE_BROWSER=1 (as in CI), where their absence fails it."""
from __future__ import annotations

import functools
import http.server
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from qkov_lib.results import REPO_ROOT

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
# console messages that are not the book's, each with the reason it is accepted
ALLOWED: dict[str, str] = {
    "Identifier 'THEBE_JS_URL' has already been declared":
        "Jupyter Book 1 writes sphinx-thebe's settings script twice into every page; the second `const` fails. "
        "Thebe (live code in the page) is not used by this book.",
    "favicon.ico": "the browser asks for a site icon the book does not have (404)",
    "Got invalid theme mode": "pydata-sphinx-theme, on a browser's first visit (no light/dark choice stored yet); "
                              "it then uses its default",
}


def machine_paths(book: Path) -> list[str]:
    """What a page must never show: this checkout, the built book's folder, the temp folder, the home folder."""
    return [str(REPO_ROOT), str(book), tempfile.gettempdir(), str(Path.home()), "PosixPath("]

COUNT = """
const maths = [...document.querySelectorAll('span.math, div.math')];
const math = maths.length;
const typeset = maths.filter(e => e.querySelector('.mjx-chtml')).length;
const pending = document.querySelectorAll('.MathJax_Processing, .MathJax_Preview:not(:empty)').length;
const errors = document.querySelectorAll('.mjx-merror, .MathJax_Error').length;
const figures = document.querySelectorAll('div.plotly-graph-div').length;
const drawn = [...document.querySelectorAll('div.plotly-graph-div')].filter(d => d.querySelector('svg.main-svg')).length;
const queueDone = !window.MathJax || !window.MathJax.Hub || !window.MathJax.Hub.queue.pending;
const stderr = document.querySelectorAll('.output.stderr').length;
const plotly = [...document.scripts].some(s => (s.getAttribute('src') || '').includes('plotly.min.js'));
const overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;
const ready = document.readyState === 'complete';
return {math, typeset, pending, errors, figures, drawn, queueDone, stderr, plotly, overflow, ready,
        text: document.body.innerText};
"""


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and DRIVER):
        if os.environ.get("QKOV_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium and chromedriver are required (apt-get install chromium chromium-driver)")
        pytest.skip("chromium and chromedriver are not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):  # nothing outside is reachable
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def served(built_book):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built_book)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", built_book
    server.shutdown()


def _settle(driver, timeout: float = 30.0) -> dict:
    """Counts once the page has loaded, every figure is drawn and MathJax's queue is empty (or the timeout
    passes)."""
    end = time.monotonic() + timeout
    while True:
        c = driver.execute_script(COUNT)
        done = (c["ready"] and c["drawn"] == c["figures"] and c["queueDone"] and c["pending"] == 0
                and c["typeset"] == c["math"])
        if done or time.monotonic() > end:
            return c
        time.sleep(0.25)


def test_every_page_renders_offline(browser, served):
    base, root = served
    pages = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html")
                   if "_static" not in p.parts and p.name not in ("genindex.html", "search.html"))
    assert "book/chapters/fig2_dtap.html" in pages
    rows, problems = [], []
    for page in pages:
        browser.get(f"{base}/{page}")
        c = _settle(browser)
        logs = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        errors = [m for m in logs if not any(pattern in m for pattern in ALLOWED)]
        rows.append(f"{page:45} figures {c['drawn']}/{c['figures']}  math {c['typeset']}/{c['math']}  "
                    f"console errors {len(errors)}  plotly.js {'yes' if c['plotly'] else 'no'}")
        if c["plotly"] != (c["figures"] > 0):
            problems.append(f"{page}: plotly.js {'loaded without' if c['plotly'] else 'missing for'} figures")
        if c["overflow"] > 0:
            problems.append(f"{page}: the page is {c['overflow']} px wider than the window (a table or figure)")
        if c["drawn"] != c["figures"]:
            problems.append(f"{page}: {c['figures'] - c['drawn']} figure(s) not drawn")
        if c["typeset"] < c["math"] or c["errors"]:
            problems.append(f"{page}: {c['math'] - c['typeset']} formula(s) not typeset, {c['errors']} MathJax errors")
        if errors:
            problems.append(f"{page}: console errors {errors[:3]}")
        leaked = [m for m in machine_paths(root) if m in c["text"]] + (["Traceback"] if "Traceback" in c["text"] else [])
        if leaked or c["stderr"]:
            problems.append(f"{page}: the text shows {leaked}, {c['stderr']} stderr output(s)")
    print("\n".join(rows))
    assert sum("figures 0/0" not in r for r in rows) >= 3 and sum("math 0/0" not in r for r in rows) >= 3, rows
    assert not problems, "\n".join(problems)
