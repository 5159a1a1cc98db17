"""advcalc's exceptions and warnings: the CLI's messages, as Python objects."""

from __future__ import annotations

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
