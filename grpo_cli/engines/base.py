"""The engine interface: what every engine (:mod:`.local`, :mod:`.ray`) offers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Callable

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
