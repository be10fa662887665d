"""The index on disk: one DuckDB file per package, written by one writer.

`facade` is the `Store` that every caller uses; its parts hold the queries (`queries`), the
writes and transactions (`writes`), the vectors and their memory-mapped copy (`vectors`,
`vector_file`), full text (`fulltext`, `postings`, `postings_memory`, and `test_words`: the
words tests lend to what they call), rows kept in memory while serving (`rows_memory`), the
staged copy that readers never see half-written (`snapshot`), the writer lock (`lock`) and
the store's failures (`errors`). `indexing` writes one batch of chunks. The parts never
import the facade: they take a `handle.StoreHandle`. This room may import the ground floor
and the rooms below it: parse, embed and graph.
"""
