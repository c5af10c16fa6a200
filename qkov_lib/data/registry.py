"""Where each real dataset comes from: the canonical public files (downloaded with pooch into the cache) and the
offline copies (read from $QKOV_DATA_DIR), every file checked by sha256 before it is read.

The expected hash of a file comes from a ``SHA256SUMS`` manifest at the top of its folder (``sha256sum`` format,
paths relative to that folder) when there is one, else from the published hashes below. ``fetch`` records what it
downloads in the cache's manifest, so a later change to a downloaded file is caught too.
"""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from pathlib import Path

from ..core.results import REPO_ROOT, write_atomic
from ..core.results import sha256_file as sha256
from . import DATA_ENV, DataError, cache_dir, data_dir

MANIFEST = "SHA256SUMS"


class DataUnavailable(DataError):
    """A dataset that is not there and cannot be fetched now: a chapter that needs it cannot run, which is not a
    fault of the chapter. In a notebook it shows as its message alone, without a traceback."""

    def _render_traceback_(self) -> list[str]:  # IPython's hook for how an exception is shown
        return [f"{type(self).__name__}: {self}"]


@dataclass(frozen=True)
class Remote:
    """A canonical public file. ``sha256`` is None where no published hash exists (the download is then unchecked,
    and the loader says so)."""

    url: str
    sha256: str | None


CANONICAL: dict[str, dict[str, Remote]] = {
    "hatexplain": {
        "dataset.json": Remote(
            "https://raw.githubusercontent.com/hate-alert/HateXplain/master/Data/dataset.json", None
        ),
        "post_id_divisions.json": Remote(
            "https://raw.githubusercontent.com/hate-alert/HateXplain/master/Data/post_id_divisions.json",
            "c2fb0d89862e7897b11ea3e9380753f15a793482b4b70ad0532dfb1212212835",
        ),
    },
    "sva": {
        "agr_50_mostcommon_10K.tsv.gz": Remote(
            "https://www.dropbox.com/s/5axdu3q9jkxzjy8/agr_50_mostcommon_10K.tsv.gz?dl=1", None
        ),
    },
    "squad": {
        "train-v1.1.json": Remote(
            "https://rajpurkar.github.io/SQuAD-explorer/dataset/train-v1.1.json",
            "3527663986b8295af4f7fcdff1ba1ff3f72d07d61a20f487cb238a6ef92fd955",
        ),
        "dev-v1.1.json": Remote(
            "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json",
            "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9",
        ),
    },
}

# the offline copies each loader reads under $QKOV_DATA_DIR (data/README.md)
OFFLINE_LAYOUT: dict[str, str] = {
    "hatexplain": "hatexplain/post_id_divisions.json, hatexplain/hatexplain_{validation,test}.json and "
    "hatexplain/train_partial/",
    "sva": "sva/rnn_agr_simple/numpred.* and sva/derived/linzen_testset_subjects.tsv",
    "squad": "squad/dev-v1.1.json",
}

