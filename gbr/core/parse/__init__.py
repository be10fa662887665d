"""Reading Gleam: find a package's files, parse them with tree-sitter, cut chunks.

The walker lists a package's `.gleam` files (honouring `.gitignore` and `.gbrignore`) and
`changes` says which of them differ from what the index holds; the chunker turns one parsed
file into chunks that follow AST nodes, `parse_damage` keeps the valid parts of a file with
errors, `oversize` splits a node too long to embed at statement boundaries, and `chunk_text`
builds the texts embedded and searched. This room may import only the ground floor of
`gbr.core` (records, errors, telemetry, sizes, ...); nothing here knows of vectors or DuckDB.
"""
