"""``advcalc.view``: the CLI's ``advcalc view`` web app, started from Python (a notebook, a
script) as a child process running this package's own command line, so the kernel stays
free and stopping the view never touches the interpreter. In Jupyter the returned object
shows as the page in an IFrame.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, List, Mapping, Optional, Sequence, Union

import pyarrow as pa

from ._errors import UsageError, _from_engine


class View:
    """A running ``advcalc view``: :attr:`url` (with its token) to open; :meth:`stop` (or
    leaving a ``with`` block) ends it. Shown in Jupyter as the page in an IFrame."""

    def __init__(self, process: "subprocess.Popen[str]", url: str, scratch: List[str], height: int):
        self._process = process
        #: The page's URL, with the token every request needs.
        self.url = url
        self._scratch = scratch
        self._height = height

    def stop(self) -> None:
        """Stop the view (SIGTERM, as Ctrl-C stops the CLI) and remove any spooled input."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for d in self._scratch:
            shutil.rmtree(d, ignore_errors=True)
        self._scratch = []

    @property
    def running(self) -> bool:
        """Whether the view still answers."""
        return self._process.poll() is None

    def __enter__(self) -> "View":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<advcalc view at {self.url}{'' if self.running else ' (stopped)'}>"

    def _repr_html_(self) -> str:
        from html import escape

        url = escape(self.url, quote=True)
        return (
            f'<iframe src="{url}" width="100%" height="{int(self._height)}" '
            f'style="border:1px solid #ddd"></iframe>'
            f'<p><a href="{url}" target="_blank" rel="noopener">open in a new tab</a></p>'
        )


def start(data: Any, args: List[str], scratch: List[str], height: int) -> View:
    """Start ``advcalc view ARGS DATA`` and wait for its URL; `scratch`: directories to
    remove when it stops."""
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
    elif hasattr(data, "__arrow_c_stream__"):
        # an in-memory table: written once to a file the view reads row group by row group
        d = tempfile.mkdtemp(prefix="advcalc-view-")
        scratch.append(d)
        path = os.path.join(d, "data.arrow")
        reader = pa.RecordBatchReader.from_stream(data)
        with pa.OSFile(path, "wb") as sink:
            with pa.ipc.new_file(sink, reader.schema) as writer:
                for batch in reader:
                    writer.write_batch(batch)
    else:
        for d in scratch:
            shutil.rmtree(d, ignore_errors=True)
        raise UsageError(
            f"data: expected a path or an object with __arrow_c_stream__, got {type(data).__name__}",
            "pass a file path, a pyarrow Table, a polars DataFrame or a DuckDB relation",
        )
    command = [sys.executable, "-m", "advcalc", "view", "-q", *args, path]
    # stderr to a file, not a pipe nobody reads while the view runs (a pipe fills and blocks)
    err_dir = tempfile.mkdtemp(prefix="advcalc-view-err-")
    scratch.append(err_dir)
    err_path = os.path.join(err_dir, "stderr")
    with open(err_path, "wb") as err_file:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err_file, text=True, encoding="utf-8"
        )
    # the URL comes once the input is read, however long that takes; an error ends the process
    assert process.stdout is not None
    first = process.stdout.readline()
    if not first.startswith("http://"):
        process.kill()
        process.wait()
        with open(err_path, encoding="utf-8", errors="replace") as f:
            err = f.read()
        for d in scratch:
            shutil.rmtree(d, ignore_errors=True)
        raise error_of(process.returncode, err)
    return View(process, first.strip(), scratch, height)


def arguments(
    estimators: Union[str, Sequence[str], None],
    config: Any,
    sets: List[str],
    convention: Optional[str],
    follow: bool,
    tokenizer: Optional[Union[str, "os.PathLike[str]"]],
    host: str,
    port: int,
    allow_nonfinite: bool,
    threads: Optional[int],
    input_format: Optional[str],
    correct_above: float,
    config_file: Optional[str],
) -> List[str]:
    """The CLI's arguments for these Python ones (the config already as a file)."""
    args = shared_arguments(
        estimators, config_file, sets, convention, allow_nonfinite, threads, input_format
    )
    if follow:
        args.append("--follow")
    if tokenizer is not None:
        args += ["--tokenizer", os.fspath(tokenizer)]
    args += ["--host", str(host), "--port", str(int(port)), "--correct-above", repr(float(correct_above))]
    return args


def shared_arguments(
    estimators: Union[str, Sequence[str], None],
    config_file: Optional[str],
    sets: List[str],
    convention: Optional[str],
    allow_nonfinite: bool,
    threads: Optional[int],
    input_format: Optional[str],
) -> List[str]:
    """The CLI arguments ``view`` and ``check`` share: the variant (``-e``, ``-c``,
    ``--set``, ``--convention``) and how to read the input."""
    args: List[str] = []
    if isinstance(estimators, str):
        estimators = [e for e in estimators.split(",") if e]
    if estimators:
        args += ["-e", ",".join(estimators)]
    if config_file is not None:
        args += ["-c", config_file]
    for s in sets:
        args += ["--set", s]
    if convention is not None:
        args += ["--convention", convention]
    if threads is not None:
        args += ["--threads", str(int(threads))]
    if input_format is not None:
        args += ["--input-format", input_format]
    if allow_nonfinite:
        args.append("--allow-nonfinite")
    return args


def config_file(config: Any, scratch: List[str]) -> Optional[str]:
    """A config as the CLI's ``-c`` takes it: a path as it is; YAML text or a dict written
    to a temporary file (its directory appended to ``scratch``)."""
    import json

    if config is None:
        return None
    if isinstance(config, os.PathLike):
        return os.fspath(config)
    if isinstance(config, str) and not ("\n" in config or ": " in config or config.lstrip().startswith("{")):
        return config
    if isinstance(config, Mapping):
        text = json.dumps(config, allow_nan=False)
    elif isinstance(config, str):
        text = config
    else:
        raise UsageError(f"config: expected a path, YAML text or a dict, got {type(config).__name__}")
    d = tempfile.mkdtemp(prefix="advcalc-view-config-")
    scratch.append(d)
    path = os.path.join(d, "config.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def error_of(returncode: int, stderr: str) -> Exception:
    """The CLI's error from its exit status and stderr (``error:``, ``caused by:`` and
    ``hint:`` lines) as this package raises it."""
    lines = stderr.strip().splitlines()
    text = next((m[len("error: ") :] for m in lines if m.startswith("error: ")), None)
    hint = next((m[len("hint: ") :] for m in lines if m.startswith("hint: ")), None)
    causes = [m[len("caused by: ") :] for m in lines if m.startswith("caused by: ")]
    kind = "DataError" if returncode == 1 else "UsageError"
    if text is None:
        text = f"advcalc exited {returncode}: {stderr.strip() or 'no message'}"
    return _from_engine(kind, text, hint, causes)
