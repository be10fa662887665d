"""What a name means in one Gleam file: its module aliases, unqualified imports, own definitions.

Resolution is syntactic and never guesses: a name resolves only when the file itself says
where it comes from (an import or a definition of its own). Locals are handled by the walker
(gbr.core.graph.walk), which asks here only for names no local binding shadows.

The prelude (`Int`, `String`, `Result`, `Ok`, `Error`, `True`, `Nil`, ...) is skipped, falling
out of that rule: those names are in scope without an import, no indexed file defines them, and
an edge to each `Ok(...)` would drown the graph. A file that defines or imports a name of the
same spelling resolves it there instead, as the compiler does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gbr.core.graph.model import Import, RefKind

Target = tuple[str, str]  # (module, name)


@dataclass(slots=True)
class FileScope:
    """The top-level names of one file, filled in before any reference is resolved."""

    module: str
    aliases: dict[str, str] = field(default_factory=dict)  # `list` -> `gleam/list`
    values: dict[str, Target] = field(default_factory=dict)  # unqualified fns and constants
    constructors: dict[str, Target] = field(default_factory=dict)
    types: dict[str, Target] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)  # defined here
    constants: set[str] = field(default_factory=set)  # defined here

    def add_import(self, imp: Import) -> None:
        self.aliases[imp.alias] = imp.module
        for name, local, is_type in imp.names:
            target = (imp.module, name)
            if is_type:
                self.types[local] = target
            elif local[:1].isupper():
                self.constructors[local] = target
                # Before `type` imports (Gleam < 0.30) `{Option}` brought in the type too.
                self.types.setdefault(local, target)
            else:
                self.values[local] = target

    def value(self, name: str, kind: RefKind) -> tuple[Target, RefKind] | None:
        """A lowercase name no local shadows: a function or constant of the file, or imported.

        An imported name read without a call may be a function or a constant; we cannot tell
        from this file alone, so it is a "value" (the join with the definitions knows).
        """
        if name in self.functions:
            return (self.module, name), kind
        if name in self.constants:
            return (self.module, name), "constant" if kind == "value" else kind
        target = self.values.get(name)
        return (target, kind) if target else None

    def constructor(self, name: str) -> Target | None:
        return self.constructors.get(name)

    def type(self, name: str) -> Target | None:
        return self.types.get(name)
