"""The project's errors: failures a user can fix, each message naming the key or file at fault.

Commands turn these (and an ``OSError``) into one line and exit 2 (:mod:`rnnsearch.command`).
None is a ``ValueError``, so that a bug's or library's ``ValueError`` is never mistaken for bad
input. This module imports nothing of the project, so that every layer can raise them."""
from __future__ import annotations


class ExpectedError(Exception):
    """A failure the user can fix; the message names the key or file at fault."""


class ConfigError(ExpectedError):
    """A params value is missing, unknown, of the wrong type or impossible; names the key."""


class DataError(ExpectedError):
    """Bad input data; the message names the file (and line) at fault."""


class StageError(ExpectedError):
    """A stage cannot do what was asked (an input missing, its output locked by another process)."""


class TrainingDiverged(StageError):
    """The best dev score is NaN, infinite or worse than guessing: the run's model is worthless."""


class NotSplit(DataError):
    """A word that cannot be split into senses (too rare, too few distinct contexts); says why."""


EXPECTED: tuple[type[BaseException], ...] = (ExpectedError, OSError)
"""What a command reports in one line (exit status 2) instead of a traceback."""
EXIT_ERROR = 2           # an expected failure: one line on stderr
EXIT_INTERRUPTED = 130   # Ctrl-C