# sha256 of the offline copies (their provenance is in each dataset folder's SOURCE.md)
OFFLINE: dict[str, str] = {
    "hatexplain/post_id_divisions.json": "c2fb0d89862e7897b11ea3e9380753f15a793482b4b70ad0532dfb1212212835",
    "hatexplain/hatexplain_validation.json": "6bb44c417973ffa5bc3e52629ec0abfaa8bd7f52e84cfde21f9963954a23d892",
    "hatexplain/hatexplain_test.json": "312193273bf29f02357c03a4f4145b192fc116931d521de98190748a48085c6b",
    "hatexplain/train_partial/training_data.csv": "6e5abdd439805e871a554f2307a09c6b002f79005d0ae8215c91bfe03bd28cf6",
    "hatexplain/train_partial/ritwikmishra_Model_Eval_docs.tar.gz": "0fd2683c472eddb319fb9df253ae69c584006b1b1307522cd0b0c11853dd727a",  # noqa: E501 (a path and its sha256)
    "sva/rnn_agr_simple/numpred.val": "430643ef15cacdcc2ff88afe44a87b9aeaa094c683653a54c2a936428d300245",
    "sva/rnn_agr_simple/numpred.test.1": "528125391c255b926d6e8c01664188efe5e18a991c1dab88907f796b1198913f",
    "sva/rnn_agr_simple/numpred.test.2": "23ad762fbacea0bb35c26dfcdcd72df52a87535cd3fa9dda2bacee44cb8b60c1",
    "sva/rnn_agr_simple/numpred.test.3": "ce9755d6891b8dcb486a3242f7495fdd3881c93320c2d0d2fda4827a8489de55",
    "sva/rnn_agr_simple/numpred.test.4": "c43e0511bb14904e41b8bfce8a76c84912aa42e61ef5428d7ab4c28197488411",
    "sva/rnn_agr_simple/numpred.test.5": "f7b9922a0e581c4a9d45612eb249e4d314c7b21d4cf7c33c82c6731d9368d838",
    "sva/derived/linzen_testset_subjects.tsv": "e5d8a2bf6482ae23dd577dc1dbe8b759a5af808df475bc760a4407ea98aadcc9",
    "squad/dev-v1.1.json": "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9",
}


def read_manifest(root: Path) -> dict[str, str] | None:
    """``root/SHA256SUMS`` as {relative path: sha256}, or None when there is none."""
    path = root / MANIFEST
    if not path.is_file():
        return None
    out = {}
    for i, line in enumerate(read_text(path).splitlines(), 1):
        digest, sep, name = line.strip().partition(" ")
        if not line.strip():
            continue
        if not sep or len(digest) != 64 or not name.strip():
            raise DataError(f"{path} line {i} is not '<sha256>  <path>'; rewrite it with `sha256sum`")
        out[name.strip().lstrip("*")] = digest.lower()
    return out


def add_to_manifest(root: Path, relative: str, digest: str) -> None:
    """Record a file's hash in ``root/SHA256SUMS`` (used by ``fetch`` after a download)."""
    entries = read_manifest(root) or {}
    entries[relative] = digest
    write_atomic(root / MANIFEST, "".join(f"{h}  {name}\n" for name, h in sorted(entries.items())))


def expected_hash(root: Path, relative: str, published: str | None) -> tuple[str | None, str]:
    """The hash a file must have and where it comes from: the folder's manifest, else the published one."""
    entries = read_manifest(root)
    if entries is None:
        return published, "published sha256"
    if relative not in entries:
        raise DataError(
            f"{root / relative} is not listed in {root / MANIFEST}; add its line (sha256sum "
            f"{relative} >> {MANIFEST}) or remove the manifest to check against the published hashes"
        )
    return entries[relative], MANIFEST


def checked(path: Path, expected: str | None, source: str = "published sha256") -> Path:
    """``path`` after checking that it exists and, where a hash is known, that its sha256 matches."""
    if not path.is_file():
        raise DataError(f"missing data file {path}; see data/README.md for the layout and how to get it")
    if expected is not None and (got := sha256(path)) != expected:
        raise DataError(
            f"corrupt data file {path}: sha256 {got[:16]}... differs from the {source} "
            f"{expected[:16]}...; copy or download it again"
        )
    return path


def read_text(path: Path) -> str:
    """A data file's text as UTF-8; one error naming the file and the first bad byte otherwise."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise DataError(
            f"{path} line {line} (byte {err.start}) is not UTF-8 (0x{data[err.start]:02x}); the file is "
            f"corrupt or in another encoding, copy or download it again"
        ) from None


def read_json(path: Path):
    """A JSON data file, parsed; one error naming the file and the fix when it is not valid JSON."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise DataError(
            f"{path} is not valid JSON ({err.msg} at line {err.lineno}); the file is truncated or "
            f"corrupt, copy or download it again"
        ) from None


