"""`gleambrctl`: parse options, call the pipeline or the searcher, render the result.

Heavy imports (onnxruntime, duckdb, pykka) happen inside the commands, so `--help` is instant
and a cold `search` pays only for what it uses.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from gbr.access import LocalIndex, LocalSettings
    from gbr.access.discovery import DaemonInfo
    from gbr.core.embed_cache import CacheConfig
    from gbr.core.embedder import OnnxEmbedder
    from gbr.core.errors import GbrError
    from gbr.core.records import Hit, IndexSummary, Progress
    from gbr.core.settings import Settings

app = typer.Typer(
    name="gleambrctl",
    help="Index a Gleam package locally and search it by meaning and by name.",
    no_args_is_help=True,
    # --install-completion / --show-completion: typer writes the script itself, no network.
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    # Plain help, as git or ripgrep print it: flags without a `<bool>` type (typer's rich
    # panels show one), no boxes to break when piped, and `[default: ...]` read literally.
    rich_markup_mode=None,
)
# soft_wrap: piped output keeps long lines whole instead of breaking them at 80 columns (an
# error is one line). emoji off: file names and reasons are the user's text, and `:x:` in
# one must print as written; markup in them is escaped where they are printed.
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
T = TypeVar("T")
INTERRUPTED = "interrupted; finished files are kept in the index"

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB index file [default: PATH/.gbr/index.duckdb]"),
]
JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print JSON (with schema_version and the package name)."),
]
MODE_HELP = (
    "hybrid, dense or bm25. The score orders hits within one query; its scale depends on "
    "the mode: dense is the cosine similarity (-1 to 1); bm25 is the BM25 score (0 and up, "
    "unbounded); hybrid mixes the two lists' scores, each scaled to 0-1 (so 0 to 1)."
)
ModelDirOption = Annotated[
    Path | None,
    typer.Option(
        "--model-dir",
        help="Folder with model.onnx and tokenizer.json [default: all-MiniLM-L6-v2 int8]",
        envvar="GBR_MODEL_DIR",
    ),
]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")]
TestsOption = Annotated[
    str | None,
    typer.Option(
        "--tests",
        help="Test and example code: include, demote (below library code) or exclude "
        "[default: the package's setting, else demote].",
        show_default=False,
    ),
]
ProviderOption = Annotated[
    str | None,
    typer.Option("--provider", help="groq, gemini or openai [default: first configured]"),
]
LlmModelOption = Annotated[str | None, typer.Option("--model", help="The provider's model.")]
MaxChunksOption = Annotated[
    int, typer.Option("-k", "--top", min=1, max=50, help="Most chunks to send.")
]
RerankOption = Annotated[
    bool, typer.Option("--rerank/--no-rerank", help="Fetch 30 candidates and rerank them.")
]
HydeOption = Annotated[
    bool | None,
    typer.Option(
        "--hyde/--no-hyde",
        help="Also search with a hypothetical snippet [default: on for open questions]",
    ),
]
IncludeDepsOption = Annotated[
    bool | None,
    typer.Option(
        "--include-deps/--no-include-deps",
        help="Also index build/packages/*/src [default: the package's setting, else off]. "
        "`index` remembers the choice in .gbr/settings.toml.",
        show_default=False,
    ),
]
EmbedCacheOption = Annotated[
    bool | None,
    typer.Option(
        "--embed-cache/--no-embed-cache",
        help="Reuse vectors from every index of yours (GBR_HOME) [default: the package's "
        "setting, else on].",
        show_default=False,
    ),
]
DeviceOption = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="Embed on auto, cpu or cuda [default: the package's setting, else auto].",
        show_default=False,
    ),
]
MaxFileSizeOption = Annotated[
    str | None,
    typer.Option(
        "--max-file-size",
        help="Skip files larger than this [default: the package's setting, else 1MB].",
        show_default=False,
    ),
]


class _Command:
    """What a command's error handler needs to know: the index file it reads, once known."""

    db: Path | None = None


@contextmanager
def _errors(debug: bool) -> Iterator[_Command]:
    """Every GbrError becomes one line on stderr and its exit code; tracebacks only with --debug.

    A DuckDB error that says the index file is damaged (found mid-query, by a block's
    checksum) is one such line too, naming the file and the rebuild that fixes it.
    """
    from gbr.core.errors import GbrError

    command = _Command()
    try:
        yield command
    except GbrError as exc:
        _fail(exc, debug)
    except Exception as exc:
        bad = _damage(exc, command.db)
        if bad is None:
            raise
        _fail(bad, debug)
    except KeyboardInterrupt:
        from gbr import interrupts

        if interrupts.installed():
            interrupts.exit_now()  # bounded: actors still busy do not hold the exit
        err.print(f"[yellow]{INTERRUPTED}[/yellow]")
        raise typer.Exit(130) from None


