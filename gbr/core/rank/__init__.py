"""Answering a search: hybrid retrieval and everything that orders the hits.

`search` runs dense and BM25 retrieval and fuses them; `priors` weighs hits by kind, test
code and centrality in the code graph; `ranker` is the learned reorderer; `rerank` and
`second_opinion` re-score the top hits with another model; `filter_hint` explains an empty
result. This room may import the ground floor and the rooms below it (parse, embed, llm,
graph, store), never `answer`.
"""
