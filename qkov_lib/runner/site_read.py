"""Reading the published site (``published``): its layout, the index of a profile checked field by field, and each
archive downloaded against the index's size and sha256 within a deadline that holds however slowly its bytes arrive.
Anything wrong is one ``FetchError`` (``Unreachable`` when the site does not answer), the line the run prints."""

from __future__ import annotations

import hashlib
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import bundle_check, catalog

RESULTS_URL_ENV = "QKOV_RESULTS_URL"
FOLDER = "results"  # <site>/<profile>/results/
INDEX = "index.json"
FORMAT = "qkov-results-index"
VERSION = 1
MAX_INDEX = 4 << 20  # an index is kilobytes
TIMEOUT_S = 20.0  # per network operation
OPTIONAL: dict[str, type | tuple[type, ...]] = {  # an index entry's other fields, None or of these types
    "wall_time_s": (int, float),
    "stored_runs": int,
    "commit": str,
    "data_identity": dict,
    "files": list,
}
MIN_RATE = 20_000  # bytes/s: a download slower than this over its whole length is given up
ARCHIVE = "{chapter}.tar.gz"
SHA256 = re.compile(r"[0-9a-f]{64}")


class FetchError(RuntimeError):
    """The published results cannot be used: the message is the one line the run prints."""


class Unreachable(FetchError):
    """The site does not answer (offline, refused, a timeout): nothing more is asked of it in this run."""


# ---- downloads --------------------------------------------------------------------------------------------------


class _SameHost(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to the same scheme and host: a published site never sends its files elsewhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.netloc) != (new.scheme, new.netloc):
            raise FetchError(f"{req.full_url} redirects to another host ({new.scheme}://{new.netloc}); refusing it")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _open(url: str, timeout: float):
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https", "file"):
        raise FetchError(f"{RESULTS_URL_ENV}={url!r} is not an http(s) or file address")
    opener = urllib.request.build_opener(_SameHost())
    try:
        return opener.open(url, timeout=timeout)
    except urllib.error.HTTPError as err:
        raise FetchError(f"{url}: HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, FetchError):
            raise reason from None
        raise Unreachable(f"{url} is unreachable ({reason})") from None
    except (TimeoutError, OSError) as err:
        raise Unreachable(f"{url} did not answer within {timeout:g} s ({type(err).__name__})") from None


def _stream(url: str, out: Callable[[bytes], None], limit: int, timeout: float) -> int:
    """Read ``url`` into ``out`` as its bytes arrive, at most ``limit`` bytes (a larger announced length is refused
    before any is read), giving up when a read waits past ``timeout`` or the whole takes longer than ``limit`` bytes
    at ``MIN_RATE``, however slowly they trickle in (each read returns what has arrived, so the deadline is checked
    at least every ``timeout``); the number of bytes read."""
    allowed = timeout + limit / MIN_RATE
    end, size = time.monotonic() + allowed, 0
    with _open(url, timeout) as response:
        announced = (response.headers.get("Content-Length") or "").strip()
        if announced.isdigit() and int(announced) > limit:
            raise FetchError(f"{url} is larger than the {limit} bytes it should be ({announced}); refusing it")
        read = getattr(response, "read1", response.read)
        try:
            while block := read(1 << 16):
                size += len(block)
                if size > limit:
                    raise FetchError(f"{url} is larger than the {limit} bytes it should be; refusing it")
                if time.monotonic() > end:
                    raise FetchError(f"{url} came too slowly (not whole within {allowed:.0f} s); giving up")
                out(block)
        except (TimeoutError, OSError) as err:
            raise Unreachable(f"{url} stopped answering ({type(err).__name__}: {err})") from None
    return size


def read_index(url: str, profile: str, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """The published index of ``profile`` under the site ``url``, checked: ours, this version, this profile, and
    every entry a chapter of this book with its archive's name, size and sha256; FetchError otherwise."""
    where = f"{url}/{profile}/{FOLDER}/{INDEX}"
    chunks: list[bytes] = []
    _stream(where, chunks.append, MAX_INDEX, timeout)
    try:
        index = json.loads(b"".join(chunks))
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        raise FetchError(f"{where} is not JSON this library can read; not a published index") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT or index.get("version") != VERSION:
        raise FetchError(f"{where} is not a published index of format {FORMAT!r} version {VERSION}")
    if index.get("profile") != profile or not isinstance(index.get("chapters"), dict):
        raise FetchError(f"{where} is not the index of profile {profile!r}")
    for chapter, entry in index["chapters"].items():
        _check_entry(where, chapter, entry)
    return index


def _check_entry(where: str, chapter: str, entry: Any) -> None:
    """One chapter's entry: a chapter of this book, its archive named ``<chapter>.tar.gz`` beside the index, a size
    within the bundle's cap, a sha256 and a fingerprint."""
    if chapter not in catalog.CHAPTERS:
        raise FetchError(f"{where} names chapter {chapter!r}, which this book has not; refusing the index")
    if not isinstance(entry, dict) or entry.get("file") != ARCHIVE.format(chapter=chapter):
        raise FetchError(
            f"{where} names a file outside the published layout for {chapter} "
            f"({entry.get('file') if isinstance(entry, dict) else entry!r}); refusing the index"
        )
    size = entry.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= bundle_check.MAX_TOTAL:
        raise FetchError(f"{where} gives {chapter} a size of {size!r} bytes; refusing the index")
    if not (
        isinstance(entry.get("sha256"), str)
        and SHA256.fullmatch(entry["sha256"])
        and isinstance(entry.get("fingerprint"), dict)
    ):
        raise FetchError(f"{where} gives {chapter} no sha256 or fingerprint; refusing the index")
    for name, kinds in OPTIONAL.items():
        value = entry.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise FetchError(f"{where} gives {chapter} a malformed {name} ({str(value)[:40]!r}); refusing the index")
    if not all(isinstance(v, str) for v in entry["fingerprint"].values()):
        raise FetchError(f"{where} gives {chapter} a malformed fingerprint; refusing the index")


def download(url: str, target: Path, entry: dict[str, Any], timeout: float = TIMEOUT_S) -> None:
    """Stream one archive to ``target``, checking its size and sha256 against the index's entry as it comes."""
    digest = hashlib.sha256()
    with open(target, "wb") as fh:

        def out(block: bytes) -> None:
            digest.update(block)
            fh.write(block)

        size = _stream(url, out, entry["size"], timeout)
    if size != entry["size"]:
        raise FetchError(f"{url} ended after {size} of its {entry['size']} bytes (truncated); not used")
    if digest.hexdigest() != entry["sha256"]:
        raise FetchError(f"{url} differs from its published sha256 (damaged or altered); not used")