def _print_version(value: bool) -> None:
    if value:
        from gbr import __version__

        out.print(f"gleambrctl {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Index a Gleam package locally and search it by meaning and by name."""


def _fail(exc: GbrError, debug: bool) -> NoReturn:
    if debug:
        err.print_exception()
    err.print(f"[red]error:[/red] {escape(str(exc))}")
    raise typer.Exit(exc.exit_code) from None


def _damage(exc: Exception, db: Path | None) -> GbrError | None:
    if db is None:
        return None
    from gbr.core.store import damaged

    return damaged(exc, db)


def _warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {escape(message)}")


def _telemetry(db: Path, echo: bool = False, human: bool = False) -> None:
    """Events beside the index when that is a plain file in a writable folder; when the
    folder or file cannot take them, one warning, and the command goes on without them."""
    from gbr.core import telemetry

    telemetry.configure(telemetry.events_beside(db), echo=echo, human=human, warn=_warn)


def _load_model(model_dir: Path | None, device: str = "cpu") -> OnnxEmbedder:
    from gbr.core.embedder import OnnxEmbedder
    from gbr.core.model_files import resolve_model_files

    return OnnxEmbedder(resolve_model_files(model_dir), device=device)


def _engine_settings(
    db_path: Path, embed_cache: bool | None, device: str | None
) -> tuple[CacheConfig | None, str]:
    """The shared embed cache (None: off) and the device: flag, else setting, else default."""
    from gbr.core.device import DEVICE_ENV, check_device
    from gbr.core.embed_cache import cache_config
    from gbr.core.settings import load_settings

    settings = load_settings(db_path.parent)
    on = embed_cache if embed_cache is not None else settings.embed_cache is not False
    chosen = device or os.environ.get(DEVICE_ENV) or settings.device or "auto"
    return (cache_config() if on else None), check_device(chosen)


def _find_db(db: Path | None) -> Path:
    """--db, else the nearest `.gbr/index.duckdb` upwards, with ceilings (gbr.core.paths)."""
    from gbr.core.paths import find_index

    return db if db is not None else find_index(Path.cwd())


def _local(settings: LocalSettings, model_dir: Path | None, device: str = "cpu") -> LocalIndex:
    """The index in this process, its model loaded on first use; `gbr.access.chosen` then
    hands a command the daemon serving the index instead, when one runs (DuckDB then lets
    only it in), with a note when a dead daemon's discovery file was removed."""
    from gbr.access import LocalIndex

    return LocalIndex(settings, lambda: _load_model(model_dir, device))


def _note_stale(info: DaemonInfo | None, why: str) -> None:
    """Tell the user (on stderr) about a dead daemon's discovery file that was removed."""
    from gbr.access.discovery import describe_stale

    err.print(f"[dim]note: {escape(describe_stale(info, why))}[/dim]")


def _package_root(path: Path) -> Path:
    from gbr.core.paths import package_root

    return package_root(path)


def _confirm_wide(root: Path, yes: bool) -> None:
    """Ask before indexing `/`, home, or a folder with no Gleam package in sight; refuse
    with a hint when nobody can answer."""
    from gbr.core.errors import ConfigError
    from gbr.core.paths import wide_folder

    why = None if yes else wide_folder(root)
    if why is None:
        return
    if sys.stdin.isatty() and err.is_terminal:
        if typer.confirm(f"{why}; index everything under it?", default=False, err=True):
            return
        raise typer.Exit(1)
    raise ConfigError(f"{why}; pass the path of a Gleam package, or --yes to index it anyway")


def _parse_size(text: str, option: str = "--max-file-size") -> int:
    from gbr.core.errors import ConfigError

    units = {"k": 1_000, "kb": 1_000, "m": 1_000_000, "mb": 1_000_000, "b": 1, "": 1}
    raw = text.strip().lower()
    number = raw.rstrip("kmb")
    unit = raw[len(number) :]
    try:
        value = float(number) * units[unit]
    except (ValueError, KeyError):
        raise ConfigError(
            f"cannot read size {text!r}; write it like 500k, 2MB or 1000000"
        ) from None
    if value <= 0:
        raise ConfigError(f"{option} must be positive")
    return int(value)


@app.command()
def index(
    path: Annotated[Path, typer.Argument(help="Package, or folder of packages.")] = Path("."),
    db: DbOption = None,
    json_out: JsonOption = False,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Exit 1 when any file was dropped or only partly parsed."),
    ] = False,
    include_deps: IncludeDepsOption = None,
    max_file_size: MaxFileSizeOption = None,
    model_dir: ModelDirOption = None,
    embed_cache: EmbedCacheOption = None,
    device: DeviceOption = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Echo telemetry events to stderr.")
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild", help="Recreate the index from the source tree; the old file is kept aside."
        ),
    ] = False,
    follow_outside_links: Annotated[
        bool,
        typer.Option(
            "--follow-outside-links", help="Follow symlinks that lead out of PATH (off: skipped)."
        ),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Index PATH even if no gleam.toml is near.")
    ] = False,
    debug: DebugOption = False,
) -> None:
    """Index the .gleam files under PATH (incremental: unchanged files cost one hash).

    A damaged index file is found before the run, kept aside and rebuilt from the source.
    Ctrl-C or SIGTERM stops within about a second and exits 130 (SIGINT) or 143 (SIGTERM);
    finished files are kept, and the next run picks up the rest.
    """
    from gbr import interrupts

    interrupts.install(INTERRUPTED)
    with _errors(debug) as command:
        from gbr.access import LocalSettings, RemoteIndex, chosen
        from gbr.core.paths import default_db
        from gbr.core.store import prepare_folder

        root = _package_root(path)
        db_path = db or default_db(root)
        deps, max_bytes, ignore = _walk_settings(db_path, include_deps, max_file_size)
        cache, device = _engine_settings(db_path, embed_cache, device)
        settings = LocalSettings(
            root,
            db_path,
            include_deps=deps,
            max_bytes=max_bytes,
            ignore=ignore,
            follow_outside_links=follow_outside_links,
            embed_cache=cache,
        )
        _confirm_wide(root, yes)  # after the options are known good: bad usage comes first
        command.db = db_path
        prepare_folder(db_path)
        _telemetry(db_path, echo=verbose)
        _remember_deps(db_path, include_deps)
        local = _local(settings, model_dir, device)
        with chosen(local, _note_stale) as chosen_index:
            if isinstance(chosen_index, RemoteIndex):
                if rebuild:
                    raise _daemon_in_the_way(chosen_index.pid, db_path)
                if not json_out:
                    err.print(f"[dim]indexing through the daemon (pid {chosen_index.pid})[/dim]")
                summary = chosen_index.index()
            else:
                _set_aside_if_needed(db_path, rebuild)
                local.model  # noqa: B018 - loaded before the bar starts
                show_bar = not json_out and err.is_terminal
                with _progress_bar(show_bar) as on_progress:
                    summary = local.index(progress=on_progress)
        if json_out:
            from gbr.cli_output import stamped

            out.print_json(json.dumps(stamped(summary.as_dict(), summary.root)))
        else:
            _print_summary(summary)
        if strict and (summary.files_dropped or summary.files_partial):
            from gbr.core.errors import GbrError

            raise GbrError(
                f"--strict: {summary.files_dropped} files dropped, {summary.files_partial} "
                "only partly parsed; fix the files listed above, or index without --strict"
            )


