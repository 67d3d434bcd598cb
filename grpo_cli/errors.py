"""Errors raised by the library. The CLI catches :class:`GrpoError` once and prints one line.

Messages name options by their Python parameter in backticks (`` `reward_col` ``); the CLI
shows the same message with its flag (``--reward-col``).
"""

from __future__ import annotations

import difflib
from typing import Iterable, TypeVar


class GrpoError(Exception):
    """Base class: a failure the user can fix. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class UsageError(GrpoError, ValueError):
    """An option or combination of options is invalid (exit code 2)."""

    exit_code = 2


class UnknownOptionError(UsageError, TypeError):
    """A keyword that no option has: a typo must never be ignored."""


class InputError(GrpoError, ValueError):
    """The input data is unreadable or violates the schema (exit code 1)."""


class ColumnNotFoundError(InputError):
    """A required column is missing from the input."""


class RowError(InputError):
    """Bad data in row ``row`` of a batch; the engine that ran the batch says where that row is
    (file, row in the file, prompt id) in front of ``detail``."""

    def __init__(self, row: int, detail: str):
        super().__init__(detail)
        self.row = row
        self.detail = detail


class OutputError(GrpoError):
    """The output cannot be written: full disk, no permission, closed pipe (exit code 1)."""


class Interrupted(GrpoError):
    """The run was stopped by SIGINT (exit code 130) or SIGTERM (143). ``detail`` says what was
    written; the code that knows adds it (:meth:`saying`), and without it the message claims nothing."""

    def __init__(self, signal_name: str, exit_code: int, detail: str = ""):
        super().__init__(f"interrupted by {signal_name}{detail}")
        self.signal_name = signal_name
        self.exit_code = exit_code
        self.detail = detail

    def saying(self, detail: str) -> "Interrupted":
        """This interrupt with ``detail``, unless it already says what was written."""
        return self if self.detail else Interrupted(self.signal_name, self.exit_code, detail)


T = TypeVar("T")


def present(value: T | None, what: str) -> T:
    """``value``, which the plan made sure is there (``what`` it is); ``None`` is a bug.

    >>> present(3, "the row count")
    3
    """
    if value is None:
        raise AssertionError(f"{what} is missing")
    return value


RECEIVED: list[Interrupted] = []  # signals the CLI's handler raised, in case Python swallowed one (see Outputs.commit)

SHOWN_CHARACTERS = 60  # of a prompt text used as a group's id, in messages and tables


def shortened(key: object) -> object:
    r"""A prompt id as messages and tables show it: a text on one line (its line breaks and
    runs of spaces as one space), and one longer than :data:`SHOWN_CHARACTERS` characters as
    its first 20 and its last 39 with an ellipsis between: chat-templated prompts share their
    start (``system ...``) and differ at their end, the question. Any other id as it is.

    >>> shortened("system\nYou are a helpful assistant. Think step by step.\nuser\nWhat is 2 + 2?")
    'system You are a hel…Think step by step. user What is 2 + 2?'
    """
    if not isinstance(key, str):
        return key
    text = " ".join(key.split())
    return text if len(text) <= SHOWN_CHARACTERS else text[:20] + "…" + text[-(SHOWN_CHARACTERS - 21) :]


def check_keywords(given: Iterable[str], valid: Iterable[str], where: str, within: dict[str, str] | None = None) -> None:
    """Refuse keywords that no option has, listing the valid ones (and the closest match; a
    flag's spelling, ``reward-col``, finds its parameter, ``reward_col``; an option of a config
    object, how to pass it, from ``within``).

    >>> check_keywords(["scal"], ["scale", "std"], "GRPOAdvantage()")
    Traceback (most recent call last):
    ...
    grpo_cli.errors.UnknownOptionError: GRPOAdvantage() has no option `scal`; did you mean `scale`? (valid: scale, std)
    """
    valid, within = list(valid), within or {}
    for name in given:
        if name not in valid and name in within:
            raise UnknownOptionError(f"{where} takes `{name}` in a config object: {within[name]}")
        if name not in valid:
            spelled = name.strip("-").replace("-", "_")
            known = [*valid, *within]
            close = [spelled] if spelled in known else difflib.get_close_matches(name, known, n=1, cutoff=0.5)
            hint = f"; did you mean `{close[0]}`{', in a config object: ' + within[close[0]] if close[0] in within else ''}?" if close else ""
            raise UnknownOptionError(f"{where} has no option `{name}`{hint} (valid: {', '.join(valid)})")
