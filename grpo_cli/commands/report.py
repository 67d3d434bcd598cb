"""One self-contained HTML page of a rollout file: the file, rewards, advantages, response lengths, train/inference mismatch, objective diagnostics.

Each section is shown where the input has what it needs, with its figure and the numbers behind it: those `grpo inspect`, `compare`, `mismatch` and `objective` compute on the same file (--summary-json gives every figure's numbers). It draws with matplotlib, grpo-cli's optional extra named report.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from .. import options as o
from .. import passes, schema
from ..config import AdvantageConfig
from ..engines import Engine
from ..errors import UsageError
from ..estimators import Batches
from ..files import with_plan, file_function
from ..io import Source, Staged
from ..mismatch import bucket
from ..objective import LOSSES
from ..objective.config import ObjectiveConfig
from ..objective.summary import ObjectiveSummary
from ..summaries import described, histogram
from .compare import OPTIONS as COMPARE_OPTIONS, ComparePlan, plan_compare
from .inspect import InspectPlan, inspect_batch, plan_inspect
from .mismatch import MismatchPlan, mismatch_batch, plan_mismatch
from .objective import ObjectivePlan, batch_terms, plan_objective

__all__ = ["EXAMPLES", "OPTIONS", "report_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

ESTIMATORS = "grpo,rloo"  # the advantages section's estimators unless --estimators says
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)  # of each batch's rewards (nearest rank, as `grpo inspect`'s lengths)

OPTIONS = (
    o.PRESET,
    *o.INPUTS,
    *o.GROUPING,
    o.REWARD_COL,
    o.MASK_COL,
    o.NEW_COL,
    o.OLD_COL,
    o.REF_COL,
    o.ROLLOUT_COL,
    o.column_option("advantage", "Advantage column (read as `grpo inspect` and `grpo objective` read it)."),
    replace(next(option for option in COMPARE_OPTIONS if option.name == "estimators"), default=None).told(
        f"The advantages section's estimators, as `grpo compare --estimators` takes them (default {ESTIMATORS})."
    ),
    *o.REWARD_OPTIONS,
    o.OUTPUT_OPTION.told("Write the page here: one HTML file, figures embedded (- for stdout)."),
    *o.RUN_AND_JSON,
)
EXAMPLES = """\
Examples:

  grpo report sample_data/rollouts_vllm.parquet -o report.html

  grpo report sample_data/rollouts.parquet --estimators grpo,rloo,mean -o report.html --summary-json report.json -q
