"""Engines run a plan over its input; the math lives in :mod:`.kernels`.

An engine decides where batches are read, computed and written: :class:`LocalEngine`
streams record batches in this process on a few threads. Another engine (e.g. one on a
cluster) implements the same two methods with the same kernels and partial summaries, so its
numbers are the local engine's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Callable

from ..errors import UsageError
from ..io import Outputs, Source

if TYPE_CHECKING:
    from ..plan import AdvantagesPlan
    from ..plan.compare import ComparePlan
    from ..plan.filter import FilterPlan
    from ..plan.inspect import InspectPlan
    from ..plan.mismatch import MismatchPlan
    from ..plan.objective import ObjectivePlan

Progress = Callable[[int, int, str], None]


class Engine(ABC):
    """Runs the plans of the commands over a :class:`~grpo_cli.io.Source`.

    ``progress(rows done, rows in all, pieces)`` is called as batches finish; ``pieces`` says
    how many stored pieces are done, e.g. ``row groups 3/12``. Written outputs are staged in
    ``outputs`` (temporary files), for the caller to commit with its own (the summary JSON)
    or to leave, which removes them.
    """

    def __init__(self, *, threads: int | None = None, batch_rows: int | None = None, progress: Progress | None = None):
        self.threads = threads
        self.batch_rows = batch_rows
        self.progress = progress
        self.outputs = Outputs()

    @abstractmethod
    def advantages(self, source: Source, plan: AdvantagesPlan) -> dict:
        """Compute and write the advantages; return the figures of :func:`grpo_cli.summaries.advantage_figures`."""

    @abstractmethod
    def objective(self, source: Source, plan: ObjectivePlan) -> dict:
        """Compute the objective and write the per-row columns; return the figures of
        :meth:`grpo_cli.objective.summary.ObjectiveSummary.figures`."""

    @abstractmethod
    def inspect(self, source: Source, plan: InspectPlan) -> dict:
        """Describe the input; return the figures of :func:`grpo_cli.inspection.inspect_figures`."""

    @abstractmethod
    def compare(self, source: Source, plan: ComparePlan) -> dict:
        """Compute several estimators side by side and write one column each; return the
        figures of :func:`grpo_cli.compare.compare_figures`."""

    @abstractmethod
    def filter(self, source: Source, plan: FilterPlan) -> dict:
        """Write the rows the plan keeps; return the figures of :func:`grpo_cli.filters.filter_figures`."""

    @abstractmethod
    def mismatch(self, source: Source, plan: MismatchPlan) -> dict:
        """Report the train/rollout mismatch and write the per-row figures; return the figures
        of :meth:`grpo_cli.mismatch.MismatchSummary.figures`."""


from .local import LocalEngine  # noqa: E402  (it subclasses Engine)

ENGINES = ("local", "ray")


def make_engine(engine: str = "local", ray_address: str | None = None, **options) -> Engine:
    """The engine named ``engine`` with ``options`` (``threads``, ``batch_rows``, ``progress``);
    ``ray`` connects to ``ray_address`` (default: ``RAY_ADDRESS`` if set, else a local Ray)."""
    if engine == "local":
        if ray_address is not None:
            raise UsageError("`ray_address` applies to `engine` 'ray'; pass `engine` 'ray', or drop it")
        return LocalEngine(**options)
    if engine == "ray":
        from .ray import RayEngine  # imports Ray, an optional extra

        return RayEngine(address=ray_address, **options)
    raise UsageError(f"unknown `engine` {engine!r} (valid: {', '.join(ENGINES)})")


__all__ = ["ENGINES", "Engine", "LocalEngine", "Progress", "make_engine"]
