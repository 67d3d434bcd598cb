"""Column roles, their auto-detected names, and checks on the data they hold."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .errors import ColumnNotFoundError, InputError, RowError, UsageError


@dataclass(frozen=True)
class Role:
    """What a column is for: its name in messages, the option that names it, and the
    column names looked for when that option is not given (the first present wins; two
    present is ambiguous)."""

    label: str
    param: str
    candidates: tuple[str, ...] = ()


ROLES = {
    "prompt": Role("prompt id", "prompt_col", ("prompt_id", "uid", "index")),
    "reward": Role("reward", "reward_col", ("reward", "score")),
    "advantage": Role("advantage", "advantage_col", ("advantage",)),
    "new": Role("new log-probs", "logprobs_col", ("logprobs", "log_probs", "new_logprobs")),
    "old": Role("old log-probs", "old_logprobs_col", ("old_logprobs", "old_log_probs")),
    "ref": Role("reference log-probs", "ref_logprobs_col", ("ref_logprobs", "ref_log_probs")),
    "mask": Role("token mask", "mask_col"),
}


def resolve_column(schema: pa.Schema, role: str, explicit: str | None, *, required: bool = True, source: str = "input") -> str | None:
    """Return the column playing ``role`` (a key of :data:`ROLES`): ``explicit`` if given,
    else the one candidate present.

    A missing explicit or required column raises :class:`ColumnNotFoundError` naming the
    closest existing names; an optional role that is absent returns ``None``. Two or more
    candidates present is ambiguous: :class:`UsageError` names them and the option to pass.
    """
    r, names = ROLES[role], schema.names
    if explicit is not None:
        if explicit in names:
            return explicit
        raise ColumnNotFoundError(f"{source}: no column {explicit!r} for {r.label} (`{r.param}`){_suggest(explicit, names)}")
    found = [name for name in r.candidates if name in names]
    if len(found) > 1:
        raise UsageError(
            f"{source}: columns {', '.join(repr(c) for c in found)} could each be the {r.label}; pick one with `{r.param}`"
        )
    if found:
        return found[0]
    if required:
        raise ColumnNotFoundError(
            f"{source}: no {r.label} column (looked for {', '.join(r.candidates)}; pass `{r.param}`)"
            f"{_suggest(r.candidates[0], names) if r.candidates else ''}"
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


def is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_null(t)


def check_numeric(field: pa.Field, source: str) -> None:
    """A scalar role (reward, advantage) must be numeric or boolean."""
    if not is_numeric(field.type):
        raise InputError(f"{source}: column {field.name!r} must be numeric (found {field.type})")


def check_finite_scalars(values: np.ndarray, column: str) -> None:
    """Null (NaN after conversion) or infinite scalar values are refused with a
    :class:`RowError` naming the first such row."""
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        row = int(bad[0])
        raise RowError(row, f"column {column!r} is {'infinite' if np.isinf(values[row]) else 'null or NaN'}")


def positive_int(value: int | None, name: str) -> None:
    if value is not None and value < 1:
        raise UsageError(f"require `{name}` >= 1 (found {value!r})")
