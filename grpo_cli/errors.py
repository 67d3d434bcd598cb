"""Errors raised by the library. The CLI catches :class:`GrpoError` once and prints one line."""


class GrpoError(Exception):
    """Base class: a failure the user can fix. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class UsageError(GrpoError, ValueError):
    """An option or combination of options is invalid (exit code 2)."""

    exit_code = 2


class InputError(GrpoError, ValueError):
    """The input data is unreadable or violates the schema (exit code 1)."""


class ColumnNotFoundError(InputError):
    """A required column is missing from the input."""