def _daemon_in_the_way(pid: int, db: Path) -> GbrError:
    from gbr.core.errors import DaemonError

    return DaemonError(
        f"the daemon (pid {pid}) serves {db}; stop it (Ctrl-C, or kill {pid}) before --rebuild"
    )


def _set_aside_if_needed(db: Path, rebuild: bool) -> None:
    """Before a run: with --rebuild, or when the file is damaged, move it aside (one line)."""
    from gbr.core.store import check_index, set_aside

    if not db.exists():
        return
    bad = check_index(db)
    if bad is None and not rebuild:
        return
    aside = set_aside(db, "corrupt" if bad is not None else "old")
    if bad is not None:
        err.print(
            f"[yellow]the index {escape(str(db))} could not be read ({escape(bad.detail)}); "
            f"kept it as {escape(aside.name)} and rebuilding it from the source tree[/yellow]"
        )
    else:
        err.print(f"[dim]kept the old index as {escape(aside.name)}; rebuilding it[/dim]")


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[Callable[[Progress], None] | None]:
    from gbr.cli_progress import index_progress

    with index_progress(err, enabled) as update:
        yield update


def _print_summary(s: IndexSummary) -> None:
    if s.reindex_reason:
        out.print(f"[yellow]re-indexed everything:[/yellow] {escape(s.reindex_reason)}")
    out.print(
        f"[bold]{s.files_seen}[/bold] files seen: {s.files_indexed} indexed, "
        f"{s.files_unchanged} unchanged, {s.files_dropped} dropped, {s.files_removed} removed"
    )
    out.print(
        f"[bold]{s.chunks}[/bold] chunks ({s.chunks_embedded} embedded, {s.chunks_cached} cached) "
        f"in {s.seconds:.2f} s, {s.chunks_per_second:.0f} chunks/s"
        + (f"; embed cache {s.cache_hits} hits" if s.cache_hits else "")
    )
    if s.restarts or s.dead_letters:
        out.print(f"[yellow]{s.restarts} actor restarts, {s.dead_letters} dead letters[/yellow]")
    for problem in s.dropped:
        out.print(f"  [red]dropped[/red] {escape(problem.path)}: {escape(problem.reason)}")
    for problem in s.partial:
        out.print(f"  [yellow]partial[/yellow] {escape(problem.path)}: {escape(problem.reason)}")
    out.print(f"index: {escape(s.db)}")
    if s.files_seen == 0:
        _warn(
            f"no .gleam files under {s.root} (hidden folders, build/ and ignored files are "
            "skipped); pass the path of a Gleam package"
        )


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Words or an identifier; `-` reads one per line.")],
    k: Annotated[
        int | None,
        typer.Option(
            "-k",
            "--top",
            min=1,
            max=200,
            help="Hits to show [default: the package's setting, else 10].",
            show_default=False,
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help=MODE_HELP + " [default: the package's setting, else hybrid]"),
    ] = None,
    in_path: Annotated[
        str | None, typer.Option("--path", help="Only files under this prefix or glob.")
    ] = None,
    module: Annotated[
        str | None, typer.Option("--module", help="Only this module and its submodules.")
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only these kinds (function, type, type_alias, ...)."),
    ] = None,
    tests: TestsOption = None,
    db: DbOption = None,
    json_out: JsonOption = False,
    vimgrep: Annotated[
        bool,
        typer.Option(
            "--vimgrep",
            help="One `path:line:col: name (kind) signature` line per hit, paths from the "
            "current folder: for quickfix lists and editors' grep modes.",
        ),
    ] = False,
    model_dir: ModelDirOption = None,
    debug: DebugOption = False,
) -> None:
    """Search the index: dense vectors and BM25, fused (see --mode for what the score means)."""
    with _errors(debug) as command:
        from gbr.access import LocalSettings, chosen
        from gbr.cli_output import stamped
        from gbr.core.errors import ConfigError
        from gbr.core.priors import parse_test_policy
        from gbr.core.search import KINDS, MODES, Filter

        if mode is not None and mode not in MODES:
            raise ConfigError(f"unknown --mode {mode!r}; use one of {', '.join(MODES)}")
        bad = [k for k in kind or [] if k not in KINDS]
        if bad:
            raise ConfigError(f"unknown --kind {bad[0]!r}; use one of {', '.join(KINDS)}")
        if json_out and vimgrep:
            raise ConfigError("--json and --vimgrep are two output formats; pass one")
        if tests is not None:
            parse_test_policy(tests)  # a bad value is bad usage, before any index is looked for
        _check_query_length(query)
        db_path = command.db = _find_db(db)
        settings = _package_settings(db_path)
        k = k or settings.k or 10
        mode = mode or settings.mode or "hybrid"
        policy = parse_test_policy(tests or settings.tests or "demote")
        where = Filter(path=in_path, module=module, kinds=tuple(kind or ()), tests=policy)
        # Kept open for all the queries of `search -`, as one search would.
        local = _local(LocalSettings(db_path.parent.parent, db_path, keep_open=True), model_dir)
        with chosen(local, _note_stale) as index:
            try:
                root = index.indexed_root()
                if query == "-":
                    for line in sys.stdin:
                        if line.strip():
                            _check_query_length(line.strip())
                            found = index.search(line.strip(), k, mode, where)  # type: ignore[arg-type]
                            sys.stdout.write(json.dumps(stamped(found.as_dict(), root)) + "\n")
                            sys.stdout.flush()
                    return
                found = index.search(query, k, mode, where)  # type: ignore[arg-type]
            finally:
                local.close()
        _render_search(stamped(found.as_dict(), root), root, json_out, vimgrep)


