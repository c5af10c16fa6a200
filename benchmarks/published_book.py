"""A fresh clone's built book from a published site against the same fresh clone computing everything, side by
side in one run (issue: results that travel).

    python benchmarks/published_book.py [--profile default] [--data DIR]

1. Clone this repository's HEAD twice into a temporary folder (``git clone``: the committed files, nothing else).
2. In the first clone, ``make book PROFILE=<profile> QKOV_RESULTS_URL=`` (nothing published: every chapter runs,
   then the book is rendered); timed.
3. Write its units as a site (``published.write``: what the publishing job puts beside the book) and serve it on
   127.0.0.1.
4. In the second clone, ``make book PROFILE=<profile> QKOV_RESULTS_URL=http://127.0.0.1:<port>``; timed.

Both clones use this environment (``make venv`` done: the times leave it out, as the README's figures do) and the
same data (``--data``, default $QKOV_DATA_DIR). The two books must hold the same tables; the script checks that every
CSV of the second equals the first's, bit for bit, and prints both times and their ratio."""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qkov_lib.runner import published  # noqa: E402


def clone(target: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)], check=True)
    return target


def make_book(checkout: Path, profile: str, url: str, data: str | None, log: Path) -> tuple[float, float]:
    """``make book`` in ``checkout`` in this environment; its wall time and the CPU time of every process it ran, in
    seconds (its output in ``log``). The CPU time depends less than the wall time on what else the machine runs."""
    venv = Path(sys.prefix)
    env = {**os.environ, published.RESULTS_URL_ENV: url, "PYTHONPATH": ""}
    if data:
        env["QKOV_DATA_DIR"] = data
    start, cpu = time.perf_counter(), _children_cpu()
    with open(log, "w") as fh:
        status = subprocess.run(
            ["make", "-o", str(venv / ".installed"), "book", f"PROFILE={profile}", f"VENV={venv}"],
            cwd=checkout,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        ).returncode
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if status != 0:
        sys.exit(f"make book failed in {checkout} (exit {status}); see {log}")
    return wall, cpu


def publish(checkout: Path, site: Path, profile: str) -> None:
    """``published.write`` run in ``checkout`` with its own library, as the publishing job does, so that the index
    names the commit that computed the units (not this checkout's)."""
    code = "import sys; from pathlib import Path; from qkov_lib.runner import published as p; "
    code += "p.write(Path(sys.argv[1]), sys.argv[2], Path('data/results'))"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run([sys.executable, "-c", code, str(site), profile], cwd=checkout, env=env, check=True)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def serve(root: Path) -> str:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="default")
    parser.add_argument("--data", default=os.environ.get("QKOV_DATA_DIR"), help="offline dataset copies")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qkov-published-bench-"))
    computed, fetched = clone(work / "computes"), clone(work / "fetches")
    every, every_cpu = make_book(computed, args.profile, "", args.data, work / "computes.log")
    print(f"fresh clone, every chapter computed: {every / 60:.1f} min ({every_cpu / 60:.1f} CPU-min)", flush=True)
    publish(computed, work / "site" / args.profile / published.FOLDER, args.profile)
    url = serve(work / "site")
    taken, taken_cpu = make_book(fetched, args.profile, url, args.data, work / "fetches.log")
    print(f"fresh clone, from the published site: {taken / 60:.1f} min ({taken_cpu / 60:.1f} CPU-min)", flush=True)
    ours, theirs = (sorted((c / "data" / "results" / args.profile).glob("*.csv")) for c in (fetched, computed))
    same = [a.name for a, b in zip(ours, theirs) if a.read_bytes() == b.read_bytes()]
    print(
        f"{len(same)} of {len(theirs)} result tables identical; published route {every / taken:.0f}x faster in wall "
        f"time ({every:.0f} s against {taken:.0f} s, rendering included), {every_cpu / taken_cpu:.0f}x in CPU time; "
        f"logs in {work}"
    )


if __name__ == "__main__":
    main()
