"""Atomic output files from Python: the CLI's scheme (``src/io/atomic.rs``), in pure Python.

The verl hook and the Ray runner write their files as the CLI writes its outputs, so a
temporary file any of the three leaves is named, recognised and removed the same way:

* the output is written to a temporary file beside it, named
  ``.advcalc-HOST-KEY-PID-<random><suffix>``: HOST the host name (characters other than
  ``A-Za-z0-9._-`` as ``_``, at most 64), KEY 16 hex digits of FNV-1a 64 of the host name,
  the kernel's boot id and the PID-namespace link joined by NUL (``nokey`` where ``/proc``
  cannot tell them), PID the writing process, ``<suffix>`` ``.parquet.tmp`` (Parquet) or
  ``.arrow.tmp`` (Arrow IPC);
* before creating one, the temporaries in the directory that this host's dead processes
  left are removed (``remove_stale_temporaries``: same HOST and KEY, a PID that no longer
  exists here; another host's or container's, an earlier boot's, and anything under
  ``nokey`` are never touched, whatever their PID);
* the finished file is fsynced, renamed over the output, and the directory fsynced.

One addition, for a runner that knows its own files: a ``tag`` starts the random part
(``.advcalc-HOST-KEY-PID-<tag><random><suffix>``, the CLI's parser reads only up to PID), and
``remove_tagged_temporaries`` removes every temporary carrying it, whichever host wrote it.
The Ray runner tags its two-pass writes with its run id and removes them when the run ends:
a task whose node died left its temporary under another host's key, which the PID rule
rightly never removes.

Only the standard library: ``advcalc.verl`` writes through this module without the native
module.
"""

from __future__ import annotations

import os
import re
import secrets
import string
from pathlib import Path
from typing import Callable, Optional, Tuple, Union

__all__ = [
    "temp_prefix_for",
    "temp_prefix",
    "temp_suffix",
    "remove_stale_temporaries",
    "remove_tagged_temporaries",
    "create_temporary",
    "write_atomic",
]

TEMP_PREFIX = ".advcalc-"
PARQUET_SUFFIX = ".parquet.tmp"
ARROW_SUFFIX = ".arrow.tmp"
# Arrow IPC outputs (file and stream), by extension, as advcalc._files writes them
_ARROW_EXTENSIONS = (".arrow", ".feather", ".ipc", ".arrows")
# the random part's characters and length, as the CLI's (tempfile's defaults)
_RANDOM_CHARS = string.ascii_letters + string.digits
_RANDOM_LEN = 6
_TAG = re.compile(r"[A-Za-z0-9._]*")
_PID = re.compile(r"\+?[0-9]+")

_host_key: Optional[Tuple[str, Optional[str]]] = None


# what Rust's `str::trim` removes (Unicode White_Space; Python's `strip()` also takes \x1c-\x1f)
_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8").strip(_WHITESPACE)
    except (OSError, UnicodeDecodeError):
        return None


