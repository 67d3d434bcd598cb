"""Column roles, their auto-detected names, and checks on the data they hold."""

from __future__ import annotations

import difflib

import numpy as np
import pyarrow as pa

from .errors import ColumnNotFoundError, InputError, UsageError

PROMPT_CANDIDATES = ("prompt_id", "uid", "index")
REWARD_CANDIDATES = ("reward", "score")
ADVANTAGE_CANDIDATES = ("advantage",)
LOGPROBS_CANDIDATES = ("logprobs", "log_probs", "new_logprobs")
OLD_LOGPROBS_CANDIDATES = ("old_logprobs", "old_log_probs")
REF_LOGPROBS_CANDIDATES = ("ref_logprobs", "ref_log_probs")


def resolve_column(
    schema: pa.Schema,
    *,
    role: str,
    flag: str,
    explicit: str | None,
    candidates: tuple[str, ...] = (),
    required: bool = True,
    source: str = "input",
) -> str | None:
    """Return the column playing ``role``: ``explicit`` if given, else the one candidate present.

    A missing explicit or required column raises :class:`ColumnNotFoundError` naming the
    closest existing names; an optional role that is absent returns ``None``. Two or more
    candidates present is ambiguous: :class:`UsageError` names them and the flag to pass.
    """
    names = schema.names
    if explicit is not None:
        if explicit in names:
            return explicit
        raise ColumnNotFoundError(f"{source}: no column {explicit!r} for {role} ({flag}){_suggest(explicit, names)}")
    found = [name for name in candidates if name in names]
    if len(found) > 1:
        raise UsageError(
            f"{source}: columns {', '.join(repr(c) for c in found)} could each be the {role}; "
            f"pick one with {flag}"
        )
    if found:
        return found[0]
    if required:
        looked = ", ".join(candidates)
        raise ColumnNotFoundError(
            f"{source}: no {role} column (looked for {looked}; pass {flag})"
            f"{_suggest(candidates[0], names) if candidates else ''}"
        )
    return None


def _suggest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    if close:
        return f"; did you mean {', '.join(repr(c) for c in close)}?"
    return f"; columns are: {', '.join(names)}" if names else ""


def check_unique_names(schema: pa.Schema, source: str) -> None:
    """Reject duplicate column names: every role must point at one column."""
    seen: set[str] = set()
    for name in schema.names:
        if name in seen:
            raise InputError(f"{source}: duplicate column name {name!r}")
        seen.add(name)


def check_numeric(field: pa.Field, source: str) -> None:
    """A scalar role (reward, advantage) must be numeric or boolean."""
    t = field.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_null(t)):
        raise InputError(f"{source}: column {field.name!r} must be numeric (found {t})")


def first_bad_row(valid: np.ndarray) -> int | None:
    """Index of the first row where ``valid`` is False, or None."""
    bad = np.flatnonzero(~valid)
    return int(bad[0]) if bad.size else None


def check_finite_scalars(values: np.ndarray, *, column: str, row_label) -> None:
    """Null (NaN after conversion) or infinite scalar values are refused, naming the first row
    (``row_label(row)`` says where it is: ``file: row r (prompt id ...)``)."""
    row = first_bad_row(np.isfinite(values))
    if row is not None:
        what = "infinite" if np.isinf(values[row]) else "null or NaN"
        raise InputError(f"{row_label(row)}: column {column!r} is {what}")


def positive_int(value: int | None, name: str) -> None:
    if value is not None and value < 1:
        raise UsageError(f"require `{name}` >= 1 (found {value!r})")
