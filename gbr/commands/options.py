"""The options several commands share, declared once so that each reads the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gbr.access.requests import MAX_ASK_K
from gbr.core.environ import MODEL_DIR

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
        help=(
            "Folder with model.onnx and tokenizer.json "
            "[default: all-MiniLM-L6-v2 tuned on Gleam, int8]"
        ),
        envvar=MODEL_DIR.name,
    ),
]
FollowOutsideLinksOption = Annotated[
    bool,
    typer.Option(
        "--follow-outside-links", help="Follow symlinks that lead out of PATH (off: skipped)."
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
    int, typer.Option("-k", "--top", min=1, max=MAX_ASK_K, help="Most chunks to send.")
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
PackageArgument = Annotated[Path, typer.Argument(help="Package, or folder of packages.")]
