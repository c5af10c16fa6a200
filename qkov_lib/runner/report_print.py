"""Printing the report's HTML to an A4 PDF with headless Chromium, offline: Chromium draws plotly's figures as SVG
(vectors in the PDF) and MathJax's formulas as text, which no other offline route here does (Jupyter Book's LaTeX
builder drops plotly figures; kaleido downloads its own Chrome). The page is loaded through chromedriver (as the
browser tests do), every outside host unresolvable; it is printed with the DevTools protocol's ``Page.printToPDF``
(A4, backgrounds, a page-number footer) only once it is ready: its fonts loaded, MathJax 2's startup
typesetting done (once ``MathJax.isReady``, a callback queued behind it, ``MathJax.Hub.Queue``), and every plotly
figure drawn (its ``svg.main-svg``), a figure taller than a page first redrawn to the page's height."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service

from ..present.report_page import FOOTER, HEADER

BROWSERS = ("chromium", "chromium-browser", "google-chrome")  # Debian's, Ubuntu's, the hosted runners'
DRIVER = "chromedriver"
A4_INCHES = (8.27, 11.69)
MARGIN_INCHES = {"marginTop": 0.55, "marginBottom": 0.7, "marginLeft": 0.6, "marginRight": 0.6}
SCALE = 0.8  # the page's CSS pixels to the paper's: a 820-px column fills A4 between the margins
WIDTH_PX = 820  # the report's column (report.css), what plotly draws each figure to
# the tallest a figure may be to fit on one page with its caption: the printable height in CSS pixels, less room
MAX_FIGURE_PX = int((A4_INCHES[1] - MARGIN_INCHES["marginTop"] - MARGIN_INCHES["marginBottom"]) * 96 / SCALE) - 330
# one promise: fonts, MathJax's queue, every plotly figure drawn (and a tall one redrawn shorter); resolves to counts
READY = """
const done = arguments[arguments.length - 1], maxHeight = arguments[0];
const math = () => new Promise(resolve => {
  if (!window.MathJax) { resolve(false); return; }
  const poll = () => {  // once MathJax has started, a callback queued behind its typesetting
    if (window.MathJax.Hub && MathJax.isReady) MathJax.Hub.Queue(() => resolve(true));
    else setTimeout(poll, 100);
  };
  poll();
});
const drawn = () => new Promise(resolve => {
  const poll = () => {
    const divs = [...document.querySelectorAll('div.plotly-graph-div')];
    if (document.readyState === 'complete' && divs.every(d => d.querySelector('svg.main-svg'))) resolve(divs);
    else setTimeout(poll, 100);
  };
  poll();
});
(async () => {
  await document.fonts.ready;
  const typeset = await math();
  const divs = await drawn();
  const tall = divs.filter(d => d._fullLayout && d._fullLayout.height > maxHeight);
  for (const d of tall) {
    d.parentElement.style.height = maxHeight + 'px';
    await Plotly.relayout(d, {height: maxHeight});
  }
  await document.fonts.ready;
  done({typeset, figures: divs.length, shortened: tall.length,
        errors: document.querySelectorAll('.mjx-merror, .MathJax_Error').length});
})();
"""


class PrintError(RuntimeError):
    """The report could not be printed: no browser, or the page did not get ready; the message says what to do."""


def browser_binary() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise PrintError(
        f"no Chromium to print the report with (looked for {', '.join(BROWSERS)}); "
        "install it: apt-get install chromium chromium-driver"
    )


def start_browser() -> webdriver.Chrome:
    """Headless Chromium through chromedriver, with nothing outside this machine reachable."""
    binary, driver = browser_binary(), shutil.which(DRIVER)
    if not driver:
        raise PrintError("no chromedriver to drive Chromium with; install it: apt-get install chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WIDTH_PX + 60},1200",
        "--allow-file-access-from-files",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(arg)
    try:
        return webdriver.Chrome(service=Service(driver), options=options)
    except WebDriverException as err:
        raise PrintError(f"Chromium did not start ({err.msg}); check that chromium and chromedriver match") from err


def print_pdf(page: Path, pdf: Path, timeout: float = 180.0) -> dict:
    """Print ``page`` (an HTML file) to ``pdf`` on A4 once it is ready; returns what the page reported (whether
    MathJax typeset, how many figures, how many were shortened to fit a page, MathJax errors)."""
    driver = start_browser()
    try:
        driver.set_script_timeout(timeout)
        driver.get(page.resolve().as_uri())
        try:
            ready = driver.execute_async_script(READY, MAX_FIGURE_PX)
        except TimeoutException as err:
            raise PrintError(
                f"{page.name} was not ready to print after {timeout:.0f} s (formulas or figures still drawing)"
            ) from err
        printed = driver.execute_cdp_cmd(
            "Page.printToPDF",
            {
                "paperWidth": A4_INCHES[0],
                "paperHeight": A4_INCHES[1],
                **MARGIN_INCHES,
                "scale": SCALE,
                "printBackground": True,
                "displayHeaderFooter": True,
                "headerTemplate": HEADER,
                "footerTemplate": FOOTER,
                "preferCSSPageSize": False,
            },
        )
    finally:
        driver.quit()
    pdf.parent.mkdir(parents=True, exist_ok=True)
    pdf.write_bytes(base64.b64decode(printed["data"]))
    return ready
