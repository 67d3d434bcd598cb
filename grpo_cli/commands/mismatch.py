"""How far the rollout sampler's log-probs are from the trainer's old ones (train/inference mismatch).

|old - rollout|, KL(rollout || old) as k1 and k3, perplexities, chi-square and effective sample size of the weights pi_old / pi_rollout, the share a cap or mask would touch, by token position and response length, and the worst rows (named by their prompt id; with --num-generations, every group's size is checked). -o writes the per-row figures.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import reduce

import pyarrow as pa

from .. import options as o
from .. import passes, schema
from ..engines import Engine
from ..engines.base import row_names
from ..engines.kernels import Written
from ..engines.token_kernels import MISMATCH_COLUMNS, mismatch_columns
from ..errors import UsageError
from ..files import file_function
from ..io import Source
from ..mismatch import MismatchConfig, MismatchSummary, batch_terms
from ..plan import Grouping, Output, resolve_grouping, resolve_output
from ..schema import arrow_array
from ..token_columns import TokenColumns, read_tokens

__all__ = ["EXAMPLES", "OPTIONS", "mismatch_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

OPTIONS = (
    *o.INPUTS,
    *o.GROUPING,
    o.OLD_COL,
    o.ROLLOUT_COL,
    o.MASK_COL,
    *o.config_options(MismatchConfig).values(),
    *o.WRITES,
    *o.RUN_AND_JSON,
)
EXAMPLES = """\
Examples:

  grpo mismatch sample_data/rollouts_vllm.parquet

  grpo mismatch sample_data/rollouts_vllm.parquet --is-cap 3 --is-mask 0.5,2 --json > mismatch.json

  grpo mismatch sample_data/rollouts_vllm.parquet -o mismatch_rows.parquet -q
"""
keywords = o.into(config=MismatchConfig)


def _share(count: int, share: float) -> str:
    return f"{count} ({share:.4%})"


def render(figures: dict, console) -> None:
    """The `grpo mismatch` report: a table, the breakdowns, two histograms and the worst rows."""
    from rich.table import Table

    from ..report import fmt, lines, render_histogram, roles, table

    f = figures
    t = table("grpo mismatch")
    t.add_row("rows, tokens", f"{f['rows']}, {f['tokens']}")
    if f["tokens"]:
        t.add_row("|old - rollout|", f"mean {fmt(f['abs_diff_mean'])}  max {fmt(f['abs_diff_max'])}")
        t.add_row("KL(rollout || old)", f"k1 {fmt(f['kl_k1'])}  k3 {fmt(f['kl_k3'])}")
        t.add_row(
            "perplexity", lines(f"{k} {fmt(f[key])}" for k, key in (("train", "train_ppl"), ("rollout", "rollout_ppl"), ("ratio", "ppl_ratio")))
        )
        t.add_row("chi-square", f"token {fmt(f['chi2_token'])}  sequence {fmt(f['chi2_seq'])}")
        t.add_row(
            "ESS (share)",
            lines(f"{k} {fmt(f[key]['count'])} ({fmt(f[key]['share'])})" for k, key in (("token", "ess_token"), ("sequence", "ess_seq"))),
        )
        for name, label in (("cap", "cap {value:g} touches"), ("mask", "mask {value} touches")):
            if f[name] is not None:
                m = f[name]
                t.add_row(
                    label.format(value=m["value"]),
                    lines(
                        [
                            f"tokens {_share(m['tokens'], m['token_share'])}",
                            f"rows {_share(m['rows'], m['row_share'])}",
                            f"sequence weights {_share(m['sequence_rows'], m['sequence_row_share'])}",
                        ]
                    ),
                )
    t.add_row("columns", roles(f["columns"]))
    console.print(t)
    for key, title in (("by_position", "by token position"), ("by_length", "by response length (tokens)")):
        if f[key]:
            b = Table(title=title, title_justify="left")
            for column in ("from", "to", "rows", "tokens", "|old - rollout|", "k1", "k3"):
                b.add_column(column, justify="right")
            for e in f[key]:
                b.add_row(
                    str(e["first"]),
                    "-" if e["last"] is None else str(e["last"]),
                    str(e["rows"]),
                    str(e["tokens"]),
                    f"{e['abs_diff_mean']:.4g}",
                    f"{e['kl_k1']:.4g}",
                    f"{e['kl_k3']:.4g}",
                )
            console.print(b)
    for key, title in (
        ("abs_diff_histogram", "|old - rollout| per token"),
        ("log_weight_histogram", "sequence log-weight sum(old - rollout) per row"),
    ):
        console.print(title)
        console.print(render_histogram(f[key]), markup=False, highlight=False)
    if f["worst_rows"]:
        w = Table(title="worst rows (mean k3)", title_justify="left")
        for column in ("row", "tokens", "k3", "|old - rollout|", "log-weight"):
            w.add_column(column, justify="left" if column == "row" else "right")
        for e in f["worst_rows"]:
            w.add_row(e["row"], str(e["tokens"]), f"{e['kl_k3']:.4g}", f"{e['abs_diff_mean']:.4g}", f"{e['log_weight']:.4g}")
        console.print(w)


@dataclass(frozen=True)
class MismatchPlan:
    """`grpo mismatch`: the old and rollout log-prob columns (``tokens.new`` is the old
    column: no new policy is read), the mask, and the groups (their prompt id column names
    rows; with ``num_generations``, every group's size is checked)."""

    config: MismatchConfig
    tokens: TokenColumns
    grouping: Grouping
    output: Output

    @property
    def prompt(self) -> str | None:
        return self.grouping.prompt

    @property
    def roles(self) -> dict[str, str | list[str] | None]:
        t = self.tokens
        return {"prompt": self.grouping.shown, "old_logprobs": t.old, "rollout_logprobs": t.rollout, "mask": t.mask}

    def run(self, engine: Engine, source: Source) -> dict:
        """Report the mismatch on ``engine`` and write the per-row figures; the figures of
        :meth:`grpo_cli.mismatch.MismatchSummary.figures`, the worst rows named."""
        if self.grouping.num_generations is not None:
            passes.first_pass(engine, source, self.grouping, None, None)  # every group has num_generations rows
        partials = passes.partials(engine, source, self.output, mismatch_fields(), mismatch_batch, self, columns=self.columns, prompt=self.prompt)
        return self.summarized(source, partials)

    def summarized(self, source: Source, partials: list[MismatchSummary]) -> dict:
        """The figures of every batch's partial summary (``partials``, in row order), the worst rows named."""
        summary = reduce(lambda done, partial: done.merge(partial, self.config.worst), partials, MismatchSummary())
        figures = summary.figures(self.config)
        named = row_names(source, self.prompt, [entry["row"] for entry in figures["worst_rows"]])
        figures["worst_rows"] = [{**entry, "row": name} for entry, name in zip(figures["worst_rows"], named)]
        return figures

    @property
    def figures(self) -> dict:
        return {"columns": self.roles}

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(self.tokens.names))


