"""Turning text into vectors on this machine: the ONNX embedder and what it stands on.

`embedder` runs the model (the default int8 MiniLM or a model folder the user names),
`model_files` finds its files, `int8_matmul` and `onnx_graphs` rewrite and keep the graph so
a session starts fast, `device` picks CPU or GPU, and `cache` is the shared vector cache
under GBR_HOME. This room may import only the ground floor of `gbr.core`; it knows nothing
of Gleam, of the index or of ranking.
"""
