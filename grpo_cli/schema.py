"""Column roles, their auto-detected names, and checks on the data they hold."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np
import pyarrow as pa

from .errors import ColumnNotFoundError, InputError, RowError, UsageError
from .numerics import inexact_integers


@dataclass(frozen=True)
class Role:
    """What a column is for: its name in messages, the option that names it, and the
    column names looked for when that option is not given (the first present wins; two
    present is ambiguous, unless ``yields`` says which gives way to which, and why).
    ``lookalike``: a word in the names of list columns that probably play this role, which
    are never left unused in silence."""

    label: str
    param: str
    candidates: tuple[str, ...] = ()
    lookalike: str | None = None
    yields: tuple[tuple[str, str, str], ...] = ()  # (candidate, the one it gives way to, why)


# candidates cover the names verl (uid, old_log_probs, ref_log_prob, response_mask, advantages),
# TRL (per_token_logps, old_per_token_logps, ref_per_token_logps, completion_mask) and
# OpenRLHF (action_log_probs, base_action_log_probs, action_mask) give their tensors
ROLES = {
    "prompt": Role(
        "prompt id", "prompt_col", ("prompt_id", "uid", "index"), yields=(("index", "uid", "uid is verl's group id; index numbers dataset rows"),)
    ),
    "reward": Role("reward", "reward_col", ("reward", "score", "token_level_scores", "token_level_rewards")),
    "advantage": Role("advantage", "advantage_col", ("advantage", "advantages")),
    "new": Role("new log-probs", "logprobs_col", ("logprobs", "log_probs", "new_logprobs", "new_log_probs", "per_token_logps")),
    "old": Role("old log-probs", "old_logprobs_col", ("old_logprobs", "old_log_probs", "old_per_token_logps", "action_log_probs")),
    "ref": Role(
        "reference log-probs",
        "ref_logprobs_col",
        ("ref_logprobs", "ref_log_probs", "ref_log_prob", "ref_per_token_logps", "base_action_log_probs"),
        lookalike="ref",
    ),
    "mask": Role("token mask", "mask_col", ("response_mask", "loss_mask", "completion_mask", "action_mask", "mask"), lookalike="mask"),
    "baseline": Role("baseline reward", "baseline_col", ("reward_baseline", "reward_baselines", "baseline_reward", "greedy_reward")),
    "values": Role("values", "values_col", ("values", "value", "critic_values")),
    "sum_pi_squared": Role("sum of pi^2", "sum_pi_squared_col", ("sum_pi_squared",)),
    "is_weights": Role("rollout IS weights", "is_weights_col", ("rollout_is_weights",)),  # verl's batch, with rollout correction on
    "old_values": Role("old values", "old_values_col", ("old_values",)),  # Twinkle's PPOValueLoss: values, old_values, returns
    "returns": Role("returns", "returns_col", ("returns", "token_return")),  # token_return: what `grpo advantages --estimator gae` writes
    "truncated": Role("truncation flag", "truncated_col", ("truncated", "is_truncated")),
    "batch": Role("batch", "by", ("step",)),  # verl's and TRL's dumps: a step is a batch
    "rollout": Role(
        "rollout log-probs",
        "rollout_logprobs_col",
        ("rollout_logprobs", "rollout_log_probs", "rollout_log_prob", "sampling_per_token_logps", "sampling_logprobs"),
    ),
    "entropy": Role("token entropies", "entropy_col", ("entropies", "entropy")),  # TRL's `entropies`
}
NO_COLUMN = "none"  # an optional role's option set to this: no column plays it


def given_columns(explicit: Mapping[str, str | None]) -> dict[str, str]:
    """The columns named for roles (``{role: column or None}``), each with the option that
    names it: what auto-detection leaves to those roles.

    >>> given_columns({"old": "rollout_logprobs", "rollout": None})
    {'rollout_logprobs': 'old_logprobs_col'}
    """
    return {column: ROLES[role].param for role, column in explicit.items() if column is not None and column != NO_COLUMN}


@overload
def resolve_column(
    schema: pa.Schema,
    role: str,
    explicit: str | None,
    *,
    required: Literal[True] = True,
    source: str = "input",
    given: Mapping[str, str] | None = None,
) -> str: ...
@overload
def resolve_column(
    schema: pa.Schema, role: str, explicit: str | None, *, required: bool, source: str = "input", given: Mapping[str, str] | None = None
) -> str | None: ...
def resolve_column(
    schema: pa.Schema, role: str, explicit: str | None, *, required: bool = True, source: str = "input", given: Mapping[str, str] | None = None
) -> str | None:
    """Return the column playing ``role`` (a key of :data:`ROLES`): ``explicit`` if given,
    else the one candidate present that ``given`` (column: the option naming it for another
    role, :func:`given_columns`) does not hold: a column named for one role is never also
    found by name for another.

    A missing explicit or required column raises :class:`ColumnNotFoundError` naming the
    closest existing names; an optional role that is absent (or ``explicit`` is
    :data:`NO_COLUMN`) returns ``None``. Two or more candidates present is ambiguous:
    :class:`UsageError` names them and the option to pass. An absent optional role with a
    lookalike column present (``attention_mask`` for the mask) is a :class:`UsageError`
    saying how to use it or to do without. The reward may be a field of a struct column,
    ``column.field`` (see :func:`field_path`).
    """
    r, names = ROLES[role], schema.names
    known = names + (struct_fields(schema) if role == "reward" else [])
    if explicit is not None:
        if explicit in names or (role == "reward" and field_path(schema, explicit)):
            return explicit
        if explicit == NO_COLUMN and not required:
            return None
        raise ColumnNotFoundError(f"{source}: no column {explicit!r} for {r.label} (`{r.param}`){_suggest(explicit, known)}")
    given = {} if given is None else given
    found = [name for name in r.candidates if name in names and name not in given]
    found = [name for name in found if not any(loser == name and winner in found for loser, winner, _ in r.yields)]
    if len(found) > 1:
        raise UsageError(f"{source}: columns {', '.join(repr(c) for c in found)} could each be the {r.label}; pick one with `{r.param}`")
    if found:
        return found[0]
    if required:
        taken = _taken(role, names, given)
        raise ColumnNotFoundError(
            f"{source}: no {r.label} column (looked for {', '.join(r.candidates)}{taken}; pass `{r.param}`)"
            f"{_suggest(r.candidates[0], known) if r.candidates and not taken else ''}"
        )
    if like := lookalikes(schema, role, tuple(given)):
        raise UsageError(
            f"{source}: column {like[0]!r} looks like the {r.label} but is not one of {', '.join(r.candidates)}; "
            f"pass `{r.param}` {like[0]!r} to use it, or `{r.param}` {NO_COLUMN!r} to do without"
        )
    return None


def explain_role(schema: pa.Schema, role: str, explicit: str | None, source: str = "input", given: Mapping[str, str] | None = None) -> dict:
    """Which column plays ``role`` and why (``given``, found by name, or why none does), and
    the option that changes it; ``given``: the columns named for other roles, never found by
    name for this one (:func:`resolve_column`). A given column that is missing raises, as it
    does for every command.

    >>> explain_role(pa.schema([("uid", pa.string())]), "prompt", None)
    {'column': 'uid', 'why': 'found by name (looked for prompt_id, uid, index)', 'option': 'prompt_col'}
    """
    r = ROLES[role]
    looked = f"looked for {', '.join(r.candidates)}"
    try:
        column = resolve_column(schema, role, explicit, required=False, source=source, given=given)
    except UsageError as exc:  # two candidates, or a lookalike: the run would stop and ask
        return {"column": None, "why": str(exc).removeprefix(f"{source}: "), "option": r.param}
    if explicit is not None:
        why = "given" if column is not None else f"given as {NO_COLUMN!r}"
    else:
        why = f"found by name ({looked})" if column is not None else f"not found ({looked}{_taken(role, schema.names, given or {})})"
        why += "".join(f"; {winner} over {loser}: {reason}" for loser, winner, reason in r.yields if column == winner and loser in schema.names)
    return {"column": column, "why": why, "option": r.param}


def field_path(schema: pa.Schema, name: str) -> tuple[str, ...] | None:
    """The column ``name`` as ``(name,)``, or a field of a struct column written
    ``column.field`` (``a.b.c`` for nested structs) as ``(column, field, ...)``; ``None`` if
    there is no such column or field. A column whose own name holds dots is found first.

    >>> field_path(pa.schema([("rewards", pa.struct([("accuracy", pa.float64())]))]), "rewards.accuracy")
    ('rewards', 'accuracy')
    """
    if name in schema.names:
        return (name,)
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        column = ".".join(parts[:cut])
        if column in schema.names:
            t = schema.field(column).type
            for part in parts[cut:]:
                if not pa.types.is_struct(t) or t.get_field_index(part) < 0:
                    return None
                t = t.field(part).type
            return (column, *parts[cut:])
    return None


def struct_fields(schema: pa.Schema) -> list[str]:
    """``column.field`` for each field of each struct column."""
    return [f"{f.name}.{sub.name}" for f in schema if pa.types.is_struct(f.type) for sub in f.type]


def field_type(schema: pa.Schema, path: tuple[str, ...]) -> pa.DataType:
    """The type of the column or struct field at ``path``."""
    t = schema.field(path[0]).type
    for part in path[1:]:
        t = t.field(part).type
    return t


def lookalikes(schema: pa.Schema, role: str, used: tuple[str | None, ...] = ()) -> list[str]:
    """List columns whose names hold ``role``'s lookalike word and that play no role in ``used``."""
    word = ROLES[role].lookalike
    return [f.name for f in schema if word and word in f.name.lower() and is_list(f.type) and f.name not in used]


