"""The report's parts from small pages (``runner.report``): the screen's chrome left out, each chapter's figures
kept apart and numbered across the report (``present.report_page``), a missing page and an unwritable output."""

import os
import re
from pathlib import Path

import pytest

from qkov_lib.present import report_page
from qkov_lib.runner import report

PAGE = """<html><body><nav>the theme's navigation</nav><article class="bd-article">
<h1>A chapter<a class="headerlink" href="#a">#</a></h1><p class="qkov-launch">Run this chapter yourself</p>
<p>See <a href="other.html#x">the other chapter</a> and <a href="https://arxiv.org/abs/1">the paper</a>.</p>
<img src="../../_images/plot.png"><details><summary>numbers</summary>folded</details>
<figure><div class="qkov-figure" role="img" aria-label="ALT"><div class="plotly-graph-div" id="qkov-figure-1"></div>
<script>Plotly.newPlot("qkov-figure-1", [])</script><p class="qkov-alt">ALT {name}</p></div>
<figcaption><p><span class="caption-number">Fig. 1 </span><span class="caption-text">Caption of {name}.</span></p>
</figcaption></figure></article></body></html>"""


def write_pages(html_dir: Path, names: list[str]) -> None:
    for name in names:
        path = html_dir / report.page_url(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(PAGE.replace("{name}", name))


def test_an_article_has_no_navigation_anchors_or_launch_links_and_only_outside_links(tmp_path):
    write_pages(tmp_path, ["fig2_dtap"])
    body = report.article(tmp_path, "fig2_dtap")
    text = str(body)
    assert "navigation" not in text and "headerlink" not in text and "Run this chapter" not in text
    assert 'href="other.html' not in text and "the other chapter" in text
    assert 'href="https://arxiv.org/abs/1"' in text
    assert body.find("img")["src"] == "_images/plot.png"  # from the book's root, where the report is
    assert body.find("details").has_attr("open")  # paper does not unfold


def test_each_chapters_figures_keep_their_own_ids_caption_and_text_alternative(tmp_path):
    write_pages(tmp_path, ["fig2_dtap", "fig3_incentive"])
    found = report.figures(tmp_path, ["fig2_dtap", "fig3_incentive"])
    assert [f.caption for f in found] == ["Caption of fig2_dtap.", "Caption of fig3_incentive."]
    assert [f.alt for f in found] == ["ALT fig2_dtap", "ALT fig3_incentive"]
    assert 'id="fig2_dtap-qkov-figure-1"' in found[0].html
    assert 'Plotly.newPlot("fig3_incentive-qkov-figure-1"' in found[1].html
    numbered = report_page.figures_html(found)
    assert "Figure 2 (from" in numbered and "Fig. 1" not in numbered


def test_a_missing_page_names_the_command_that_builds_it(tmp_path):
    try:
        report.article(tmp_path, "errata")
    except report.ReportError as err:
        assert "python -m qkov_lib book" in str(err)
    else:
        raise AssertionError("no error for a missing page")


def test_report_o_where_nothing_can_be_written_is_one_error_before_any_printing(tmp_path, monkeypatch, capsys):
    """A folder, a path under a file, a read-only file: one line naming the place and the fix, and the book is never
    assembled (nothing printed first, nothing left behind)."""
    monkeypatch.setattr(report, "which_profile", lambda profile: "smoke")
    monkeypatch.setattr(
        report, "write_report", lambda *a: pytest.fail("the report was made before its target was checked")
    )
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "read-only.pdf").write_text("old")
    (tmp_path / "read-only.pdf").chmod(0o444)
    cases = {
        tmp_path: r".* is a folder; name the PDF file with -o, like .*report\.pdf",
        tmp_path
        / "a-file"
        / "r.pdf": r"cannot write the report to .*a-file/r\.pdf \(.*\); name a file in a writable folder with -o",
    }
    if os.geteuid() != 0:  # root writes a read-only file anyway
        cases[tmp_path / "read-only.pdf"] = r"cannot write the report to .*read-only\.pdf \(.*read-only"
    before = sorted(p.name for p in tmp_path.iterdir())
    for target, message in cases.items():
        assert report.command(None, target) == 1
        out = capsys.readouterr()
        assert out.out == "" and re.fullmatch(f"error: {message}\n", out.err), out.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