def _package_settings(db_path: Path) -> Settings:
    from gbr.core.settings import load_settings

    return load_settings(db_path.parent)


def _walk_settings(
    db_path: Path, include_deps: bool | None, max_file_size: str | None
) -> tuple[bool, int, tuple[str, ...]]:
    """include deps, size cap and ignores: the flag, else the package's setting, else default."""
    from gbr.core.settings import load_settings

    settings = load_settings(db_path.parent)
    deps = include_deps if include_deps is not None else bool(settings.include_deps)
    size = max_file_size or settings.max_file_size or "1MB"
    return deps, _parse_size(size), settings.ignore


def _remember_deps(db_path: Path, include_deps: bool | None) -> None:
    """`--include-deps` or `--no-include-deps` sticks, so a later plain `index` keeps it."""
    from dataclasses import replace

    from gbr.core.settings import load_settings, save_settings, settings_path

    settings = load_settings(db_path.parent)
    if include_deps is None or settings.include_deps == include_deps:
        return
    save_settings(db_path.parent, replace(settings, include_deps=include_deps))
    err.print(
        f"[dim]note: include_deps = {str(include_deps).lower()} is remembered in "
        f"{escape(str(settings_path(db_path.parent)))}; `gleambrctl settings unset "
        "include_deps` forgets it[/dim]"
    )