def _taken(role: str, names: list[str], given: Mapping[str, str]) -> str:
    """``; 'c' is the `option`` for each candidate of ``role`` present but named for another role."""
    return "".join(f"; {name!r} is the `{given[name]}`" for name in ROLES[role].candidates if name in given and name in names)


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


def is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def list_values(lists: pa.Array) -> pa.Array:
    """The entries of every non-null list of ``lists``, in order (``lists.flatten()``): of a
    list or large list without nulls, the child's values between its offsets, so that a run
    does not import ``pyarrow.compute`` (tens of milliseconds), which ``flatten`` does."""
    if not is_list(lists.type) or lists.null_count:
        return lists.flatten()
    offsets = lists.offsets.to_numpy()
    return lists.values.slice(offsets[0], offsets[-1] - offsets[0])


def contiguous(column: pa.ChunkedArray) -> pa.Array:
    """``column`` as one array: its chunk if it has one (``combine_chunks`` would copy it)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_null(t)


def arrow_array(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """``pa.array(values, mask=mask)`` for a 1-D numpy array of numbers or booleans, built
    from its buffers (zero-copy for numbers): ``pa.array`` imports ``numpy.ma`` to look for a
    masked array, which every run's start-up would pay.

    >>> arrow_array(np.array([1.5, 2.0]), mask=np.array([False, True])).to_pylist()
    [1.5, None]
    """
    values = np.ascontiguousarray(values)
    data = np.packbits(values, bitorder="little") if values.dtype == bool else values
    validity = None if mask is None or not mask.any() else pa.py_buffer(np.packbits(~mask, bitorder="little"))
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [validity, pa.py_buffer(data)])


def check_numeric(field: pa.Field, source: str, role: str) -> None:
    """A scalar role (reward, advantage) must be numeric or boolean (a reward may be a list
    of numbers per row, summed: verl's token_level_scores; an advantage a list of one value
    per row on every token: verl's outcome advantages); a struct of several (one per reward
    function) needs one picked."""
    if pa.types.is_struct(field.type):
        names = [f.name for f in field.type]
        raise UsageError(
            f"{source}: column {field.name!r} holds several values ({', '.join(names)}); "
            f"pick one with `{ROLES[role].param}` {field.name}.{names[0] if names else 'FIELD'}"
        )
    per_token = role in ("reward", "advantage") and is_list(field.type) and is_numeric(field.type.value_type)
    if not (is_numeric(field.type) or per_token):
        raise InputError(f"{source}: column {field.name!r} must be numeric (found {field.type})")


def check_finite_scalars(values: np.ndarray, column: str) -> None:
    """Null (NaN after conversion) or infinite scalar values are refused with a
    :class:`RowError` naming the first such row."""
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        row = int(bad[0])
        raise RowError(row, f"column {column!r} is {'infinite' if np.isinf(values[row]) else 'null or NaN'}")


def inexact_integer(values: pa.Array | pa.ChunkedArray, column: str) -> RowError:
    """The error for the first integer of ``values`` (of ``column``) that float64 would round
    (beyond 2^53), naming its row."""
    ints = values.fill_null(0).to_numpy()
    row = int(np.flatnonzero(inexact_integers(ints))[0])
    return RowError(row, f"column {column!r} holds the integer {ints[row]}, which float64 would round; rescale it to at most 2^53")


def positive_int(value: int | None, name: str) -> None:
    if value is not None and value < 1:
        raise UsageError(f"`{name}` must be >= 1 (found {value!r})")
