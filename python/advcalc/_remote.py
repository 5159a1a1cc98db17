"""Object URLs (``s3://``, ``gs://``, ``az://``, ``abfs[s]://``, ``https://``) where the Python
layer itself lists, reads or writes: a dataset's files, a unit read on a Ray worker, a config
file, an output put after it was written locally.

Paths resolve as Ray Data resolves them, through ``pyarrow.fs.FileSystem.from_uri`` (which
honours ``AWS_ENDPOINT_URL``; a bare ``S3FileSystem()`` does not), so the environment that
serves Ray Data serves this module and the native module's IO layer alike. Outputs are never
written through pyarrow (it has no create-only write): they are written to a local temporary
file and put by the native module (``put_object``: one conditional PUT, ``If-None-Match: *``
unless forced, a multipart upload above 1 GiB), as the CLI puts its OUT.

URL strings are kept as strings: ``pathlib`` would turn ``s3://b/k`` into ``s3:/b/k``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any, List, Optional, Tuple

import pyarrow as pa
import pyarrow.fs as pafs

from ._errors import DataError, UsageError

# the schemes the native module's IO layer takes (`io::location` in the crate)
OBJECT_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss", "https")
# the files a dataset holds, by extension, and what it skips (`io::dataset` in the crate)
DATA_EXTENSIONS = (".parquet", ".arrow", ".feather", ".ipc", ".arrows")
_GLOB_CHARS = "*?["
# a URL that `pathlib` shortened: `s3://b/k` as `s3:/b/k`
_MANGLED = re.compile(r"^(?:" + "|".join(OBJECT_SCHEMES) + r"):/(?!/)", re.IGNORECASE)


def scheme(value: Any) -> Optional[str]:
    """The object storage scheme a string starts with (``scheme://``), lowercased; None for
    a local path or anything else."""
    if not isinstance(value, str):
        return None
    head, sep, _ = value.partition("://")
    return head.lower() if sep and head.lower() in OBJECT_SCHEMES else None


def is_url(value: Any) -> bool:
    return scheme(value) is not None


def fspath(name: str, value: Any) -> str:
    """A path argument as the string the engine takes: a URL as given, a local path through
    ``os.fspath``. A ``pathlib.Path`` made from a URL (``Path("s3://b/k")`` is ``s3:/b/k``)
    is refused instead of being read as a local path."""
    text = os.fspath(value)
    if not isinstance(value, str) and isinstance(text, str) and _MANGLED.match(text):
        raise UsageError(
            f"{name}: {text} is an object URL that pathlib shortened (a Path keeps one slash "
            "after the scheme)",
            "pass the URL as a str, e.g. \"s3://bucket/key\"",
        )
    return text


def filesystem(url: str) -> Tuple[pafs.FileSystem, str]:
    """pyarrow's filesystem for ``url`` and the path in it, as Ray Data resolves it."""
    kind = scheme(url)
    uri = "s3" + url[len("s3a"):] if kind == "s3a" else url
    try:
        return pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, ValueError, OSError) as e:
        raise UsageError(
            f"{url}: pyarrow cannot list or read {kind}:// URLs",
            "the native calls (run, inspect, compare, compute on one object) read it; for "
            "listing and advcalc.ray use s3://, gs:// or abfss://CONTAINER@ACCOUNT.dfs.core."
            "windows.net/",
            [str(e)],
        ) from None


def join(base: str, rel: str) -> str:
    """``rel`` (``/``-separated) under the URL prefix ``base``."""
    return base.rstrip("/") + "/" + rel


def _is_glob(text: str) -> bool:
    return any(c in text for c in _GLOB_CHARS)


def split(url: str) -> Tuple[str, Optional[str]]:
    """A dataset URL as (the prefix listed, the glob its keys must match): the components
    before the first one with a glob character, and the rest (None without a glob)."""
    head, _, body = url.partition("://")
    parts = body.split("/")
    for i, part in enumerate(parts):
        if i > 0 and _is_glob(part):
            return f"{head}://" + "/".join(parts[:i]), "/".join(parts[i:])
    return url.rstrip("/"), None


def is_dataset(url: str) -> bool:
    """Whether ``url`` names a dataset: a prefix (ending in ``/``), a glob, or a key under
    which there are objects (``s3://b/dumps``); one object otherwise (missing or not: the
    reader reports a missing one). An ``https://`` URL names one object."""
    if url.endswith("/") or _is_glob(url.partition("://")[2]):
        return True
    if scheme(url) == "https":
        return False
    fs, path = filesystem(url)
    return _info(fs, path, url).type == pafs.FileType.Directory


def _info(fs: pafs.FileSystem, path: Any, url: str) -> Any:
    try:
        return fs.get_file_info(path)
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"{url}: cannot list it", None, [str(e)]) from None