def fnv1a(data: bytes) -> int:
    """FNV-1a, 64 bits (the CLI's ``fnv1a``)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def host_key() -> Tuple[str, Optional[str]]:
    """(HOST, KEY) of this process, as the CLI's ``host_key``: KEY ``None`` where the boot id
    or the PID namespace cannot be read (then nothing is ever removed)."""
    global _host_key
    if _host_key is None:
        host = _read("/proc/sys/kernel/hostname")
        if host is None:
            host = os.environ.get("HOSTNAME")
        if host is None:
            host = os.environ.get("COMPUTERNAME")
        if host is None:
            host = ""
        boot = _read("/proc/sys/kernel/random/boot_id") or None
        try:
            ns: Optional[str] = os.readlink("/proc/self/ns/pid")
        except OSError:
            ns = None
        key = None
        if boot is not None and ns is not None:
            joined = "\0".join([host, boot, ns]).encode("utf-8", "surrogateescape")
            key = f"{fnv1a(joined):016x}"
        shown = "".join(c if re.fullmatch(r"[A-Za-z0-9._-]", c) else "_" for c in host[:64])
        _host_key = (shown or "host", key)
    return _host_key


def temp_prefix_for(pid: int) -> str:
    """The start of the temporary output names that process ``pid`` of this host writes:
    ``.advcalc-HOST-KEY-PID-`` (the CLI's ``temp_prefix_for``)."""
    host, key = host_key()
    return f"{TEMP_PREFIX}{host}-{key or 'nokey'}-{pid}-"


def temp_prefix() -> str:
    """The start of this process's temporary output names."""
    return temp_prefix_for(os.getpid())


def temp_suffix(path: Union[str, "os.PathLike[str]"]) -> str:
    """The temporary file's suffix for the output ``path``: ``.arrow.tmp`` for Arrow IPC
    (``.arrow``, ``.feather``, ``.ipc``, ``.arrows``), ``.parquet.tmp`` otherwise."""
    return ARROW_SUFFIX if Path(path).suffix.lower() in _ARROW_EXTENSIONS else PARQUET_SUFFIX


def remove_stale_temporaries(directory: Union[str, "os.PathLike[str]"]) -> None:
    """Delete the temporary outputs in ``directory`` that advcalc processes of this host
    (same host name, boot and PID namespace) left when they were killed: their process is
    gone. Whoever wrote them: the CLI, the native module, this module. Another host's or
    container's files, an earlier boot's, and everything where ``/proc`` cannot tell, are
    left alone. Best effort: errors are ignored."""
    host, key = host_key()
    if key is None:
        return
    own = f"{TEMP_PREFIX}{host}-{key}-"
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    me = os.getpid()
    for entry in entries:
        name = entry.name
        if not name.startswith(own) or not name.endswith(".tmp"):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
        except OSError:
            continue
        pid = name[len(own):].split("-", 1)[0]
        if not _PID.fullmatch(pid) or int(pid) > 0xFFFFFFFF:
            continue
        if int(pid) != me and not os.path.exists(f"/proc/{int(pid)}"):
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def remove_tagged_temporaries(directory: Union[str, "os.PathLike[str]"], tag: str) -> None:
    """Delete every temporary output in ``directory`` whose random part starts with ``tag``
    (``create_temporary(..., tag=tag)``), on whichever host or process it was written: for a
    runner that knows no write of its own is in flight any more. Best effort."""
    if not tag:
        raise ValueError("remove_tagged_temporaries needs a tag")
    pattern = re.compile(
        re.escape(TEMP_PREFIX) + r"[A-Za-z0-9._-]+-(?:[0-9a-f]{16}|nokey)-\+?[0-9]+-"
        + re.escape(tag) + r"[A-Za-z0-9]+\.[a-z]+\.tmp"
    )
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
        except OSError:
            pass


def create_temporary(directory: Union[str, "os.PathLike[str]"], suffix: str, tag: str = "") -> Path:
    """A new, empty temporary file in ``directory`` named
    ``.advcalc-HOST-KEY-PID-<tag><random><suffix>``, after removing this host's dead
    processes' leftovers there. Its mode is 0666 less the umask, as the output's would be."""
    if not _TAG.fullmatch(tag):
        raise ValueError(f"tag {tag!r}: only letters, digits, '.' and '_'")
    remove_stale_temporaries(directory)
    prefix = temp_prefix() + tag
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(1000):
        random = "".join(secrets.choice(_RANDOM_CHARS) for _ in range(_RANDOM_LEN))
        path = Path(directory) / f"{prefix}{random}{suffix}"
        try:
            fd = os.open(path, flags, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise FileExistsError(f"{directory}: no free temporary name for {prefix}*{suffix}")


def write_atomic(
    path: Union[str, "os.PathLike[str]"],
    write: Callable[[Path], None],
    *,
    tag: str = "",
) -> Path:
    """Write the output ``path`` atomically: ``write(tmp)`` fills a temporary file beside it
    (``create_temporary``, the suffix by ``path``'s extension), which is fsynced and renamed
    over ``path``, then the directory is fsynced. A reader sees the old file or the whole new
    one; on an exception (a ``KeyboardInterrupt`` too) the temporary is removed, and a
    killed process leaves at most the temporary, which the next write into the directory on
    this host removes. Returns ``path``."""
    path = Path(path)
    tmp = create_temporary(path.parent, temp_suffix(path), tag)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)
    return path


def fsync_dir(directory: Union[str, "os.PathLike[str]"]) -> None:
    """Flush a directory's entries (a rename in it) to disk; best effort."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
