"""Sentence embeddings from a local ONNX model: tokenize, run, mean-pool, L2-normalise."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from gbr.core.embed import onnx_graphs
from gbr.core.embed.device import CUDA, DEVICE_BATCHES, announce, choose_device, fallback
from gbr.core.embed.model_files import ModelFiles
from gbr.core.environ import MODEL_DIR
from gbr.core.errors import ConfigError
from gbr.core.telemetry import log_info, warning_line

if TYPE_CHECKING:
    import onnxruntime as ort
    from tokenizers import Tokenizer


# More characters than any window token spans in code (a WordPiece token is a word piece
# or a symbol); cutting a text at max_tokens times this never changes its vector in practice.
CHARS_PER_TOKEN = 64


class Embedder(Protocol):
    # Read-only: a stand-in that loads the model on first use passes them through.
    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


@dataclass(slots=True)
class PaddingStats:
    """Real versus padded token positions fed to the model, for the throughput bench."""

    real: int = 0
    padded: int = 0

    @property
    def waste(self) -> float:
        total = self.real + self.padded
        return self.padded / total if total else 0.0


def onnx_session(
    path: Path,
    threads: int | None = None,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    graphs: Path | None = None,
    prepack: bool = True,
    int8_matmul: bool = False,
) -> ort.InferenceSession:
    """A CPU session as every model here runs: all cores for one op, fully optimised, and
    idle threads that sleep instead of spin-waiting.

    Spinning buys a little latency between runs of one batch, but in a daemon a query's
    embedding left both cores busy spinning after every search, which tripled the time a
    concurrent index batch took (bench/daemon_load.py). Bulk indexing does not lose by it
    (bench/index_throughput.py, same ratio to the ceiling).

    `graphs`: a folder where the optimised graph is kept between processes, so that the
    next session skips optimising it (gbr.core.embed.onnx_graphs); CPU sessions only.

    `int8_matmul`: the model's int8 weights are multiplied in int8 (gbr.core.embed.int8_matmul).

    `prepack=False` for a process that embeds a query or two and exits: onnxruntime then
    leaves the weights as they are instead of repacking all 90 MB of them for its matrix
    kernels when the session starts. Session plus first query: 77-316 ms (median 132) ->
    32-127 ms (median 46), interleaved x8 on a loaded machine; each later run is a few ms
    slower, and the vectors differ by 2e-6 at most (tests/core/test_onnx_graphs.py).
    """
    import onnxruntime as ort

    def options() -> ort.SessionOptions:
        made = ort.SessionOptions()
        made.intra_op_num_threads = threads or os.cpu_count() or 1
        made.inter_op_num_threads = 1
        made.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        made.add_session_config_entry("session.intra_op.allow_spinning", "0")
        made.add_session_config_entry("session.inter_op.allow_spinning", "0")
        if not prepack:
            made.add_session_config_entry("session.disable_prepacking", "1")
        return made

    if graphs is not None and list(providers) == ["CPUExecutionProvider"]:
        kept = onnx_graphs.session(path, graphs, options, int8_matmul)
        if kept is not None:
            return kept
    try:
        return ort.InferenceSession(
            onnx_graphs.source(path, int8_matmul), options(), providers=list(providers)
        )
    except Exception as exc:
        raise ConfigError(f"cannot load ONNX model {path}: {exc}") from exc


class OnnxEmbedder:
    """BERT-style models with a `last_hidden_state` output (all-MiniLM-L6-v2, bge-small)."""

    def __init__(
        self,
        files: ModelFiles,
        max_tokens: int = 256,
        batch_tokens: int | None = None,
        max_batch: int | None = None,
        threads: int | None = None,
        device: str = "cpu",
        graphs: Path | None = None,
        prepack: bool = True,
        pooling: str = "mean",
    ) -> None:
        """`graphs`: where optimised ONNX graphs are kept between runs (None: not kept);
        `prepack=False` for a process that embeds only a query or two (onnx_session).
        `pooling`: `mean` over the tokens (MiniLM) or the first token's state, `cls` (bge).
        Whether the int8 weights are multiplied in int8 is the model's (`files.int8_matmul`)."""
        from tokenizers import Tokenizer

        self.model_id = files.model_id
        self._model_file = files.onnx
        self.max_tokens = max_tokens
        self.pooling = pooling
        # Small batches are faster here: 1024 padded tokens per ONNX run embedded 88 texts/s
        # against 73 for 32 x up-to-256 (2 cores, bench/out micro-run), and peak RSS fell
        # from 1.2 GB to 0.5 GB because onnxruntime's arena grows with the batch shape.
        self._session, self.device = _device_session(
            files.onnx, device, threads, graphs, prepack, files.int8_matmul
        )
        tokens, texts = DEVICE_BATCHES[self.device]
        self.batch_tokens = batch_tokens or tokens
        self.max_batch = max_batch or texts
        self.stats = PaddingStats()
        try:
            self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
        except Exception as exc:
            raise ConfigError(f"cannot load tokenizer {files.tokenizer}: {exc}") from exc
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer_file = files.tokenizer
        self._untruncated: Tokenizer | None = None
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = _hidden_width(self._session, files.onnx)
        # onnxruntime sessions are thread-safe, but the stats are not.
        self._lock = threading.Lock()

    @property
    def _counter(self) -> Tokenizer:
        """A second, untruncated tokenizer that counts the true length of chunk texts. Made
        at the first count: only indexing counts, and a search would spend 20-40 ms
        reading the tokenizer's file a second time (2 cores)."""
        with self._lock:
            if self._untruncated is None:
                from tokenizers import Tokenizer

                counter = Tokenizer.from_file(str(self._tokenizer_file))
                counter.no_padding()
                counter.no_truncation()
                self._untruncated = counter
            return self._untruncated

    def count_tokens(self, text: str) -> int:
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return [
            len(e.ids) for e in self._counter.encode_batch(list(texts), add_special_tokens=False)
        ]

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids, truncated to the window. The tokenizer truncates only after encoding
        all of a text, so a text is first cut to a length its window cannot exceed."""
        cap = self.max_tokens * CHARS_PER_TOKEN
        return [e.ids for e in self._tokenizer.encode_batch([t[:cap] for t in texts])]

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in input order; sorted by length inside so each batch pads little."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.embed_ids(self.tokenize(texts))

    def embed_ids(self, ids: Sequence[list[int]]) -> np.ndarray:
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        for idx in length_batches([len(x) for x in ids], self.batch_tokens, self.max_batch):
            out[idx] = self._run([ids[i] for i in idx])
        return out

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        width = max(len(x) for x in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, seq in enumerate(batch):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        hidden = self._session.run(None, feeds)[0]
        if self.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        real = int(mask.sum())
        with self._lock:
            self.stats.real += real
            self.stats.padded += mask.size - real
        unit: np.ndarray = pooled / np.maximum(norms, 1e-12)
        if not np.isfinite(unit).all():  # a sound model never gives them: never store them
            bad = int((~np.isfinite(unit).all(axis=1)).sum())
            raise ConfigError(
                f"the embedding model {self._model_file} gave vectors that are not finite "
                f"(NaN or Inf) for {bad} of {len(batch)} texts; its file is damaged: "
                f"install it again, or point {MODEL_DIR.name} at a good copy"
            )
        return unit


def _hidden_width(session: ort.InferenceSession, path: Path) -> int:
    """The width of the token states the model's first output holds: an embedder's export
    gives [batch, tokens, width] (`last_hidden_state`); a pooled or classifier output cannot
    be mean-pooled here, so it is refused at load rather than at the first batch. An export
    whose width is a symbol is asked once, with a one-token text."""
    output = session.get_outputs()[0]
    shape = list(output.shape)
    if len(shape) != 3:
        raise ConfigError(
            f"{path}: its first output {output.name} has shape {shape}; an embedding model "
            "needs token states [batch, tokens, width] (last_hidden_state) first"
        )
    if isinstance(shape[-1], int):
        return shape[-1]
    one = np.ones((1, 1), dtype=np.int64)
    feeds = {i.name: one for i in session.get_inputs()}
    try:
        return int(session.run([output.name], feeds)[0].shape[-1])
    except Exception as exc:
        raise ConfigError(f"{path}: cannot run it on a one-token text: {exc}") from exc


def _device_session(
    path: Path,
    asked: str,
    threads: int | None,
    graphs: Path | None = None,
    prepack: bool = True,
    int8_matmul: bool = False,
) -> tuple[ort.InferenceSession, str]:
    """A session on the device asked for when it can be had, else on the CPU (embed.device).

    onnxruntime may start a session with the CUDA provider listed and still fall back to the
    CPU on its own (no GPU, no driver): the providers it actually took decide.
    """
    import onnxruntime as ort

    choice = choose_device(asked, ort.get_available_providers())
    if choice.device == "cuda":
        try:
            session = onnx_session(path, threads, choice.providers, int8_matmul=int8_matmul)
        except ConfigError as exc:
            choice = fallback(choice, f"CUDA provider could not start ({exc})")
        else:
            if session.get_providers()[:1] == [CUDA]:
                announce(choice, warning_line, log_info)
                return session, "cuda"
            # onnxruntime fell back to the CPU by itself: that session serves as it is.
            announce(fallback(choice, "CUDA provider found no usable GPU"), warning_line, log_info)
            return session, "cpu"
    announce(choice, warning_line, log_info)
    session = onnx_session(path, threads, graphs=graphs, prepack=prepack, int8_matmul=int8_matmul)
    return session, "cpu"


def length_batches(lengths: Sequence[int], batch_tokens: int, max_batch: int) -> list[list[int]]:
    """Indices grouped shortest first, each group padded to at most `batch_tokens` tokens.

    Sorting by length keeps padding low; the token cap keeps each ONNX run small. A
    sequence longer than the cap still gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[i]  # the longest so far, since the order is ascending
        if current and ((len(current) + 1) * width > batch_tokens or len(current) >= max_batch):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