def offline_file(relative: str) -> Path | None:
    """A checked offline copy under $QKOV_DATA_DIR, or None when the setting is unset or the file absent. A file
    whose hash is known neither from the folder's manifest nor from the published list is refused."""
    root = data_dir()
    if root is None or not (root / relative).is_file():
        return None
    expected, source = expected_hash(root, relative, OFFLINE.get(relative))
    if expected is None:
        raise DataError(f"no sha256 is known for {root / relative}; list it in {root / MANIFEST}")
    return checked(root / relative, expected, source)


def canonical_file(dataset: str, name: str, download: bool = False) -> Path | None:
    """A checked canonical file from the cache (downloading it with pooch when ``download``), or None when absent.
    A file without a published hash is checked against the hash recorded when it was downloaded."""
    remote, root = CANONICAL[dataset][name], cache_dir()
    target = root / dataset / name
    if target.is_file():
        return checked(target, *expected_hash(root, f"{dataset}/{name}", remote.sha256))
    if not download:
        return None
    if (offline := data_dir()) is not None:  # the reader named the data: nothing is downloaded beside it
        raise not_found(
            dataset,
            f"{DATA_ENV}={str(offline)!r} holds none of its files, and no download is tried while {DATA_ENV} is set",
        )
    import pooch  # lazy: it imports tqdm.auto, which warns inside a notebook kernel; only a download needs it

    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    try:
        path = pooch.retrieve(
            remote.url,
            known_hash=f"sha256:{remote.sha256}" if remote.sha256 else None,
            fname=name,
            path=target.parent,
            progressbar=False,
            downloader=pooch.HTTPDownloader(timeout=60),
        )
    except ValueError as err:  # pooch's hash mismatch; it leaves no partial file
        _remove_empty(made)
        raise DataError(f"the download of {remote.url} is corrupt ({err}); try again later") from None
    except Exception as err:  # no network, a refused or failed request
        _remove_empty(made)
        raise not_found(dataset, f"the download from {remote.url} failed: {type(err).__name__}") from None
    add_to_manifest(root, f"{dataset}/{name}", sha256(Path(path)))
    return Path(path)


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed download made (innermost first), where they are still empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _digest(path: Path) -> str:
    """A data file's sha256, computed once per version of the file (its size and modification time) in a process."""
    stat = path.stat()
    return _digest_of(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _digest_of(path: str, size: int, mtime_ns: int) -> str:
    return sha256(Path(path))


def data_identity(dataset: str) -> dict[str, object]:
    """Which data a chapter reading ``dataset`` computes on here, by content: the release its loader reads (the
    offline copies under $QKOV_DATA_DIR first, else the canonical release in the cache, as the loaders choose) and
    the sha256 of each of that release's files present, named within the release, never by where it lies on this
    disk; ``{"release": None, "files": {}}`` when neither is here. Goes into the runner's fingerprint, so a moved
    data folder or cache changes nothing, and other bytes rerun the chapter."""
    root, cache = data_dir(), cache_dir()
    offline = {name: root / name for name in OFFLINE if name.startswith(f"{dataset}/")} if root else {}
    for release, paths in (
        ("offline", offline),
        ("canonical", {name: cache / dataset / name for name in CANONICAL[dataset]}),
    ):
        present = {name: _digest(path) for name, path in sorted(paths.items()) if path.is_file()}
        if present:
            return {"release": release, "files": present}
    return {"release": None, "files": {}}


def _shown(path: Path) -> str:
    """A path as a reader should see it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def not_found(dataset: str, why: str | None = None) -> DataUnavailable:
    """The one error raised when a dataset is available neither offline nor in the cache (nor downloadable now)."""
    files = ", ".join(CANONICAL[dataset])
    return DataUnavailable(
        f"{dataset} data not available{f' ({why})' if why else ''}. Either set {DATA_ENV} to a "
        f"folder holding {OFFLINE_LAYOUT[dataset]} (see data/README.md), or download the canonical "
        f"release ({files}) into {_shown(cache_dir() / dataset)} with `python -m qkov_lib fetch "
        f"{dataset}` on a machine with the internet"
    )
