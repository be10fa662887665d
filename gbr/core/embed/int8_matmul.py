"""The default model's int8 weights, multiplied in int8.

The default MiniLM file stores each weight matrix as int8 with one scale per column, but
behind Cast and Mul nodes that feed an ordinary float MatMul. onnxruntime folds those nodes
into float32 weights when it optimises the graph, so the model ran as a float model: its
6 layers took longer per query than the 12 of the second opinion's bge-small, whose file
multiplies in int8. Here each such MatMul becomes a QuantizeLinear of its input and a
MatMulIntegerToFloat over the stored int8 weights and scales, the form onnxruntime's own
quantisation makes (figures: README, "The default model runs in int8").

Each input is quantised with a fixed range (`RANGES_FILE`, calibrated by
bench/experiments/calibrate_int8.py on what the model reads in use), not with the range of the batch
at hand as DynamicQuantizeLinear does: with the batch's range, a text's vector moved with
the texts batched beside it (cosine 0.979 at worst to the same text alone), so the same
chunk got another vector when indexed in another company. With fixed ranges a text's
vector is its own, batched or alone, and the vectors are as close to the float ones
(cosine 0.994 on average either way). A value beyond its range is clipped to it.

Only the exact pattern is rewritten (int8 initializer -> Cast -> Mul by a float scale of
one value per column -> MatMul's weight); anything else in a graph is left as it is.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from gbr.core.paths import DATA_DIR

if TYPE_CHECKING:
    from collections.abc import Mapping

    import onnx

    Ranges = Mapping[str, tuple[float, float]]

MS_DOMAIN = "com.microsoft"
# Made by bench/experiments/calibrate_int8.py for the default model.
RANGES_FILE = DATA_DIR / "minilm-gleam-int8-ranges.json"


def int8_model_bytes(path: str, ranges: Ranges | None = None) -> bytes:
    """The model at `path` with its int8 weights multiplied in int8, its inputs quantised
    with `ranges` (default: the default model's calibrated ones), serialised for a session;
    the file itself is not changed."""
    import onnx

    model = onnx.load(path)
    rewrite(model, shipped_ranges() if ranges is None else ranges)
    return bytes(model.SerializeToString())


def shipped_ranges() -> dict[str, tuple[float, float]]:
    """The calibrated input ranges of the default model's int8 products."""
    data = json.loads(RANGES_FILE.read_text())
    return {name: (float(low), float(high)) for name, (low, high) in data["ranges"].items()}


def activation_names(model: onnx.ModelProto) -> list[str]:
    """The inputs of the products `rewrite` makes int8, each once, sorted."""
    return sorted({node.input[0] for node, _, _ in _int8_products(model.graph)})


def rewrite(model: onnx.ModelProto, ranges: Ranges | None = None) -> int:
    """Rewrites `model` in place; returns how many MatMuls now multiply in int8.

    `ranges`: a fixed (low, high) for the input of the products by that input's name; such
    an input is quantised with the same scale in every run, others with their run's own."""
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    quantised: dict[str, list[str]] = {}  # activation -> its int8 value, scale, zero point
    replaced: dict[str, list[onnx.NodeProto]] = {}  # by the product's output name
    for node, q_name, scale_init in _int8_products(graph):
        scale = numpy_helper.to_array(scale_init).astype(np.float32).reshape(-1)
        column_scale = numpy_helper.from_array(scale, f"{node.name}/weight_scale")
        graph.initializer.append(column_scale)
        activation = node.input[0]
        new: list[onnx.NodeProto] = []
        if activation not in quantised:
            quantised[activation] = [f"{activation}/{part}" for part in ("u8", "scale", "zero")]
            new.extend(_quantise(activation, quantised[activation], (ranges or {}).get(activation)))
        a_u8, a_scale, a_zero = quantised[activation]
        new.append(
            helper.make_node(
                "MatMulIntegerToFloat",
                [a_u8, q_name, a_scale, column_scale.name, a_zero],
                [node.output[0]],
                name=f"{node.name}/int8",
                domain=MS_DOMAIN,
            )
        )
        replaced[node.output[0]] = new
    if not replaced:
        return 0
    nodes = [
        new
        for node in graph.node
        for new in (replaced.get(node.output[0], [node]) if node.op_type == "MatMul" else [node])
    ]
    # Copies: clearing the graph's node list empties the messages still held from it.
    alive = [_copied(node) for node in _alive(nodes, {o.name for o in graph.output})]
    del graph.node[:]
    graph.node.extend(alive)
    used = {name for node in graph.node for name in node.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(op.domain == MS_DOMAIN for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return len(replaced)


def _quantise(
    activation: str, outputs: list[str], fixed: tuple[float, float] | None
) -> list[onnx.NodeProto]:
    """Nodes that make `outputs` (uint8 value, scale, zero point) of `activation`: with its
    run's own range, or with `fixed`, the way DynamicQuantizeLinear maps a range."""
    import numpy as np
    from onnx import helper, numpy_helper

    if fixed is None:
        return [helper.make_node("DynamicQuantizeLinear", [activation], outputs)]
    low, high = min(fixed[0], 0.0), max(fixed[1], 0.0)
    scale = np.float32((high - low) / 255 or 1.0)
    zero = np.uint8(np.clip(np.round(-low / scale), 0, 255))
    value, scale_name, zero_name = outputs
    return [
        helper.make_node(
            "Constant", [], [scale_name], value=numpy_helper.from_array(np.array(scale))
        ),
        helper.make_node(
            "Constant", [], [zero_name], value=numpy_helper.from_array(np.array(zero))
        ),
        helper.make_node("QuantizeLinear", [activation, scale_name, zero_name], [value]),
    ]


def _int8_products(graph: onnx.GraphProto) -> list[tuple[onnx.NodeProto, str, onnx.TensorProto]]:
    """(MatMul, its int8 weight's name, the weight's scale) for every product of this form,
    with one scale per column (per row, or one in all, is not this form), in graph order."""
    inits = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    found = []
    for node in graph.node:
        weight = _int8_weight(node, producer, inits)
        if weight is None:
            continue
        q_name, scale_name = weight
        columns = int(inits[q_name].dims[-1])
        if list(inits[scale_name].dims) in ([columns], [1, columns]):
            found.append((node, q_name, inits[scale_name]))
    return found


def _int8_weight(
    node: onnx.NodeProto,
    producer: dict[str, onnx.NodeProto],
    inits: dict[str, onnx.TensorProto],
) -> tuple[str, str] | None:
    """(int8 initializer, scale initializer) when `node` is a MatMul whose weight is
    Cast(int8) times a float scale; else None."""
    from onnx import TensorProto

    if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx"):
        return None
    mul = producer.get(node.input[1])
    if mul is None or mul.op_type != "Mul" or len(mul.input) != 2:
        return None
    first, second = mul.input
    for cast_out, scale in ((first, second), (second, first)):
        cast = producer.get(cast_out)
        if cast is None or cast.op_type != "Cast" or scale not in inits:
            continue
        source = inits.get(cast.input[0])
        if (
            source is not None
            and source.data_type == TensorProto.INT8
            and len(source.dims) == 2
            and inits[scale].data_type == TensorProto.FLOAT
        ):
            return source.name, scale
    return None


def _copied(node: onnx.NodeProto) -> onnx.NodeProto:
    from onnx import NodeProto

    made = NodeProto()
    made.CopyFrom(node)
    return made


def _alive(nodes: list[onnx.NodeProto], outputs: set[str]) -> list[onnx.NodeProto]:
    """`nodes` without those whose results nothing reads any more (the Cast and Mul that
    made float weights), in their order."""
    alive = list(nodes)
    while True:
        read = outputs | {name for node in alive for name in node.input}
        keep = [node for node in alive if any(out in read for out in node.output)]
        if len(keep) == len(alive):
            return keep
        alive = keep
