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


class OutputError(GrpoError):
    """The output cannot be written: full disk, no permission, closed pipe (exit code 1)."""


class Interrupted(GrpoError):
    """The run was stopped by SIGINT (exit code 130) or SIGTERM (143); nothing was written."""

    def __init__(self, signal_name: str, exit_code: int):
        super().__init__(f"interrupted by {signal_name}; no output written")
        self.exit_code = exit_code
