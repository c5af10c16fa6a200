"""Command line: ``python -m qkov_lib reproduce|book|report|chapters|notebook|fetch|results|publish`` (see
README)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from .core.chapter import CHOICES, ParameterError, parse_value
from .core.codehash import DynamicImport
from .core.contents import title
from .core.paths import BOOK_CHAPTERS, RESULTS_ROOT
from .core.workers import end_descendants
from .data.registry import CANONICAL, DataError, canonical_file
from .runner import publish, report, unpack
from .runner.book import build_book
from .runner.catalog import CHAPTERS
from .runner.notebooks import write_notebook
from .runner.plan import format_plan, plan
from .runner.reproduce import Summary, reproduce


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (the workflow's test parses its commands with it)."""
    parser = argparse.ArgumentParser(prog="python -m qkov_lib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="run chapters with papermill under a profile")
    rep.add_argument("--profile", default="auto", help=f"one of {', '.join(CHOICES)} (default: auto)")
    rep.add_argument(
        "-p",
        "--param",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="override a parameter, e.g. -p M 20 or -p ratios '[0.1, 10]' (repeatable)",
    )
    rep.add_argument("--only", action="append", help="comma-separated chapter names (default: all)")
    rep.add_argument(
        "--force",
        action="store_true",
        help="rerun chapters even when unchanged, computing their stored runs afresh too (a run that computes "
        "its stored bytes is left as stored; one that differs replaces it, and is named)",
    )
    rep.add_argument("--strict", action="store_true", help="treat a chapter whose data is not available as a failure")
    rep.add_argument("--out", default=BOOK_CHAPTERS, help="where executed notebooks go")
    rep.add_argument("--results", default=RESULTS_ROOT, help="root of tidy results (<root>/<profile>)")
    rep.add_argument(
        "--no-fetch",
        action="store_true",
        help="do not start from the published results ($QKOV_RESULTS_URL, else the origin's Pages site)",
    )
    rep.add_argument(
        "--dry-run", action="store_true", help="say which chapters are current or stale, and why; run nothing"
    )
    rep.add_argument(
        "--budget-minutes",
        type=float,
        metavar="M",
        help="start no stale chapter whose last wall time "
        "would end the run past M minutes; the book shows its last results (default: no budget)",
    )
    rep.add_argument(
        "--stored-only",
        action="store_true",
        help="start no stale chapter that would train: only those whose every run the results store holds "
        "(their pages are re-made from it); the others show their last results",
    )
    book = sub.add_parser("book", help="render the executed chapters with Jupyter Book")
    book.add_argument("--no-strict", action="store_true", help="do not turn warnings into errors")
    book.add_argument(
        "--repo-url",
        help="the repository's web address, for the repository link and the chapters' "
        "launch links (default: $QKOV_REPO_URL; none when unset)",
    )
    book.add_argument("--branch", help="the repository branch the links name (default: $QKOV_BRANCH, else main)")
    rpt = sub.add_parser("report", help="print the built book as one article, an A4 PDF (ReScience's form)")
    rpt.add_argument("--profile", help="the profile the built book ran under (default: the built book's)")
    rpt.add_argument(
        "-o", "--output", type=Path, help=f"the PDF (default: {report.PDF_NAME} beside the built book's index.html)"
    )
    sub.add_parser("chapters", help="list the chapters")
    nb = sub.add_parser("notebook", help="write a chapter as an .ipynb for plain papermill or any notebook tool")
    nb.add_argument("name", help="the chapter (`python -m qkov_lib chapters` lists them)")
    nb.add_argument("-o", "--output", type=Path, help="the .ipynb file, or a folder (default: NAME.ipynb here)")
    fetch = sub.add_parser("fetch", help="download a dataset's canonical release into the cache (needs the internet)")
    fetch.add_argument("dataset", choices=sorted(CANONICAL))
    unpack.add_commands(sub)  # results pack|unpack (qkov_lib/runner/unpack.py)
    publish.add_commands(sub)  # publish (qkov_lib/runner/publish.py)
    return parser


def values_taken_as_values(argv: list[str]) -> list[str]:
    """The command line with the VALUE of each ``-p NAME VALUE`` guarded, so that a value that starts with a dash (a
    negative number in any notation, like -1e-3) is read as the value, not as an option: a leading space, which
    ``parse_value`` drops."""
    out, i = list(argv), 0
    while i < len(out) - 2:
        if out[i] in ("-p", "--param"):
            out[i + 2] = " " + out[i + 2] if out[i + 2].startswith("-") else out[i + 2]
            i += 3
        else:
            i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(values_taken_as_values(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "results":
            return unpack.command(args)
        if args.command == "publish":
            return publish.command(args)
        if args.command == "report":
            return report.command(args.profile, args.output)
        if args.command == "chapters":
            for name in CHAPTERS:
                print(f"{name:28} {title(name)}")
        elif args.command == "reproduce":
            pairs = [(name, parse_value(value)) for name, value in args.param]
            if args.dry_run:
                print(
                    format_plan(
                        plan(args.profile, pairs, _only(args.only), args.force, args.results, args.budget_minutes)
                    )
                )
                return 0
            summary = reproduce(
                args.profile,
                pairs,
                _only(args.only),
                args.force,
                args.out,
                args.results,
                args.budget_minutes,
                fetch=not args.no_fetch,
                stored_only=args.stored_only,
            )
            return _report(summary, args.strict)
        elif args.command == "notebook":
            print(
                f"wrote {write_notebook(args.name, args.output)}; run it with `papermill <it> <out>.ipynb -p "
                f"profile smoke`"
            )
        elif args.command == "fetch":
            for name in CANONICAL[args.dataset]:
                print(f"{args.dataset}/{name}: {canonical_file(args.dataset, name, download=True)}")
        else:
            print(f"book built: {build_book(strict=not args.no_strict, repo_url=args.repo_url, branch=args.branch)}")
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (DataError, DynamicImport) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # the interrupted kernel client's pending tasks
        print(
            "interrupted: the chapter that was running was discarded; published results are as they were",
            file=sys.stderr,
        )
        return 130
    return 0


def _report(summary: Summary, strict: bool) -> int:
    """Print what the run did; the exit status: 1 if a chapter failed (or, with --strict, had no data), else 0."""
    if summary.done:
        print(", ".join(f"{len(v)} {k}" for k, v in summary.done.items()))
    if summary.no_data:
        print(
            f"{len(summary.no_data)} chapter(s) without their data, each page says how to get it: "
            f"{', '.join(summary.no_data)}",
            file=sys.stderr,
        )
    if summary.kept:
        print(
            f"{len(summary.kept)} chapter(s) without their data kept their last results, each page says so: "
            f"{', '.join(summary.kept)}",
            file=sys.stderr,
        )
    if summary.failures:
        print(f"{len(summary.failures)} chapter(s) failed:\n" + "\n".join(summary.failures), file=sys.stderr)
    return int(bool(summary.failures) or (strict and bool(summary.no_data or summary.kept)))


def _only(values: list[str] | None) -> list[str] | None:
    """``--only a,b`` as a list of names; None when not given. Given twice, or naming nothing: an error."""
    if values is None:
        return None
    if len(values) > 1:
        raise ParameterError("--only is given more than once; name every chapter in one comma-separated list")
    return [c.strip() for c in values[0].split(",") if c.strip()]


def _interrupt(signum: int, frame: object) -> None:
    """SIGINT (Ctrl-C, or ``kill -INT`` of this process alone) and SIGTERM (``kill``, a batch scheduler) end the run
    at once: the running chapter's kernel and every process it started are killed, then the run unwinds like Ctrl-C
    (the chapter's staging folder is removed on the way out; published results stay as they were)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second signal while unwinding changes nothing
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    end_descendants()
    raise KeyboardInterrupt


def run() -> int:
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    return main()


if __name__ == "__main__":
    sys.exit(run())
