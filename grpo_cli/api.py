"""Python API for notebooks and trainers: Twinkle-style advantage callables, seed 000's group
normalisation and seed 002's objective. They call the same code as the CLI."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from .config import AdvantageConfig
from .errors import InputError, RowError, UsageError, check_keywords
from .estimators import group_index, lookup, needed_by, needs, row_advantages, row_inputs, whitened_rows
from .objective import LOSSES, row_terms
from .objective.entropy import counted_entropies, entropy_threshold, scanned
from .objective.rollout import is_mean, is_mean_part
from .objective.config import ObjectiveConfig
from .objective.summary import ObjectiveSummary
from .plan import default_estimator
from .schema import check_finite_scalars
from .token_columns import TokenColumns, read_tokens

TWINKLE_SCALED = {"std": "sample", "eps": 1e-8}  # Twinkle's numerics where advantages are scaled


def advantages(
    rewards: Sequence[float] | np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    config: AdvantageConfig | None = None,
    *,
    lengths: Sequence[int] | None = None,
    baseline: Sequence[float] | None = None,
) -> np.ndarray:
    """Advantages (float64) of ``rewards`` grouped by the keys in ``groups`` (any order).

    ``rewards``: one per row, or rows x reward functions (2-d); NaN is a null reward.
    ``lengths`` (valid tokens per row) and ``baseline`` (a baseline reward per row) are for
    the estimators that read them (opo, reinforce-baseline; remax).

    >>> advantages([0.0, 1.0, 5.0, 5.0], ["a", "a", "b", "b"], AdvantageConfig()).tolist()
    [-1.0, 1.0, 0.0, 0.0]
    >>> advantages([1.0, 0.0], ["a", "b"], AdvantageConfig(estimator="remax"), baseline=[0.5, 0.5]).tolist()
    [0.5, -0.5]
    """
    config = config or AdvantageConfig()
    r = numbers(rewards, "rewards")
    values = r[:, None] if r.ndim == 1 else r
    if values.ndim != 2 or len(groups) != values.shape[0]:
        raise InputError(f"`rewards` and `groups` must have one entry per row (found {r.shape} and {len(groups)})")
    if np.isinf(values).any():
        raise InputError(f"reward {int(np.argwhere(np.isinf(values))[0][0])} is infinite")
    spec = lookup(config.estimator)
    if spec.level == "token":
        raise UsageError(f"estimator {config.estimator!r} gives per-token advantages; run it on a file with `advantages_file`")
    if config.kl_in_reward is not None:
        raise UsageError("`kl_in_reward` reads each token's old and reference log-probs; run it on a file with `advantages_file`")
    extras, read = {"lengths": lengths, "baseline": baseline}, needs(config)
    for name, needed in (("lengths", "length"), ("baseline", "baseline")):
        if (extras[name] is None) == (needed in read):
            raise UsageError(f"{needed_by(config, needed)} {'needs' if needed in read else 'takes no'} `{name}`")
    length, base = (None if x is None else numbers(x, name) for x, name in ((lengths, "lengths"), (baseline, "baseline")))
    try:
        names = [f"reward {k}" for k in range(values.shape[1])]
        inputs = row_inputs(values, names, config, length=length, baseline=base)
        return whitened_rows(row_advantages(inputs, group_index(pa.array(groups)), config)[0], inputs, config)
    except RowError as exc:
        raise InputError(f"reward {exc.row}: {exc.detail}") from None


def _is_tensor(values) -> bool:
    return type(values).__module__.split(".")[0] == "torch"


def _untensored(values):
    """A torch tensor (any dtype or device) as float64 numpy; anything else as it is."""
    return values.detach().cpu().double().numpy() if _is_tensor(values) else values


def _to_numpy(rewards) -> tuple[np.ndarray, Any]:
    """Rewards as float64 numpy, and a function giving results back in the caller's type:
    a tensor of the same dtype and device for a torch tensor, numpy otherwise."""
    if _is_tensor(rewards):
        import torch

        return _untensored(rewards), lambda a: torch.tensor(a, dtype=rewards.dtype, device=rewards.device)
    return numbers(rewards, "rewards"), lambda a: a


def numbers(values, name: str) -> np.ndarray:
    """``values`` (real numbers or booleans) as float64; strings, complex numbers and objects
    are refused, never coerced."""
    array = np.asarray(_untensored(values))
    if array.dtype.kind not in "biuf":
        raise UsageError(f"`{name}` holds real numbers (found {array.dtype}: {array.ravel()[:1].tolist()!r}...)")
    return array.astype(np.float64, copy=False)


class _GroupAdvantage:
    """Twinkle's interface: ``adv(rewards, num_generations=4, scale='group')``.

    Consecutive blocks of ``num_generations`` rewards form the groups. 2-d rewards are
    summed over the last axis first (one column per reward function), as in Twinkle.
    Keyword options ``std`` and ``eps`` apply where advantages are scaled; there they default
    to Twinkle's numerics, ``std='sample'``, ``eps=1e-8`` (computed in float64 here, not
    float32). Any other keyword is an error.

    Where this differs from Twinkle, on purpose:

    - ``num_generations=1``: every group has one row, so every advantage is 0 (Twinkle's
      GRPO returns the raw rewards for ``'group'`` and ``rewards - mean`` for ``'none'``;
      its RLOO raises).
    - An unknown ``scale`` or keyword raises, listing the valid names (Twinkle silently
      applies no scaling, and ignores unknown keywords).
    - A group whose rewards are all equal gets exactly 0.
    """

    estimator = "grpo"

    def __call__(self, rewards, num_generations: int = 1, scale: str = "group", **options: Any):
        check_keywords(options, ["num_generations", "scale", *TWINKLE_SCALED], f"{type(self).__name__}()")
        scaled = {} if scale == "none" else TWINKLE_SCALED
        config = AdvantageConfig(estimator=self.estimator, scale=scale, **{**scaled, **options})
        values, restore = _to_numpy(rewards)
        if values.ndim > 1:
            values = values.sum(axis=-1)
        if not isinstance(num_generations, int) or isinstance(num_generations, bool) or num_generations < 1:
            raise UsageError(f"`num_generations` must be an integer >= 1 (found {num_generations!r})")
        if values.shape[0] % num_generations:
            raise UsageError(f"{values.shape[0]} rewards do not split into groups of `num_generations` {num_generations!r}")
        groups = np.arange(values.shape[0]) // num_generations
        return restore(advantages(values, groups, config))


class GRPOAdvantage(_GroupAdvantage):
    """GRPO: ``A = (r - mean_g) / (std_g + eps)`` (``scale='group'``).

    >>> GRPOAdvantage()([0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0], num_generations=4, scale='none').tolist()
    [-0.5, 0.5, -0.5, 0.5, 0.75, -0.25, -0.25, -0.25]
    """

    estimator = "grpo"


class RLOOAdvantage(_GroupAdvantage):
    """RLOO: ``A = r - mean of the other rewards = G / (G - 1) * (r - mean_g)``, then scaled.

    >>> RLOOAdvantage()([0.0, 1.0, 0.0, 1.0], num_generations=4, scale='none').round(4).tolist()
    [-0.6667, 0.6667, -0.6667, 0.6667]
    """

    estimator = "rloo"


def normalize_group(rewards: Sequence[float], decimals: int = 4) -> list[float]:
    """Seed 000: z-scores of one group, ``(r - mean) / std`` with the population std,
    rounded to ``decimals``. A group of equal rewards gives zeros.

    >>> normalize_group([0.2, 0.5, 0.8, 0.3, 0.7])
    [-1.3156, 0.0, 1.3156, -0.8771, 0.8771]
    """
    adv = advantages(rewards, np.zeros(len(rewards), dtype=np.int64), AdvantageConfig(std="population"))
    return np.round(adv, decimals).tolist()


def _list_array(values) -> pa.Array:
    """Per-token values as an Arrow list array, one list per row, from: ragged Python lists,
    a list of numpy arrays, an Arrow list array, or a 2-D array or tensor (rows x padded
    width, as trainers hold them; pass ``mask`` to leave out the padding)."""
    values = _untensored(values)
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pa.concat_arrays(values.chunks) if isinstance(values, pa.ChunkedArray) else values
    if isinstance(values, np.ndarray) and values.ndim != 2:
        raise UsageError(f"per-token values take one list per row: a 2-D array (rows x width) or a list of lists (found a {values.ndim}-D array)")
    if isinstance(values, np.ndarray):
        rows, width = values.shape
        return pa.LargeListArray.from_arrays(np.arange(0, rows * width + 1, width, dtype=np.int64), pa.array(values.ravel()))
    return pa.array([np.asarray(v, dtype=np.float64) if not isinstance(v, list) else v for v in values])


def _per_token(values) -> bool:
    """Advantages given as one list per row (an Arrow list array, a 2-D array or tensor, or
    a sequence of sequences)."""
    values = _untensored(values)
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pa.types.is_list(values.type) or pa.types.is_large_list(values.type)
    if isinstance(values, np.ndarray):
        return values.ndim == 2
    return len(values) > 0 and isinstance(values[0], (list, tuple, np.ndarray))


def policy_objective(
    log_probs_new,
    log_probs_old,
    rewards=None,
    epsilon: float | None = None,
    *,
    advantage_values=None,
    groups: Sequence[Any] | None = None,
    advantage_config: AdvantageConfig | None = None,
    ref_log_probs=None,
    rollout_log_probs=None,
    mask=None,
    entropies=None,
    values=None,
    old_values=None,
    returns=None,
    details: bool = False,
    **options: Any,
) -> float | dict:
    """Seed 002's objective, and every option of `grpo objective` as a keyword
    (``epsilon_low``, ``dual_clip``, ``ratio_level``, ``agg``, ``empty_rows``, ``beta``, ``kl`` ...).
    A value loss (``loss="ppo_value"``) takes the critic's per-token ``values``, ``old_values``
    and ``returns`` in place of advantages.

    Per-token inputs (log-probs, ``ref_log_probs``, ``rollout_log_probs``, ``mask``, per-token advantages,
    ``entropies``, read by ``top_entropy_quantile`` < 1 alone) are
    ragged lists, Arrow list arrays, or 2-D arrays or tensors padded to one width with a
    ``mask`` (0/1 or bool; padding may hold anything). Advantages are ``advantage_values`` if given (one per row, or one list per row: one per
    token), else computed from ``rewards`` with ``advantage_config`` (default: the mean
    baseline), grouped by ``groups`` (default: all rows are one group, as in the seed).
    Returns the objective (to maximise), or with ``details=True`` the summary figures of
    `grpo objective` plus per-row ``rows``.

    >>> round(policy_objective([[-0.2, -0.3], [-0.1, -0.4]], [[-0.5, -0.6], [-0.4, -0.7]], [1.0, 0.0], 0.2), 7)
    -0.0749294
    """
    check_keywords(options, [f for f in ObjectiveConfig.__dataclass_fields__ if f != "epsilon"], "policy_objective()")
    config = ObjectiveConfig(**options) if epsilon is None else ObjectiveConfig(epsilon=epsilon, **options)
    arrays = {"new": _list_array(log_probs_new), "old": _list_array(log_probs_old)}
    if (entropies is None) != (config.top_entropy_quantile == 1):
        raise UsageError(
            "`top_entropy_quantile` < 1 needs `entropies`" if entropies is None else "`entropies` is read only by `top_entropy_quantile` < 1"
        )
    critic = {"values": values, "old_values": old_values, "returns": returns}
    for name, given in (("ref", ref_log_probs), ("mask", mask), ("rollout", rollout_log_probs), ("entropy", entropies), *critic.items()):
        if given is not None:
            arrays[name] = _list_array(given)
    if rewards is not None and advantage_values is not None:
        raise UsageError("pass either `rewards` (the advantages computed from them) or `advantage_values`, not both")
    value_loss = LOSSES[config.loss].critic
    for name, given in critic.items():
        if (given is None) == value_loss:
            raise UsageError(f"loss {config.loss!r} {'needs' if value_loss else 'takes no'} `{name}`")
    if value_loss and (rewards is not None or advantage_values is not None):
        raise UsageError(f"loss {config.loss!r} reads no advantages; drop `{'rewards' if rewards is not None else 'advantage_values'}`")
    per_token = advantage_values is not None and _per_token(advantage_values)
    if per_token:
        config.check_per_token_advantages()
        arrays["advantage"] = _list_array(advantage_values)
    batch = pa.RecordBatch.from_pydict(arrays)
    n_rows = batch.num_rows
    if value_loss:
        adv = np.zeros(n_rows)
    elif per_token:
        adv = None
    elif advantage_values is not None:
        adv = numbers(advantage_values, "advantage_values")
    elif rewards is not None:
        keys = groups if groups is not None else np.zeros(n_rows, dtype=np.int64)
        adv = advantages(rewards, keys, advantage_config or default_estimator(config.preset))
    else:
        raise UsageError("pass `rewards` or `advantage_values`")
    if adv is not None and adv.shape != (n_rows,):
        given = "`advantage_values`" if advantage_values is not None else "`rewards`"
        raise InputError(f"{adv.shape[0]} {given} for {n_rows} rows of `log_probs_new`")
    if ref_log_probs is None and (config.beta > 0 or "kl" in config.given):
        raise UsageError(f"{'`beta` > 0' if config.beta > 0 else '`kl`'} needs `ref_log_probs`")
    if rollout_log_probs is None and config.correcting:
        raise UsageError(f"`{config.correcting[0]}` needs `rollout_log_probs`")
    columns = TokenColumns("new", "old", **{name: name for name in ("ref", "mask", "advantage", "rollout", "entropy", *critic) if name in arrays})
    try:  # as the CLI: a null, NaN or infinite advantage, or a row whose sum is beyond float64, is refused naming its row
        if adv is not None:
            check_finite_scalars(adv, "advantage_values")
        tokens = read_tokens(batch, columns)
        if config.is_normalize:  # the mean weight over every row
            config = config.with_passed(is_mean=is_mean(is_mean_part(tokens, config), config.is_level))
        if entropies is not None:  # the entropy quantile over every row
            config = config.with_passed(entropy_threshold=entropy_threshold(scanned([counted_entropies(tokens)]), config.top_entropy_quantile))
        terms = row_terms(tokens, adv, config)
    except RowError as exc:
        raise InputError(f"log-probs: row {exc.row}: {exc.detail}") from None
    figures = ObjectiveSummary.of({**terms, "length": tokens.lengths}, 0, config.micro_batch_size).figures(config)
    if not details:
        return figures["objective"]
    return {**figures, "rows": terms if adv is None or value_loss else {"advantage": adv, **terms}}
