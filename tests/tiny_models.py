"""Tiny but real models for tests: built in milliseconds, run by the real onnxruntime.

The cross-encoder here is no neural net, but it has the exact interface of an exported
BERT cross-encoder (ms-marco-MiniLM style): three int64 inputs, a `logits` [batch, 1]
output and a `tokenizer.json` whose pair template sets type ids 0/1. Its score is a
lexical overlap we can compute by hand, so tests can assert exact numbers and orders.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

# Ids 0..3 are the special tokens; the model never counts them, so [SEP] (present in both
# segments) and [UNK] (any two unknown words) do not look like shared words.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
WORDS = (
    "parse",
    "json",
    "string",
    "int",
    "float",
    "list",
    "map",
    "filter",
    "fold",
    "sort",
    "reverse",
    "user",
    "decode",
    "encode",
    "error",
    "result",
    "http",
    "request",
    "response",
    "fn",
    "pub",
)
VOCAB: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + WORDS)}

# Opset 17 with IR 8 is old enough for any onnxruntime we support and has every op used.
OPSET = 17
IR_VERSION = 8


def build_tiny_cross_encoder(dir: Path, seq_len: int | None = None) -> Path:
    """Write `model.onnx` and `tokenizer.json` into `dir` and return `dir`.

    Score of a (query, passage) pair = how many passage tokens (type id 1, mask 1, not
    special) equal some query token (type id 0, mask 1, not special), as a float.
    A fixed `seq_len` makes onnxruntime reject longer inputs, the way a model exported
    without dynamic axes does; tests use it to make the backend fail for real.
    """
    dir.mkdir(parents=True, exist_ok=True)
    model = _overlap_model(seq_len)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(dir / "model.onnx"))
    _tokenizer().save(str(dir / "tokenizer.json"))
    return dir


def _overlap_model(seq_len: int | None) -> onnx.ModelProto:
    seq: str | int = "seq" if seq_len is None else seq_len
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", seq])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    constants = [
        helper.make_tensor("last_special", TensorProto.INT64, [], [len(SPECIAL_TOKENS) - 1]),
        helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
    ]
    graph = helper.make_graph(
        _overlap_nodes(), "tiny_cross_encoder", inputs, [output], initializer=constants
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="gbr-tests",
    )


def _overlap_nodes() -> list[onnx.NodeProto]:
    """Masks for each segment, an [S, S] token-equality matrix, any-match, count."""
    node = helper.make_node
    return [
        # Which positions hold real, non-special tokens of each segment.
        node("Greater", ["input_ids", "last_special"], ["is_word"]),
        node("Cast", ["attention_mask"], ["is_real"], to=TensorProto.BOOL),
        node("Cast", ["token_type_ids"], ["in_second"], to=TensorProto.BOOL),
        node("Not", ["in_second"], ["in_first"]),
        node("And", ["is_real", "is_word"], ["real_word"]),
        node("And", ["real_word", "in_first"], ["query_pos_b"]),
        node("And", ["real_word", "in_second"], ["passage_pos_b"]),
        node("Cast", ["query_pos_b"], ["query_pos"], to=TensorProto.FLOAT),
        node("Cast", ["passage_pos_b"], ["passage_pos"], to=TensorProto.FLOAT),
        # same[b, i, j] = ids[b, i] == ids[b, j]
        node("Unsqueeze", ["input_ids", "axis2"], ["ids_col"]),
        node("Unsqueeze", ["input_ids", "axis1"], ["ids_row"]),
        node("Equal", ["ids_col", "ids_row"], ["same_b"]),
        node("Cast", ["same_b"], ["same"], to=TensorProto.FLOAT),
        # matched[b, j] = 1 when some query position i holds the token at j.
        node("Unsqueeze", ["query_pos", "axis2"], ["query_col"]),
        node("Mul", ["same", "query_col"], ["same_in_query"]),
        node("ReduceMax", ["same_in_query"], ["matched"], axes=[1], keepdims=0),
        # logits[b, 0] = number of passage positions whose token was matched.
        node("Mul", ["matched", "passage_pos"], ["counted"]),
        node("ReduceSum", ["counted", "axis1"], ["logits"], keepdims=1),
    ]


def _tokenizer() -> Tokenizer:
    """BERT-shaped WordLevel tokenizer: `[CLS] A [SEP] B [SEP]`, type ids 0 then 1."""
    tokenizer = Tokenizer(models.WordLevel(vocab=VOCAB, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", VOCAB["[CLS]"]), ("[SEP]", VOCAB["[SEP]"])],
    )
    return tokenizer


# The tiny embedder's width: one number per word of its vocabulary.
EMBED_WIDTH = len(VOCAB)


def build_tiny_embedder(dir: Path, width_known: bool = True) -> Path:
    """Write an embedding model's `model.onnx` and `tokenizer.json` into `dir`, return `dir`.

    Shaped like a BERT export (`input_ids`, `attention_mask`, `token_type_ids` in, a
    `last_hidden_state` [batch, tokens, width] out): each word's state is its one-hot row,
    special and unknown tokens' are zero, and padding is masked out, so after gbr's mean
    pooling a text's vector is its bag of known words, and the cosine of two texts is
    plain word overlap that a test can work out by hand. The bytes are the same every run.
    `width_known=False` tiles the states by a count read from the mask at run time (1 for
    any real text), so the file cannot say its width, as some exports do not.
    """
    import numpy as np

    dir.mkdir(parents=True, exist_ok=True)
    table = np.eye(len(VOCAB), EMBED_WIDTH)
    table[: len(SPECIAL_TOKENS)] = 0.0
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info(
        "last_hidden_state",
        TensorProto.FLOAT,
        ["batch", "seq", EMBED_WIDTH if width_known else "width"],
    )
    initializers = [
        helper.make_tensor(
            "table", TensorProto.FLOAT, list(table.shape), table.astype("float32").ravel()
        ),
        helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
        helper.make_tensor("ones2", TensorProto.INT64, [2], [1, 1]),
        helper.make_tensor("flat", TensorProto.INT64, [1], [1]),
    ]
    node = helper.make_node
    tile = [
        node("ReduceMax", ["attention_mask"], ["most"], keepdims=1),
        node("Reshape", ["most", "flat"], ["times"]),
        node("Concat", ["ones2", "times"], ["repeats"], axis=0),
        node("Tile", ["masked", "repeats"], ["last_hidden_state"]),
    ]
    nodes = [
        node("Gather", ["table", "input_ids"], ["states"], axis=0),
        node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        node("Unsqueeze", ["mask", "axis2"], ["mask3"]),
        node("Mul", ["states", "mask3"], ["masked" if not width_known else "last_hidden_state"]),
        *(tile if not width_known else []),
    ]
    graph = helper.make_graph(nodes, "tiny_embedder", inputs, [output], initializer=initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="gbr-tests",
    )
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(dir / "model.onnx"))
    _tokenizer().save(str(dir / "tokenizer.json"))
    return dir
