"""`gleambrctl ask`: retrieve, assemble a cited context, stream an LLM's answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from gbr.access.requests import MAX_BUDGET, MIN_BUDGET
from gbr.commands.common import err, errors, note_stale
from gbr.commands.options import (
    DbOption,
    DebugOption,
    HydeOption,
    JsonOption,
    LlmModelOption,
    MaxChunksOption,
    ModelDirOption,
    ProviderOption,
    RerankOption,
    TestsOption,
)

if TYPE_CHECKING:
    pass


def ask(
    question: Annotated[str, typer.Argument(help="A question about the indexed code.")],
    provider: ProviderOption = None,
    model: LlmModelOption = None,
    k: MaxChunksOption = 8,
    budget: Annotated[
        int,
        typer.Option(
            "--budget", min=MIN_BUDGET, max=MAX_BUDGET, help="Context budget in estimated tokens."
        ),
    ] = 3000,
    rerank: RerankOption = False,
    reranker: Annotated[
        str | None,
        typer.Option(
            "--reranker",
            help="llm, or cross-encoder:DIR [default: cross-encoder when GBR_RERANK_MODEL_DIR "
            "is set, else llm]",
        ),
    ] = None,
    hyde: HydeOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the exact prompt; call nothing.")
    ] = False,
    graph_context: Annotated[
        bool | None,
        typer.Option(
            "--graph-context/--no-graph-context",
            help="Add the signatures of what the chosen code calls or uses, in the budget "
            "it leaves [default: on]",
        ),
    ] = None,
    tests: TestsOption = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", min=1, help="Seconds per LLM request [default: 30, or config]."),
    ] = None,
    deadline: Annotated[
        float | None,
        typer.Option(
            "--deadline",
            min=1,
            help="Seconds for the whole answer; past it the answer stops (exit 4) "
            "[default: GBR_ASK_DEADLINE, else 4 x --timeout, else 120].",
        ),
    ] = None,
    max_answer: Annotated[
        str | None,
        typer.Option(
            "--max-answer",
            help="Largest answer, like 512k; past it the answer stops (exit 4) "
            "[default: GBR_ASK_MAX_ANSWER, else 256 KiB].",
        ),
    ] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
    model_dir: ModelDirOption = None,
    debug: DebugOption = False,
) -> None:
    """Answer a question from the code: retrieve, assemble a cited context, ask an LLM."""
    with errors(debug) as command:
        import os
        from dataclasses import replace

        from gbr.access import LlmChoice
        from gbr.access.opening import find_package
        from gbr.access.requests import AskRequest
        from gbr.core.answer.limits import answer_cap, answer_deadline
        from gbr.core.answer.oracle import AskOptions
        from gbr.core.rank.priors import parse_test_policy

        if tests is not None:
            parse_test_policy(tests)
        limits = answer_deadline(os.environ, deadline, timeout), answer_cap(os.environ, max_answer)
        package = find_package(db, os.environ, Path.cwd())
        command.db = package.db
        policy = parse_test_policy(tests or package.config.settings.tests or "demote")
        options = AskOptions(
            max_chunks=k, budget=budget, rerank=rerank, hyde=hyde, dry_run=dry_run, tests=policy
        )
        options = replace(options, deadline=limits[0], max_answer_bytes=limits[1])
        if graph_context is not None:
            options = replace(options, graph_context=graph_context)
        llm = LlmChoice(provider, model, timeout, reranker)
        with package.index(model_dir, on_stale=note_stale, queries_only=True) as (index, _):
            if index.via is not None and (reranker is not None or timeout is not None):
                err.print("[dim]note: --reranker and --timeout are the daemon's own settings[/dim]")
            on_token = None if json_out or dry_run else _print_token
            outcome = index.ask(AskRequest(question, options, llm), on_token=on_token)
            root = index.root
        if not json_out and outcome.answer["provider"] is not None:
            sys.stdout.write("\n")  # after the streamed answer
        _render_answer_data(outcome.answer, json_out, dry_run, root)
        raise typer.Exit(outcome.exit_code)


def _print_token(delta: str) -> None:
    from gbr.commands.output import shown

    sys.stdout.write(shown(delta))  # an answer may carry escape sequences; never run them
    sys.stdout.flush()


def _render_answer_data(
    data: dict[str, Any], json_out: bool, dry_run: bool, root: str | Path | None
) -> None:
    """Render the `ask --json` object, whether it was made here or by a daemon."""
    from gbr.commands.output import one_line, shown, stamped
    from gbr.core.answer.oracle import Answer
    from gbr.core.answer.prompt import render_context, sources_line

    if json_out:
        sys.stdout.write(json.dumps(stamped(data, root), indent=2) + "\n")
        return
    if dry_run:
        for message in data.get("prompt", []):
            sys.stdout.write(shown(f"----- {message['role']} -----\n{message['content']}\n"))
        return
    if data.get("error") is not None:
        err.print(f"[red]error:[/red] {escape(one_line(data['error']))}")
        err.print("[dim]the context that was retrieved:[/dim]")
        sys.stdout.write(shown(render_context(Answer.from_dict(data).chunks)))
        return
    sources = sources_line(Answer.from_dict(data).sources())
    err.print(f"[dim]sources: {escape(one_line(sources))}[/dim]")
    if data["unknown_citations"]:
        listed = one_line(", ".join(f"{c['path']}:{c['line']}" for c in data["unknown_citations"]))
        err.print(f"[yellow]not in the context sent:[/yellow] {escape(listed)}")
