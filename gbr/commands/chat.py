"""`gleambrctl chat`: a conversation about the code, interactive or piped."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gbr.access.requests import MAX_BUDGET, MIN_BUDGET
from gbr.commands.common import (
    configure,
    err,
    errors,
    local_index,
    note_stale,
    out,
    package_root,
    print_hits,
    print_summary,
    progress_bar,
    start_telemetry,
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

if TYPE_CHECKING:
    pass


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
        from gbr.access import choose
        from gbr.chat import ChatSession, ChatSettings, Views, run_interactive, run_piped
        from gbr.core.paths import default_db

        root = package_root(path).resolve()
        config = configure(root, db or default_db(root))
        local_settings = config.local_settings(keep_open=True, cancel_on_ctrl_c=True, serving=True)
        # A daemon serving the index owns it (DuckDB lets no one else in): go through it.
        backend = choose(local_index(local_settings, model_dir, config.device), note_stale)
        if backend.via is not None:
            if timeout is not None:
                err.print("[dim]note: --timeout is the daemon's own setting[/dim]")
        else:
            start_telemetry(backend.db)
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
                code = run_interactive(session, root / ".gbr" / "chat_history")
            else:
                code = run_piped(session, sys.stdin)
        finally:
            backend.close()
        raise typer.Exit(code)
