"""`gleambrctl chat`: a conversation about the code, interactive or piped."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gbr.access.requests import MAX_BUDGET, MIN_BUDGET
from gbr.commands.common import (
    err,
    errors,
    note_stale,
    out,
    print_hits,
    print_summary,
    progress_bar,
    warn,
)
from gbr.commands.options import (
    DbOption,
    DebugOption,
    HydeOption,
    LlmModelOption,
    MaxChunksOption,
    ModelDirOption,
    ProviderOption,
    RerankOption,
)


def chat(
    path: Annotated[Path, typer.Argument(help="The Gleam package to talk about.")] = Path("."),
    provider: ProviderOption = None,
    model: LlmModelOption = None,
    k: MaxChunksOption = 8,
    budget: Annotated[
        int,
        typer.Option(
            "--budget",
            min=MIN_BUDGET,
            max=MAX_BUDGET,
            help="Estimated tokens for context and history.",
        ),
    ] = 3000,
    rerank: RerankOption = False,
    hyde: HydeOption = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", min=1, help="Seconds per LLM request [default: 30, or config]."),
    ] = None,
    db: DbOption = None,
    model_dir: ModelDirOption = None,
    debug: DebugOption = False,
) -> None:
    """Talk to the code: questions get streamed, cited answers; /help lists the slash commands.

    When `gleambrctl serve` runs for the package, the chat goes through that daemon.
    """
    with errors(debug):
        import os

        from gbr.access import choose
        from gbr.access.opening import open_package, start_events
        from gbr.chat import ChatSession, ChatSettings, Views, run_interactive, run_piped

        package = open_package(path, db, os.environ)
        local = package.local(model_dir, keep_open=True, cancel_on_ctrl_c=True, serving=True)
        # A daemon serving the index owns it (DuckDB lets no one else in): go through it;
        # the chat asks again for each turn (gbr.chat.session), so this is its first backend.
        backend = choose(local, note_stale)
        if backend.via is not None:
            if timeout is not None:
                err.print("[dim]note: --timeout is the daemon's own setting[/dim]")
        else:
            start_events(backend.db, warn)
        views = Views(print_hits, print_summary, lambda: progress_bar(err.is_terminal))
        settings = ChatSettings(
            provider=provider,
            model=model,
            timeout=timeout,
            max_chunks=k,
            budget=budget,
            rerank=rerank,
            hyde=hyde,
        )
        session = ChatSession(backend, out, views, settings, debug=debug)
        try:
            if sys.stdin.isatty() and sys.stdout.isatty():
                code = run_interactive(session, package.root / ".gbr" / "chat_history")
            else:
                code = run_piped(session, sys.stdin)
        finally:
            backend.close()
        raise typer.Exit(code)