def _check_query_length(query: str) -> None:
    """The daemon's cap on a query, so that a local search fails the same way (exit 2)."""
    from gbr.access.client import MAX_QUERY_CHARS
    from gbr.core.errors import ConfigError

    if len(query) > MAX_QUERY_CHARS:
        raise ConfigError(
            f"the query is {len(query)} characters long, over the {MAX_QUERY_CHARS} a search "
            "takes; shorten it"
        )


def _render_search(
    data: dict[str, Any], root: str | Path | None, json_out: bool, vimgrep: bool
) -> None:
    """The `search --json` object as JSON, vimgrep lines, or the reading layout."""
    from gbr.cli_output import vimgrep_lines
    from gbr.core.records import Hit

    hits = [Hit.from_dict(hit) for hit in data["results"]]
    if json_out:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif vimgrep:
        sys.stdout.writelines(line + "\n" for line in vimgrep_lines(hits, root or "."))
    else:
        _print_hits(hits)
    if data.get("hint") and not json_out:
        err.print(f"[yellow]note:[/yellow] {escape(data['hint'])}")


def _print_hits(hits: list[Hit]) -> None:
    if not hits:
        out.print("no matches")
        return
    for hit in hits:
        out.print(
            f"[bold]{hit.rank:>2}[/bold] [cyan]{escape(hit.path)}:{hit.start_line}-{hit.end_line}"
            f"[/cyan]  {escape(hit.module)}  [magenta]{hit.kind}[/magenta] "
            f"[bold green]{escape(hit.name)}[/bold green]  [dim]{hit.score:.4f}[/dim]"
        )
        if hit.signature:
            out.print(f"     {escape(hit.signature)}")
        if hit.doc:
            out.print(f"     [dim]{escape(hit.doc.split('. ')[0][:120])}[/dim]")
        body = [
            ln for ln in hit.text.splitlines() if ln.strip() and not ln.lstrip().startswith("//")
        ]
        for line in body[1:4]:
            out.print(f"     [dim]│[/dim] {escape(line[:110])}")


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="A question about the indexed code.")],
    provider: ProviderOption = None,
    model: LlmModelOption = None,
    k: MaxChunksOption = 8,
    budget: Annotated[
        int, typer.Option("--budget", min=200, help="Context budget in estimated tokens.")
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
    db: DbOption = None,
    json_out: JsonOption = False,
    model_dir: ModelDirOption = None,
    debug: DebugOption = False,
) -> None:
    """Answer a question from the code: retrieve, assemble a cited context, ask an LLM."""
    with _errors(debug) as command:
        from dataclasses import replace

        from gbr.access import LlmChoice, LocalSettings, chosen
        from gbr.core.oracle import AskOptions
        from gbr.core.priors import parse_test_policy

        if tests is not None:
            parse_test_policy(tests)
        db_path = command.db = _find_db(db)
        policy = parse_test_policy(tests or _package_settings(db_path).tests or "demote")
        options = AskOptions(
            max_chunks=k, budget=budget, rerank=rerank, hyde=hyde, dry_run=dry_run, tests=policy
        )
        if graph_context is not None:
            options = replace(options, graph_context=graph_context)
        llm = LlmChoice(provider, model, timeout, reranker)
        local = _local(LocalSettings(db_path.parent.parent, db_path), model_dir)
        with chosen(local, _note_stale) as index:
            if index.via is not None and (reranker is not None or timeout is not None):
                err.print("[dim]note: --reranker and --timeout are the daemon's own settings[/dim]")
            on_token = None if json_out or dry_run else _print_token
            outcome = index.ask(question, options, llm, on_token=on_token)
            root = index.root
        if not json_out and outcome.answer["provider"] is not None:
            sys.stdout.write("\n")  # after the streamed answer
        _render_answer_data(outcome.answer, json_out, dry_run, root)
        raise typer.Exit(outcome.exit_code)


def _print_token(delta: str) -> None:
    sys.stdout.write(delta)
    sys.stdout.flush()


