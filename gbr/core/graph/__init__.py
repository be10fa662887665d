"""The code graph: who defines, calls and uses what, read from the syntax trees we parse."""

from gbr.core.graph.model import FileGraph, Import, Reference, RefKind, Symbol, SymbolKind

__all__ = ["FileGraph", "Import", "RefKind", "Reference", "Symbol", "SymbolKind"]
