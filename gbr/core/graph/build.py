"""A file's chunks and its code graph from one parse, for the parser stage."""

from __future__ import annotations

from tree_sitter import Node, Parser

from gbr.core.graph.extract import extract_file_graph
from gbr.core.graph.model import FileGraph
from gbr.core.parse.chunker import ChunkLimits, TokenCounter, chunk_file
from gbr.core.records import Chunk, FileProblem, PartialFile, SourceFile


def chunk_with_graph(
    source: SourceFile,
    parser: Parser,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
) -> tuple[list[Chunk] | PartialFile | FileProblem, FileGraph | None]:
    """`chunk_file`, plus the graph read from the tree it parsed (None for a dropped file).

    A failure in extraction costs the file its graph rows, never its chunks: search stays
    whole, and the event names the file so the extractor can be fixed.
    """
    trees: list[Node] = []
    result = chunk_file(source, parser, count_tokens, limits, on_tree=trees.append)
    if isinstance(result, FileProblem) or not trees:
        return result, None
    # extract_file_graph never raises: a bug in extraction logs and gives an empty graph.
    return result, extract_file_graph(source, trees[0], parser)