def dataset_files(url: str) -> List[Tuple[str, str, Optional[int]]]:
    """The files of the dataset ``url`` names, listed once (the prefix before any glob,
    recursively) and filtered here as the CLI filters a directory: data files by extension
    (``.parquet``, ``.arrow``, ``.feather``, ``.ipc``, ``.arrows``), no component starting
    with ``.`` or ``_`` (``_SUCCESS``, writers' temporaries), the glob's components matched
    one by one (``**``: any number of them). In the CLI's dataset order: by the step in the
    path (``step=N``, numerically; paths without one last), then by path. Returns (URL,
    path relative to the prefix, step)."""
    base, pattern = split(url)
    fs, root = filesystem(base)
    root = root.rstrip("/")
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    infos = _info(fs, selector, url)
    rest = pattern.split("/") if pattern is not None else None
    found = []
    for info in infos:
        if info.type != pafs.FileType.File or not info.path.startswith(root + "/"):
            continue
        rel = info.path[len(root) + 1:]
        parts = rel.split("/")
        if any(p.startswith((".", "_")) for p in parts):
            continue
        if not rel.lower().endswith(DATA_EXTENSIONS):
            continue
        if rest is not None and not _glob_matches(rest, parts):
            continue
        try:
            step = path_step(parts)
        except ValueError as e:
            raise DataError(f"{join(base, rel)}: {e}") from None
        found.append((step, parts, rel))
    if not found:
        raise DataError(
            f"{url}: no Parquet or Arrow files under it"
            if pattern is None
            else f"{url}: the glob matches no Parquet or Arrow file",
            "give a prefix or a glob of .parquet/.arrow objects, one file per step",
        )
    # the crate's order: (step, then the path compared component by component)
    found.sort(key=lambda f: ((0, f[0]) if f[0] is not None else (1, 0), f[1]))
    return [(join(base, rel), rel, step) for step, _, rel in found]


def _glob_matches(pattern: List[str], parts: List[str]) -> bool:
    if not pattern:
        return not parts
    first, rest = pattern[0], pattern[1:]
    if first == "**":
        return any(_glob_matches(rest, parts[k:]) for k in range(len(parts) + 1))
    # fnmatch's sets are `[!...]`; the crate takes `[^...]` too
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], first.replace("[^", "[!"))
        and _glob_matches(rest, parts[1:])
    )


_STEP = re.compile(r"step=(-?[0-9]+)")


def path_step(parts: List[str]) -> Optional[int]:
    """The step a relative path names (the crate's ``io::dataset::path_step``): ``step=N`` in
    a directory (hive partitioning) or in the file name, not preceded by a letter, digit or
    ``_`` nor followed by a letter or digit. Two different steps are a ValueError."""
    found: Optional[int] = None
    for part in parts:
        at = 0
        while (k := part.find("step=", at)) >= 0:
            m = _STEP.match(part, k)
            before_ok = k == 0 or not (_ascii_word(part[k - 1]) or part[k - 1] == "_")
            if m is not None and before_ok:
                end = m.end()
                after_ok = end == len(part) or not _ascii_word(part[end])
                step = int(m.group(1))
                if after_ok and -(2**63) <= step < 2**63:
                    if found is not None and found != step:
                        raise ValueError(f"its path names two steps, {found} and {step}")
                    found = step
            at = k + 5
    return found


def _ascii_word(c: str) -> bool:
    return c.isascii() and c.isalnum()


def open_input(url: str) -> Any:
    """``url`` opened for random access (Parquet footers, Arrow IPC files)."""
    fs, path = filesystem(url)
    return fs.open_input_file(path)


def read_text(url: str) -> str:
    """The whole object as UTF-8 text (a config file)."""
    try:
        with open_input(url) as f:
            data = f.read()
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"{url}: cannot read it", None, [str(e)]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{url}: not UTF-8 text", None, [str(e)]) from None


def existing(prefix: str) -> Tuple[bool, set]:
    """Under the URL prefix ``prefix``, listed once: whether it names an object itself, and
    the URLs of the objects under it."""
    fs, root = filesystem(prefix)
    root = root.rstrip("/")
    here = _info(fs, root, prefix).type == pafs.FileType.File
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    below = {
        join(prefix, info.path[len(root) + 1:])
        for info in _info(fs, selector, prefix)
        if info.type == pafs.FileType.File and info.path.startswith(root + "/")
    }
    return here, below


def put(local: str, url: str, force: bool) -> None:
    """The finished local file at ``url`` by the native module's sink: visible only when
    complete; create-only unless ``force`` (the store refuses an existing object)."""
    from . import _load

    _load().put_object(local, url, bool(force))


def same_bytes(local: str, url: str) -> bool:
    """Whether the object at ``url`` holds exactly the bytes of the local file (a retried Ray
    task finding the output its earlier attempt put)."""
    try:
        size = os.path.getsize(local)
        with open_input(url) as remote, open(local, "rb") as mine:
            if remote.size() != size:
                return False
            while True:
                a = mine.read(1 << 22)
                if not a:
                    return True
                if remote.read(len(a)) != a:
                    return False
    except (pa.ArrowException, OSError):
        return False
