"""The default model multiplies its int8 weights in int8: every weight product rewritten,
vectors close to the float ones, and a graph without the pattern left alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.embed.int8_matmul import activation_names, int8_model_bytes, rewrite, shipped_ranges
from gbr.core.embed.model_files import ModelFiles, resolve_model_files

EXAMPLE = Path(__file__).resolve().parents[2] / "examples"


def _texts() -> list[str]:
    """Real chunks of code and a few questions, in batches of mixed length."""
    code = [p.read_text()[:900] for p in sorted(EXAMPLE.rglob("*.gleam"))[:40]]
    return [*code, "check that an ISBN is valid", "how do I route a request?", "x"]


def test_every_weight_product_of_the_default_model_is_int8() -> None:
    files = resolve_model_files()
    assert files.int8_matmul
    original = onnx.load(str(files.onnx))
    weight_products = sum(1 for n in original.graph.node if n.op_type == "MatMul")
    rewritten = onnx.load_from_string(int8_model_bytes(str(files.onnx)))
    ops = [n.op_type for n in rewritten.graph.node]
    # 6 layers x (query, key, value, output, two feed-forward) = 36; the 12 products of
    # activations with activations (attention scores and their mix) stay float.
    assert ops.count("MatMulIntegerToFloat") == 36
    assert ops.count("MatMul") == weight_products - 36 == 12
    # The Cast and Mul that made each float weight are gone.
    assert ops.count("Cast") == [n.op_type for n in original.graph.node].count("Cast") - 36
    int8_bytes = sum(
        len(i.raw_data) for i in rewritten.graph.initializer if i.data_type == TensorProto.INT8
    )
    assert int8_bytes > 20_000_000  # the embedding table and 36 matrices, still int8


def test_int8_vectors_stay_close_to_the_float_ones() -> None:
    files = resolve_model_files()
    as_float = OnnxEmbedder(ModelFiles(files.onnx, files.tokenizer, "float"))
    as_int8 = OnnxEmbedder(files)
    texts = _texts()
    cosine = (as_float.embed_batch(texts) * as_int8.embed_batch(texts)).sum(axis=1)
    assert cosine[:-1].min() > 0.975
    assert cosine[-1] > 0.95  # "x": one token, the least to average over
    assert cosine.mean() > 0.99
    # Still unit vectors, and each text's nearest float vector is its own.
    vectors = as_int8.embed_batch(texts)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    nearest = (vectors @ as_float.embed_batch(texts).T).argmax(axis=1)
    assert list(nearest) == list(range(len(texts)))


def test_a_text_gets_its_own_vector_whatever_is_batched_beside_it() -> None:
    """Fixed input ranges: with each batch's own range, a text alone and the same text in a
    batch differed by up to 0.02 in cosine."""
    model = OnnxEmbedder(resolve_model_files())
    texts = _texts()
    batched = model.embed_batch(texts)
    alone = np.stack([model.embed_batch([t])[0] for t in texts])
    np.testing.assert_allclose(alone, batched, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(model.embed_batch(texts), batched)  # and run after run


def test_the_shipped_ranges_cover_every_int8_product_of_the_default_model() -> None:
    files = resolve_model_files()
    names = activation_names(onnx.load(str(files.onnx)))
    ranges = shipped_ranges()
    assert sorted(ranges) == names and len(names) == 24  # 6 layers x 4 distinct inputs
    assert all(low < 0 < high for low, high in ranges.values())
    rewritten = onnx.load_from_string(int8_model_bytes(str(files.onnx)))
    ops = [n.op_type for n in rewritten.graph.node]
    assert ops.count("QuantizeLinear") == 24 and "DynamicQuantizeLinear" not in ops


def test_an_input_without_a_range_is_quantised_per_run() -> None:
    files = resolve_model_files()
    model = onnx.load(str(files.onnx))
    ranges = dict(shipped_ranges())
    ranges.pop("layer_norm")  # the first layer's query, key and value input
    assert rewrite(model, ranges) == 36
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("QuantizeLinear") == 23 and ops.count("DynamicQuantizeLinear") == 1


def test_a_graph_without_int8_weights_is_left_as_it_is(tmp_path: Path) -> None:
    weight = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    before = model.SerializeToString()
    assert rewrite(model) == 0
    assert model.SerializeToString() == before


def test_a_scale_of_the_wrong_shape_is_left_as_it_is() -> None:
    """Per-column scales only: a scale that is not one value per column is not rewritten,
    and the rewritten graph still runs (no dangling name)."""
    q = numpy_helper.from_array(np.arange(-8, 8, dtype=np.int8).reshape(4, 4), "q")
    good = numpy_helper.from_array(np.full((1, 4), 0.5, dtype=np.float32), "good")
    odd = numpy_helper.from_array(np.full((4, 1), 0.5, dtype=np.float32), "odd")  # per row
    nodes = [
        helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["qf", "good"], ["w1"]),
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="first"),
        helper.make_node("Cast", ["q"], ["qf2"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["odd", "qf2"], ["w2"]),
        helper.make_node("MatMul", ["h", "w2"], ["y"], name="second"),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [q, good, odd],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert rewrite(model) == 1
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMulIntegerToFloat") == 1 and ops.count("MatMul") == 1
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=0.05, atol=0.05)
