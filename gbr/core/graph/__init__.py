"""The code graph: who defines, calls and uses what, read from the syntax trees we parse.

`extract` and `walk` read one parsed file's definitions and references, `scope` resolves names
through the file's imports, `build` turns a file into its graph rows, `store` writes and
queries the graph tables inside the index, `questions` answers refs/callers/callees, and
`render` draws a picture. This room may import the ground floor of `gbr.core` and `parse`
(it reads the same trees the chunker cuts); ranking and answering read it, never the reverse.
"""

from gbr.core.graph.model import FileGraph, Import, Reference, RefKind, Symbol, SymbolKind

__all__ = ["FileGraph", "Import", "RefKind", "Reference", "Symbol", "SymbolKind"]