def _render_answer_data(
    data: dict[str, Any], json_out: bool, dry_run: bool, root: str | Path | None
) -> None:
    """Render the `ask --json` object, whether it was made here or by a daemon."""
    from gbr.cli_output import stamped
    from gbr.core.oracle import Answer
    from gbr.core.prompt import render_context, sources_line

    if json_out:
        sys.stdout.write(json.dumps(stamped(data, root), indent=2) + "\n")
        return
    if dry_run:
        for message in data.get("prompt", []):
            sys.stdout.write(f"----- {message['role']} -----\n{message['content']}\n")
        return
    if data.get("error") is not None:
        err.print(f"[red]error:[/red] {escape(data['error'])}")
        err.print("[dim]the context that was retrieved:[/dim]")
        sys.stdout.write(render_context(Answer.from_dict(data).chunks))
        return
    sources = sources_line(Answer.from_dict(data).sources())
    err.print(f"[dim]sources: {escape(sources)}[/dim]")
    if data["unknown_citations"]:
        listed = ", ".join(f"{c['path']}:{c['line']}" for c in data["unknown_citations"])
        err.print(f"[yellow]not in the context sent:[/yellow] {escape(listed)}")


@app.command()
def chat(
    path: Annotated[Path, typer.Argument(help="The Gleam package to talk about.")] = Path("."),
    provider: ProviderOption = None,
    model: LlmModelOption = None,
    k: MaxChunksOption = 8,
    budget: Annotated[
        int,
        typer.Option("--budget", min=200, help="Estimated tokens for context and history."),
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
    with _errors(debug):
        from gbr.access import LocalSettings, choose
        from gbr.chat import ChatSession, ChatSettings, Views, run_interactive, run_piped

        root = _package_root(path).resolve()
        local_settings = LocalSettings(root, db, keep_open=True, cancel_on_ctrl_c=True)
        # A daemon serving the index owns it (DuckDB lets no one else in): go through it.
        backend = choose(_local(local_settings, model_dir), _note_stale)
        if backend.via is not None:
            if timeout is not None:
                err.print("[dim]note: --timeout is the daemon's own setting[/dim]")
        else:
            _telemetry(backend.db)
        views = Views(_print_hits, _print_summary, lambda: _progress_bar(err.is_terminal))
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


@app.command()
def status(
    db: DbOption = None,
    json_out: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """What is indexed: files, chunks, dropped files and why, model, size, last run."""
    with _errors(debug) as command:
        from gbr.access import LocalSettings, chosen
        from gbr.core.snapshot import lock_holder

        db_path = command.db = _find_db(db)
        local = _local(LocalSettings(db_path.parent.parent, db_path), None)
        with chosen(local, _note_stale) as index:
            report = index.status()
            here = index.via is None
        if here:
            holder = lock_holder(db_path)
            if holder is not None and holder[1] == "index":
                report["index_run_pid"] = holder[0]  # the figures are of the last complete run
        report["settings"] = _package_settings(db_path).as_dict()
        report["embed_cache"] = _cache_report(db_path, report.get("last_run"))
        if json_out:
            from gbr.cli_output import stamped

            sys.stdout.write(json.dumps(stamped(report, report.get("root")), indent=2) + "\n")
            return
        if "pid" in report:
            out.print(
                f"daemon pid {report['pid']} at http://{report['host']}:{report['port']}, "
                f"up {report['uptime_seconds']:.0f} s, watcher {report['watcher']}, "
                f"{report['restarts']} restarts, {report['queue_depth']} queued"
                + (f", indexing ({report['indexing']})" if report["indexing"] else "")
            )
        if report.get("index_run_pid"):
            out.print(
                f"an index run (pid {report['index_run_pid']}) is in progress; "
                "this is the last complete index"
            )
        out.print(f"index  {escape(report['db'])} ({report['db_bytes'] / 1e6:.1f} MB)")
        out.print(f"root   {escape(str(report['root']))}")
        out.print(
            f"model  {escape(str(report['model_id']))} "
            f"(chunker v{escape(str(report['chunker_version']))})"
        )
        out.print(
            f"files  {report['files_ok']} indexed, {report['files_failed']} dropped, "
            f"{report.get('files_partial', 0)} partial; "
            f"chunks {report['chunks']} ({report['stale_chunks']} stale)"
        )
        if report["settings"]:
            listed = ", ".join(f"{k} = {v}" for k, v in report["settings"].items())
            out.print(f"settings {escape(listed)} (gleambrctl settings)")
        last = report["last_run"]
        if last:
            out.print(
                f"last run: {last['files_indexed']} indexed, {last['files_unchanged']} unchanged, "
                f"{last['files_dropped']} dropped in {last['seconds']} s"
            )
        _print_cache(report["embed_cache"])
        for item in report["dropped"]:
            stale = f" ({item['stale_chunks']} stale chunks kept)" if item["stale_chunks"] else ""
            out.print(
                f"  [red]dropped[/red] {escape(item['path'])}: {escape(item['error'])}{stale}"
            )
        for item in report.get("partial", []):
            stale = f" ({item['stale_chunks']} stale chunks kept)" if item["stale_chunks"] else ""
            out.print(
                f"  [yellow]partial[/yellow] {escape(item['path'])}: {escape(item['error'])}{stale}"
            )


def _cache_report(db_path: Path, last_run: dict[str, Any] | None) -> dict[str, Any]:
    """The shared embed cache for `status`: where, how big, and the last run's hits."""
    from gbr.core.embed_cache import describe

    report = describe(_engine_settings(db_path, None, "cpu")[0])
    if last_run:
        report["last_run_hits"] = last_run.get("cache_hits", 0)
        report["last_run_misses"] = last_run.get("cache_misses", 0)
    return report


def _print_cache(cache: dict[str, Any]) -> None:
    if not cache["enabled"]:
        out.print("embed cache off (the embed_cache setting, or GBR_EMBED_CACHE)")
        return
    line = (
        f"embed cache {escape(cache['path'])}: {cache['rows']} vectors, "
        f"{cache['bytes'] / 1e6:.1f} of {cache['max_bytes'] / 1e6:.0f} MB"
    )
    if "last_run_hits" in cache:
        line += f"; last run {cache['last_run_hits']} hits, {cache['last_run_misses']} misses"
    out.print(line + (f" [yellow]({escape(cache['error'])})[/yellow]" if "error" in cache else ""))


@app.command("settings")
def settings_command(
    key: Annotated[
        str | None,
        typer.Argument(
            help="include_deps, max_file_size, ignore, k, mode, tests, embed_cache or device."
        ),
    ] = None,
    value: Annotated[
        str | None,
        typer.Argument(help="The new value; for ignore, comma-separated .gitignore patterns."),
    ] = None,
    unset: Annotated[
        bool, typer.Option("--unset", help="Forget KEY; the built-in default applies again.")
    ] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show or change this package's settings (.gbr/settings.toml beside the index).

    A flag given on the command line wins over a setting for that run. Settings apply to
    `index`, `serve` and `mcp` (include_deps, max_file_size, ignore), to `index` and `serve`
    (embed_cache, device) and to `search` (k, mode, tests). `gleambrctl settings k 5`;
    `gleambrctl settings ignore --unset`.
    """
    with _errors(debug):
        from gbr.core.errors import ConfigError
        from gbr.core.settings import KEYS, load_settings, save_settings, with_value

        db_path = db or _settings_db()
        folder = db_path.parent
        settings = load_settings(folder)
        if key is not None and key not in KEYS:
            raise ConfigError(f"unknown setting {key!r}; use one of {', '.join(KEYS)}")
        if unset and (key is None or value is not None):
            raise ConfigError("--unset takes a KEY and no value: `gleambrctl settings k --unset`")
        if key is not None and (value is not None or unset):
            settings = with_value(settings, key, None if unset else value)
            save_settings(folder, settings)
        shown = settings.as_dict()
        if json_out:
            data = {"file": str(folder / "settings.toml"), "settings": shown}
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
            return
        for name in [key] if key is not None else KEYS:
            current = shown.get(name)
            text = "(not set)" if current is None else json.dumps(current)
            out.print(f"{name:<14} {escape(text)}")


def _settings_db() -> Path:
    """The index found from here upward, else the one this folder's package would get."""
    from gbr.core.errors import ConfigError
    from gbr.core.paths import default_db

    try:
        return _find_db(None)
    except ConfigError:
        return default_db(_package_root(Path(".")))


@app.command()
def serve(
    path: Annotated[Path, typer.Argument(help="Package, or folder of packages.")] = Path("."),
    host: Annotated[
        str,
        typer.Option("--host", help="Interface to listen on; other than loopback needs --token."),
    ] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            help="Port; 0 picks a free one (printed). [default: GBR_PORT or 7717, or a free "
            "one (printed) when that is taken]",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="GBR_TOKEN",
            help="Clients must send `Authorization: Bearer TOKEN`.",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    model_dir: ModelDirOption = None,
    debounce_ms: Annotated[
        int,
        typer.Option("--debounce-ms", min=0, help="Longest wait to group file changes."),
    ] = 200,
    json_logs: Annotated[
        bool | None,
        typer.Option(
            "--json-logs/--no-json-logs",
            help="Log to stderr as JSON lines, or as readable lines. [default: readable on a "
            "terminal, JSON otherwise]",
            show_default=False,
        ),
    ] = None,
    include_deps: IncludeDepsOption = None,
    max_file_size: MaxFileSizeOption = None,
    embed_cache: EmbedCacheOption = None,
    device: DeviceOption = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="Also answer requests whose Host is NAME (a proxy's name; repeatable; * for "
            "any). Loopback and --host always are.",
            metavar="NAME",
        ),
    ] = None,
    max_body: Annotated[
        str, typer.Option("--max-body", help="Largest request body read (e.g. 8MB).")
    ] = "8MB",
    debug: DebugOption = False,
) -> None:
    """Keep PATH indexed as files change, and answer search, ask and index over HTTP."""
    with _errors(debug):
        from gbr.actors.faults import parse_faults
        from gbr.core.errors import ConfigError
        from gbr.core.paths import default_db
        from gbr.daemon.server import DEFAULT_PORT
        from gbr.daemon.server import serve as run_daemon
        from gbr.daemon.service import DaemonConfig

        root = _package_root(path)
        db_path = (db or default_db(root)).resolve()
        try:
            faults = parse_faults(os.environ.get("GBR_FAULTS"))
        except ValueError as exc:
            raise ConfigError(f"GBR_FAULTS: {exc}") from None
        human = not json_logs if json_logs is not None else _is_terminal(sys.stderr)
        _telemetry(db_path, echo=True, human=human)
        deps, max_bytes, ignore = _walk_settings(db_path, include_deps, max_file_size)
        cache, device = _engine_settings(db_path, embed_cache, device)
        config = DaemonConfig(
            root=root,
            db=db_path,
            host=host,
            port=port if port is not None else _default_port(DEFAULT_PORT),
            token=token or None,
            debounce_ms=debounce_ms,
            include_deps=deps,
            max_bytes=max_bytes,
            ignore=ignore,
            faults=faults,
            embed_cache=cache,
        )

        def announce(info: DaemonInfo) -> None:
            with suppress(*_DEAD_STREAM):  # a pipe whose reader is gone: serve anyway
                out.print(
                    f"serving {escape(info.db)} at {info.url} (pid {info.pid}); Ctrl-C stops it"
                )
                sys.stdout.flush()

        def note(message: str) -> None:
            with suppress(*_DEAD_STREAM):
                err.print(f"[dim]note: {escape(message)}[/dim]")

        code = run_daemon(
            config,
            lambda: _load_model(model_dir, device),
            announce,
            note,
            allow_hosts=allow_host or (),
            max_body_bytes=_parse_size(max_body, "--max-body"),
            any_port_if_busy=port is None,
        )
        _quiet_dead_stdout()
        raise typer.Exit(code)


# What writing to a gone stdout or stderr raises: EPIPE/EBADF, a closed file, or no stream
# at all (Python sets sys.stdout to None when descriptor 1 was closed at start).
_DEAD_STREAM = (OSError, ValueError, AttributeError)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _quiet_dead_stdout() -> None:
    """Point stdout at /dev/null if its reader is gone (`serve | tee` after Ctrl-C), so that
    the flush at exit does not print a BrokenPipeError or turn the exit code into 120."""
    if sys.stdout is None:  # descriptor 1 was closed at start: nothing to flush
        return
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        with suppress(*_DEAD_STREAM):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def _default_port(builtin: int) -> int:
    """GBR_PORT, else the built-in one: the port tried first when --port is not given."""
    from gbr.core.errors import ConfigError

    text = os.environ.get("GBR_PORT", "").strip()
    if not text:
        return builtin
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise ConfigError(f"GBR_PORT={text!r} is not a port; set it to a number from 1 to 65535")
    return int(text)


@app.command()
def mcp(
    path: Annotated[Path, typer.Argument(help="The Gleam package to serve.")] = Path("."),
    db: DbOption = None,
    model_dir: ModelDirOption = None,
    include_deps: IncludeDepsOption = None,
    max_file_size: MaxFileSizeOption = None,
    debug: DebugOption = False,
) -> None:
    """Serve search_code, ask_codebase, index_status and reindex to an MCP client over stdio.

    Each call goes to the running `gleambrctl serve` for this index when there is one, and is
    answered in this process otherwise.
    """
    with _errors(debug):
        from gbr.access import LocalSettings
        from gbr.core.paths import default_db
        from gbr.mcp.server import run_stdio

        root = _package_root(path)
        db_path = (db or default_db(root)).resolve()
        _telemetry(db_path)  # never echoed: stdout carries the protocol
        deps, max_bytes, ignore = _walk_settings(db_path, include_deps, max_file_size)
        settings = LocalSettings(root, db_path, deps, max_bytes, ignore)
        run_stdio(_local(settings, model_dir), on_stale=_note_stale)


from gbr.cli_graph import register as _register_graph  # noqa: E402 - needs the options above

_register_graph(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