"""

keywords = o.into(config=AdvantageConfig)


def render(figures: dict, console) -> None:
    """Where the page went, and its sections."""
    console.print(f"grpo report: {figures['page']} ({', '.join(figures['sections'])})", markup=False, highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class ReportPlan:
    """`grpo report`: the plans of the commands whose figures it shows (``None``: the input
    lacks what that section needs), run with one streaming pass over the token columns
    (:func:`report_batch`); the batches (`by`) are those of `grpo inspect`'s grouping."""

    page: str
    inspect: InspectPlan
    compare: ComparePlan | None
    mismatch: MismatchPlan | None
    objective: ObjectivePlan | None

    def run(self, engine: Engine, source: Source) -> dict:
        """Every section's figures on ``engine``, the page written with the other outputs."""
        from ..html_report import Drawing, page, sections

        drawing = Drawing(engine.workers if engine.fork_safe else 1)  # matplotlib loads while the passes read
        o_plan, computed, context = None, None, None
        if self.objective is not None:
            o_plan, computed, context, _ = self.objective.prepared(engine, source)
        columns = list(dict.fromkeys([*self.inspect.columns, *(self.mismatch.columns if self.mismatch else []), *(o_plan.columns if o_plan else [])]))
        parts = passes.results(engine, source, report_batch, self, o_plan, computed, context, columns=columns, prompt=self.inspect.grouping.prompt)
        figures: dict = {"inspect": with_plan(self.inspect.described(engine, source, [p["inspect"] for p in parts]), self.inspect)}
        lengths = np.concatenate([p["inspect"]["length"] for p in parts]) if self.inspect.steps else None
        rewards, points, batches = self._rewards(engine, source, lengths)
        figures.update(rewards)
        if self.mismatch is not None:
            figures["mismatch"] = with_plan(self.mismatch.summarized(source, [p["mismatch"] for p in parts]), self.mismatch)
        if o_plan is not None:
            figures["objective"] = with_plan(o_plan.summarized([p["objective"] for p in parts]), o_plan)
            figures.update(self._ratios(o_plan, parts, batches))
        shown = sections(figures)
        Staged(self.page, engine.outputs).write_text(page(figures, source.name, points, drawing))
        return {"page": self.page, "sections": shown, **figures}

    def _rewards(self, engine: Engine, source: Source, lengths: np.ndarray | None) -> tuple[dict, tuple | None, Batches | None]:
        """`grpo compare`'s figures and each estimator's histogram; each batch's rewards
        (`grpo advantages`'s figures of a batch, and quantiles) and the rewards against the
        response length; the scored rows' lengths and rewards (the points drawn: rows, not
        figures); the batches."""
        if self.compare is None:
            return {}, None, None
        index, _, columns = self.compare.advantages(engine, source)
        figures: dict = {
            "compare": with_plan(self.compare.summarized(source, index, columns), self.compare),
            "advantage_histograms": {
                label: histogram(*described(a, histogram=True)) for (label, _, _), a in zip(self.compare.estimators, columns.values())
            },
        }
        inputs = self.inspect.inputs
        if not self.inspect.grouping.batched and lengths is None or inputs is None:
            return figures, None, None
        index, rows, _, _ = passes.first_pass(engine, source, self.inspect.grouping, inputs, self.inspect.estimator)
        points = None
        if lengths is not None:
            points = (lengths[rows.scored], rows.r[rows.scored])
            figures["reward_by_length"] = reward_by_length(points[1], points[0])
        figures |= passes.batch_figures(engine, index, rows, lambda _, batch: reward_quantiles(passes.scored(rows.rows(batch))))
        return figures, points, rows.batches

    def _ratios(self, o_plan: ObjectivePlan, parts: list[dict], batches: Batches | None) -> dict:
        """The distribution of each row's mean ratio, and each batch's clip fraction."""
        n = np.concatenate([p["n_tokens"] for p in parts])
        ratio = np.concatenate([p["ratio_sum"] for p in parts])[n > 0] / n[n > 0]
        figures: dict = {"ratio_histogram": histogram(*described(ratio, histogram=True)) if len(ratio) else None}
        if batches is not None:
            values, codes = batches.values, batches.index.codes
            tokens = np.bincount(codes, weights=n, minlength=len(values))
            flags = {
                name: np.bincount(codes, weights=np.concatenate([p["flags"][name] for p in parts]), minlength=len(values))
                for name in (flag.name for flag in LOSSES[o_plan.config.loss].flags)
            }
            clip = {name: np.divide(f, tokens, out=np.zeros_like(f), where=tokens > 0).tolist() for name, f in flags.items()}
            figures["clip_frac_by"] = {"column": batches.column, "batches": values, "tokens": tokens.astype(np.int64).tolist(), "clip_frac": clip}
        return figures

    @property
    def figures(self) -> dict:
        return {}


def reward_quantiles(r: np.ndarray) -> dict:
    """:data:`QUANTILES` of rewards ``r`` (nearest rank; null without any).

    >>> reward_quantiles(np.array([0.0, 1.0, 1.0, 0.5]))
    {'reward_quantiles': {'q10': 0.0, 'q25': 0.0, 'q50': 0.5, 'q75': 1.0, 'q90': 1.0}}
    """
    found = np.quantile(r, QUANTILES, method="inverted_cdf").tolist() if len(r) else [None] * len(QUANTILES)
    return {"reward_quantiles": {f"q{round(q * 100)}": x for q, x in zip(QUANTILES, found)}}


def reward_by_length(r: np.ndarray, lengths: np.ndarray) -> list[dict]:
    """The scored rows' rewards against their valid tokens: per power-of-two bucket of length
    (1, 2-3, 4-7, ..., as `grpo mismatch`'s; a row without tokens in the first), its rows
    and mean reward.

    >>> reward_by_length(np.array([1.0, 0.0, 1.0]), np.array([1, 2, 3]))
    [{'first': 1, 'last': 1, 'rows': 1, 'reward_mean': 1.0}, {'first': 2, 'last': 3, 'rows': 2, 'reward_mean': 0.5}]
    """
    b = bucket(np.maximum(lengths, 1))
    rows = np.bincount(b)
    sums = np.bincount(b, weights=r)
    return [
        {"first": 1 << int(k), "last": (2 << int(k)) - 1, "rows": int(rows[k]), "reward_mean": float(sums[k] / rows[k])} for k in np.flatnonzero(rows)
    ]


