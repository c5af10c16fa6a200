"""Where each real dataset comes from: the canonical public files (downloaded with pooch into the cache) and the
offline copies (read from $QKOV_DATA_DIR), each checked by sha256 where the hash is known."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from . import DATA_ENV, cache_dir, data_dir


class DataError(RuntimeError):
    """A dataset that is missing, corrupt or malformed; the message names the file and the fix."""


@dataclass(frozen=True)
class Remote:
    """A canonical public file. ``sha256`` is None where no published hash exists (the download is then unchecked,
    and the loader says so)."""

    url: str
    sha256: str | None


CANONICAL: dict[str, dict[str, Remote]] = {
    "hatexplain": {
        "dataset.json": Remote("https://raw.githubusercontent.com/hate-alert/HateXplain/master/Data/dataset.json",
                               None),
        "post_id_divisions.json": Remote(
            "https://raw.githubusercontent.com/hate-alert/HateXplain/master/Data/post_id_divisions.json",
            "c2fb0d89862e7897b11ea3e9380753f15a793482b4b70ad0532dfb1212212835"),
    },
    "sva": {
        "agr_50_mostcommon_10K.tsv.gz": Remote("https://www.dropbox.com/s/5axdu3q9jkxzjy8/"
                                               "agr_50_mostcommon_10K.tsv.gz?dl=1", None),
    },
}

# sha256 of the offline copies (their provenance is in each dataset folder's SOURCE.md)
OFFLINE: dict[str, str] = {
    "hatexplain/post_id_divisions.json": "c2fb0d89862e7897b11ea3e9380753f15a793482b4b70ad0532dfb1212212835",
    "hatexplain/hatexplain_validation.json": "6bb44c417973ffa5bc3e52629ec0abfaa8bd7f52e84cfde21f9963954a23d892",
    "hatexplain/hatexplain_test.json": "312193273bf29f02357c03a4f4145b192fc116931d521de98190748a48085c6b",
    "hatexplain/train_partial/training_data.csv": "6e5abdd439805e871a554f2307a09c6b002f79005d0ae8215c91bfe03bd28cf6",
    "hatexplain/train_partial/ritwikmishra_Model_Eval_docs.tar.gz":
        "0fd2683c472eddb319fb9df253ae69c584006b1b1307522cd0b0c11853dd727a",
    "sva/rnn_agr_simple/numpred.val": "430643ef15cacdcc2ff88afe44a87b9aeaa094c683653a54c2a936428d300245",
    "sva/rnn_agr_simple/numpred.test.1": "528125391c255b926d6e8c01664188efe5e18a991c1dab88907f796b1198913f",
    "sva/rnn_agr_simple/numpred.test.2": "23ad762fbacea0bb35c26dfcdcd72df52a87535cd3fa9dda2bacee44cb8b60c1",
    "sva/rnn_agr_simple/numpred.test.3": "ce9755d6891b8dcb486a3242f7495fdd3881c93320c2d0d2fda4827a8489de55",
    "sva/rnn_agr_simple/numpred.test.4": "c43e0511bb14904e41b8bfce8a76c84912aa42e61ef5428d7ab4c28197488411",
    "sva/rnn_agr_simple/numpred.test.5": "f7b9922a0e581c4a9d45612eb249e4d314c7b21d4cf7c33c82c6731d9368d838",
    "sva/derived/linzen_testset_subjects.tsv": "e5d8a2bf6482ae23dd577dc1dbe8b759a5af808df475bc760a4407ea98aadcc9",
}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked(path: Path, expected: str | None, verify: bool = True) -> Path:
    """``path`` after checking that it exists and, when ``verify`` and a hash is known, that its sha256 matches."""
    if not path.is_file():
        raise DataError(f"missing data file {path}; see data/README.md for the layout and how to get it")
    if verify and expected is not None and (got := sha256(path)) != expected:
        raise DataError(f"corrupt data file {path}: sha256 {got[:16]}... differs from the published "
                        f"{expected[:16]}...; copy or download it again")
    return path


def offline_file(relative: str, verify: bool = True) -> Path | None:
    """A checked offline copy under $QKOV_DATA_DIR, or None when the setting is unset or the file absent."""
    root = data_dir()
    if root is None or not (root / relative).is_file():
        return None
    return checked(root / relative, OFFLINE.get(relative) if verify else None)


def canonical_file(dataset: str, name: str, download: bool = False, verify: bool = True) -> Path | None:
    """A canonical file from the cache (downloading it with pooch when ``download``), or None when absent."""
    remote = CANONICAL[dataset][name]
    target = cache_dir() / dataset / name
    if target.is_file():
        return checked(target, remote.sha256, verify)
    if not download:
        return None
    import pooch
    try:
        path = pooch.retrieve(remote.url, known_hash=f"sha256:{remote.sha256}" if remote.sha256 else None,
                              fname=name, path=target.parent, progressbar=False)
    except Exception as err:  # network errors and pooch's hash mismatch alike; pooch leaves no partial file
        raise DataError(f"downloading {remote.url} failed ({type(err).__name__}: {err}); check the connection, "
                        f"or use offline copies through {DATA_ENV}") from None
    return Path(path)


def not_found(dataset: str, offline_layout: str) -> DataError:
    """The one error raised when a dataset is available neither offline nor in the cache."""
    files = ", ".join(CANONICAL[dataset])
    return DataError(f"{dataset} data not found. Either set {DATA_ENV} to a folder holding {offline_layout} "
                     f"(see data/README.md), or download the canonical release ({files}) into "
                     f"{cache_dir() / dataset} with `python -m qkov_lib fetch {dataset}` on a machine with the "
                     f"internet")