def plan_mismatch(
    source: Source,
    *,
    config: MismatchConfig | None = None,
    prompt_col: str | list[str] | None = None,
    num_generations: int | None = None,
    by: str | None = None,
    by_file: bool = False,
    old_logprobs_col: str | None = None,
    rollout_logprobs_col: str | None = None,
    mask_col: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> MismatchPlan:
    """The plan of `grpo mismatch` on ``source`` (see :func:`grpo_cli.mismatch_file`)."""
    s, name = source.schema, source.name
    given = schema.given_columns({"old": old_logprobs_col, "rollout": rollout_logprobs_col, "mask": mask_col})
    old = schema.resolve_column(s, "old", old_logprobs_col, source=name, given=given)
    rollout = schema.resolve_column(s, "rollout", rollout_logprobs_col, source=name, given=given)
    if old == rollout:
        raise UsageError(f"`old_logprobs_col` and `rollout_logprobs_col` are both {old!r}: a column does not differ from itself; pass two columns")
    mask = schema.resolve_column(s, "mask", mask_col, required=False, source=name, given=given)
    tokens = TokenColumns(new=old, old=old, mask=mask, rollout=rollout)
    grouping = resolve_grouping(source, prompt_col, num_generations, required=False, by=by, by_file=by_file)
    return MismatchPlan(config or MismatchConfig(), tokens, grouping, resolve_output(source, output, output_dir, output_format, compression))


def mismatch_fields() -> list[pa.Field]:
    """The per-row columns `grpo mismatch` writes, in order."""
    return [pa.field("n_tokens", pa.int64()), *(pa.field(name, pa.float64()) for name in MISMATCH_COLUMNS)]


def mismatch_batch(batch: pa.RecordBatch, first_row: int, plan: MismatchPlan) -> Written:
    """The per-row mismatch columns (when the plan writes rows) and the partial report of one batch."""
    terms = batch_terms(read_tokens(batch, plan.tokens), plan.config)
    summary = MismatchSummary.of(terms, first_row, plan.config.worst)
    columns = {"n_tokens": arrow_array(terms["mismatch_tokens"]), **mismatch_columns(terms)} if plan.output.targets else {}
    return Written(columns, partial=summary)


plan = plan_mismatch

mismatch_file = file_function(sys.modules[__name__])
