"""The file API, what the commands call: open the input, make the plan, run an engine.

Each command's file function (``advantages_file``, ...) is made by :func:`file_function` from
its module (:mod:`grpo_cli.commands`): its options are the keywords of the command's
``plan``, declared there once, plus how to read the input and how to run: ``input_format``,
``hive``, ``threads``, ``batch_rows``, ``progress``, and ``engine`` (``local``, or ``ray``
with ``ray_address``); and ``summary_json``, a path (``-``: stdout) for the returned figures
as JSON, written with the other outputs (see :func:`run`).
"""

from __future__ import annotations

import os
import inspect
import json
import typing
from dataclasses import fields
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, ContextManager

from .config import Options
from .engines import Engine, Progress, make_engine
from .errors import check_keywords
from .io import Source, Staged, Writes, open_source

if TYPE_CHECKING:
    from .commands.base import Command


def json_text(figures: dict) -> str:
    """The figures as indented JSON, ending in a newline (``summary_json``, and ``--json``)."""
    return json.dumps(figures, indent=2) + "\n"


def _options(plan: Callable) -> list[inspect.Parameter]:
    """The options of ``plan``: its keywords but the source and the output."""
    return [p for name, p in inspect.signature(plan).parameters.items() if name not in ("source", "output")]


def _config_fields(plan: Callable) -> dict[str, str]:
    """Each option of the config objects ``plan`` takes, and how to pass it."""
    out: dict[str, str] = {}
    for keyword, hint in typing.get_type_hints(plan).items():
        for cls in typing.get_args(hint) or (hint,):
            if isinstance(cls, type) and issubclass(cls, Options):
                out.update({f.name: f"{keyword}={cls.__name__}({f.name}=...)" for f in fields(cls) if f.name not in out})
    return out


def check_options(options: dict[str, Any], valid: list[str], where: str, plan: Callable) -> None:
    """Refuse an option that is none of ``valid``, saying which is meant, or in which config object of ``plan`` it goes."""
    if not set(options) <= set(valid):
        check_keywords(options, valid, where, _config_fields(plan))


def with_plan(figures: dict, plan: Any) -> dict:
    """The engine's figures and the plan's (which column plays which role...); ``config`` merged."""
    extra = plan.figures
    if not extra:
        return figures
    return {**figures, **extra, "config": {**figures.get("config", {}), **extra.get("config", {})}}


def run(
    command: str,
    make_plan: Callable,
    open_input: Callable[..., ContextManager[Source]],
    output: str | None,
    engine: Engine,
    options: dict[str, Any],
    summary_json: str | None = None,
) -> dict:
    """Open the input with ``open_input`` (given the paths the run writes), make the plan of
    ``command`` with ``make_plan``, run it on ``engine`` (the plan says how), and write the
    figures as JSON to ``summary_json`` (``-``: stdout) if given.

    Every path written is checked as soon as the input files are listed, before any of them is
    read (none is an input or another output; see :meth:`~grpo_cli.io.Writes.check`). Every
    output, the summary JSON included, is staged as a temporary file and all are committed
    together once the run has succeeded (see :class:`~grpo_cli.io.Outputs`): a failure or an
    interrupt leaves every target as it was.
    """
    check_options(options, [p.name for p in _options(make_plan)], f"{command}_file()", make_plan)
    writes = Writes(output, options.get("output_dir"), options.get("output_format"), summary_json)
    with engine.outputs as outputs, engine, open_input(writes=writes) as source:
        plan = make_plan(source, output=output, **options)
        summary = Staged(summary_json, outputs) if summary_json is not None else None
        figures = with_plan(plan.run(engine, source), plan)
        if summary is not None:
            summary.write_text(json_text(figures))
        outputs.commit()
        return figures


def file_function(command: Command) -> Callable[..., dict]:
    """The file API of ``command`` (a module of :mod:`grpo_cli.commands`): ``input`` (files,
    folders or globs read as one dataset; with ``hive``, ``key=value`` folders are columns
    too), ``output`` if the command writes (rows, or ``output_dir``: one file per input; a page),
    then keyword-only: the options of its plan and how to run (see this module's docstring).
    It returns the summary figures."""
    name = command.__name__.rsplit(".", 1)[-1]
    planned = inspect.signature(command.plan).parameters
    writes = "output_dir" in planned or "output" in planned and planned["output"].annotation != "None"  # rows, or a page (report)

    def run_command(
        input: str | list[str],
        output: str | None = None,
        *,
        input_format: str | None = None,
        hive: bool = False,
        batch_rows: int | None = None,
        threads: int | None = None,
        progress: Progress | None = None,
        engine: str = "local",
        ray_address: str | None = None,
        summary_json: str | None = None,
        **options: Any,
    ) -> dict:
        path = lambda p: p if p is None else os.fspath(p)  # noqa: E731  (a pathlib.Path names a file as a str does)
        if "output_dir" in options:
            options["output_dir"] = path(options["output_dir"])
        return run(
            name,
            command.plan,
            partial(open_source, input, input_format, hive=hive),
            path(output),
            make_engine(engine, ray_address, threads=threads, batch_rows=batch_rows, progress=progress),
            options,
            path(summary_json),
        )

    own = inspect.signature(run_command).parameters  # the plan's options join how to run, in place of ``options``
    positional = [own["input"], own["output"]] if writes else [own["input"]]
    how = [p for p in own.values() if p.kind is p.KEYWORD_ONLY]
    signature = inspect.Signature([*positional, *_options(command.plan), *how], return_annotation="dict")
    run_command.__signature__ = signature  # type: ignore[attr-defined]
    run_command.__name__ = run_command.__qualname__ = f"{name}_file"
    run_command.__module__ = command.__name__
    run_command.__doc__ = f"{inspect.getdoc(command)}\n\nThe options: see :func:`{command.plan.__module__}.{command.plan.__name__}`."
    return run_command