def plan_report(
    source: Source,
    *,
    config: AdvantageConfig | None = None,
    estimators: str | None = None,
    prompt_col: str | list[str] | None = None,
    reward_col: str | list[str] | None = None,
    num_generations: int | None = None,
    by: str | None = None,
    by_file: bool = False,
    mask_col: str | None = None,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    rollout_logprobs_col: str | None = None,
    advantage_col: str | None = None,
    output: str | None = None,
) -> ReportPlan:
    """The plan of `grpo report` on ``source`` (see :func:`grpo_cli.report_file`): the plans of
    `grpo inspect`, and of `compare` (with rewards), `mismatch` (with old and rollout
    log-probs) and `objective` (with new and old log-probs), made with the same options.
    The batches (``by``, ``by_file``) are those of the commands that compute advantages."""
    from ..html_report import check_plotting

    check_plotting()
    if output is None:
        raise UsageError("`grpo report` writes one HTML page; pass `output` (-o report.html)")
    config = config or AdvantageConfig()
    columns: dict[str, Any] = dict(prompt_col=prompt_col, num_generations=num_generations)
    tokens: dict[str, Any] = dict(
        mask_col=mask_col, logprobs_col=logprobs_col, old_logprobs_col=old_logprobs_col, rollout_logprobs_col=rollout_logprobs_col
    )
    batches: dict[str, Any] = dict(by=by, by_file=by_file)
    looked = plan_inspect(
        source, config=config, reward_col=reward_col, ref_logprobs_col=ref_logprobs_col, advantage_col=advantage_col, **columns, **batches, **tokens
    )
    roles = {role: r["column"] for role, r in looked.roles.items()}
    if looked.inputs is None:
        for option, value in (("estimators", estimators), ("by", by not in (None, schema.NO_COLUMN) or None), ("by_file", by_file or None)):
            if value is not None:
                raise UsageError(f"`{option}` applies to the rewards, and the input has no reward column; pass `reward_col`, or drop `{option}`")
    compared = None
    if looked.inputs is not None:
        compared = plan_compare(source, estimators=estimators or ESTIMATORS, config=config, reward_col=reward_col, **columns, **batches)
    mismatched = None
    if roles["old"] is not None and roles["rollout"] is not None and roles["old"] != roles["rollout"]:
        mismatched = plan_mismatch(source, old_logprobs_col=roles["old"], rollout_logprobs_col=roles["rollout"], mask_col=mask_col, **columns)
    objectived = None
    if roles["new"] is not None and roles["old"] is not None and (roles["advantage"] is not None or looked.inputs is not None):
        rewards: dict[str, Any] = {} if roles["advantage"] is not None else {"reward_col": reward_col, **batches}
        objective = ObjectiveConfig(preset=config.preset)
        if mismatched is not None and not objective.correcting:  # the mismatch section has the sampler's figures: computed once
            tokens["rollout_logprobs_col"] = schema.NO_COLUMN
        objectived = plan_objective(
            source, config=objective, advantage_col=advantage_col, ref_logprobs_col=ref_logprobs_col, **rewards, **columns, **tokens
        )
    return ReportPlan(output, looked, compared, mismatched, objectived)


def report_batch(
    batch: pa.RecordBatch, first_row: int, plan: ReportPlan, o_plan: ObjectivePlan | None, computed: np.ndarray | None, context: object
) -> dict:
    """One batch of the one pass over the token columns: what `grpo inspect`'s, `grpo
    mismatch`'s and `grpo objective`'s kernels find in it, and each row's ratio sum and
    clipped tokens (the objective's terms)."""
    out: dict = {"inspect": inspect_batch(batch, first_row, plan.inspect)}
    if plan.mismatch is not None:
        out["mismatch"] = mismatch_batch(batch, first_row, plan.mismatch).partial
    if o_plan is not None:
        terms, _ = batch_terms(batch, first_row, o_plan, computed, context)
        out.update(
            objective=ObjectiveSummary.of(terms, first_row, o_plan.config.micro_batch_size),
            n_tokens=terms["n_tokens"],
            ratio_sum=terms["ratio_sum"],
            flags={flag.name: terms[f"flag_{flag.name}"] for flag in LOSSES[o_plan.config.loss].flags},
        )
    return out


plan = plan_report

report_file = file_function(sys.modules[__name__])
