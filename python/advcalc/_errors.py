"""advcalc's exceptions and warnings: the CLI's messages, as Python objects."""

from __future__ import annotations

import re
from typing import Iterable, Optional


class Error(Exception):
    """An advcalc error: what is wrong (``message``), its causes (``causes``, innermost
    last) and the fix to try (``hint``, or None). ``str(e)`` is what the CLI prints after
    ``error:``. ``exit_code`` is the CLI's exit status for it."""

    exit_code = 1

    def __init__(self, message: str, hint: Optional[str] = None, causes: Iterable[str] = ()):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.causes = list(causes)

    def __str__(self) -> str:
        lines = [self.message]
        lines += [f"caused by: {c}" for c in self.causes]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class DataError(Error):
    """The input could not be read or holds a value advcalc refuses (the CLI's exit 1)."""

    exit_code = 1


class UsageError(Error):
    """A bad argument or configuration (the CLI's exit 2)."""

    exit_code = 2


class DataWarning(UserWarning):
    """Something about the data the user should know (the CLI's ``warning:`` lines)."""


class ConfigNote(UserWarning):
    """Something about the configuration, e.g. a key read but ignored (``note:`` lines)."""


# --- the CLI's flags in the engine's messages, as the Python arguments that set them -------

_PY_TRUE = {"true": "True", "false": "False"}


def _set_item(m: "re.Match[str]") -> str:
    value = _PY_TRUE.get(m.group(2), m.group(2))
    return f'set={{"{m.group(1)}": {value}}}'


# Order matters: a `--set ENTRY:` that starts a message names the entry the user gave; then
# `--set KEY=VALUE` examples; then the flags alone.
_FLAG_NAMES = [
    (re.compile(r"^--set (.+?): "), r'set entry "\1": '),
    (re.compile(r"--set ([\w.\[\]{}-]+)=(\S*?)(?=[,;.)]?(?:\s|$))"), _set_item),
    (re.compile(r"\(from -e\)"), "(from estimator=)"),
    (re.compile(r"(?<![\w-])-e (\w+(?:,\w+)*)"), r'estimator="\1"'),
    (re.compile(r"--convention ([\w-]+)(?!\))"), r'convention="\1"'),
    (re.compile(r"--layout (ragged|padded)"), r'layout="\1"'),
    (re.compile(r"--(input|output)-format (\w+)"), r'\1_format="\2"'),
    (re.compile(r"--(input|output)-format\b"), r"\1_format="),
    (re.compile(r"--allow-nonfinite\b"), "allow_nonfinite=True"),
    (re.compile(r"--force\b"), "force=True"),
    (re.compile(r"--resume\b"), "the CLI's --resume (advcalc run)"),
    (re.compile(r"--(set|config|convention|layout|threads|memory|metrics)\b"), r"\1="),
]


def python_names(text: str) -> str:
    """An engine message with the CLI's flags named as the Python arguments that set them
    (``--set algorithm.lam=0.95`` → ``set={"algorithm.lam": 0.95}``, ``-e`` → ``estimator=``,
    ``--force`` → ``force=True``, ...)."""
    for pattern, repl in _FLAG_NAMES:
        text = pattern.sub(repl, text)
    return text


def _from_engine(kind: str, message: str, hint: Optional[str], causes: Iterable[str]) -> Error:
    """The exception the native module raises for an engine error: the CLI's message, hint
    and causes with the flags named as Python arguments."""
    cls = {"DataError": DataError, "UsageError": UsageError}.get(kind, Error)
    return cls(
        python_names(message),
        python_names(hint) if hint is not None else None,
        [python_names(c) for c in causes],
    )
