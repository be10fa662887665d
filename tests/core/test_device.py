"""Where the model runs: the choice of providers, and the CPU fallback. The choice is tested
with the providers given; the real load checks what this machine's onnxruntime offers, so
it holds with or without a GPU runtime installed."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gbr.core.embed.device import (
    CPU,
    CUDA,
    DEVICE_BATCHES,
    announce,
    check_device,
    choose_device,
    fallback,
)
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.embed.model_files import resolve_model_files
from gbr.core.errors import ConfigError
from tests.conftest import NO_CUDA_WARNING, check_cuda_warnings


def test_the_choice_follows_what_onnxruntime_offers() -> None:
    assert choose_device("cpu", [CUDA, CPU]).providers == (CPU,)
    gpu = choose_device("auto", [CUDA, CPU])
    assert (gpu.device, gpu.providers, gpu.reason) == ("cuda", (CUDA, CPU), None)
    assert choose_device("CUDA", [CUDA, CPU]).device == "cuda"
    for asked in ("auto", "cuda"):
        cpu = choose_device(asked, [CPU])
        assert (cpu.device, cpu.providers) == ("cpu", (CPU,))
        assert cpu.reason == "CUDA provider not installed (pip install onnxruntime-gpu)"
    with pytest.raises(ConfigError, match="--device must be auto, cpu or cuda, not 'gpu'"):
        check_device("gpu")


def test_each_device_has_its_batch_shape(model: OnnxEmbedder) -> None:
    assert (model.device, model.batch_tokens, model.max_batch) == ("cpu", *DEVICE_BATCHES["cpu"])
    assert DEVICE_BATCHES["cuda"][0] > DEVICE_BATCHES["cpu"][0]


LOAD = """
import sys
import numpy as np
from gbr.core import telemetry
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.embed.model_files import resolve_model_files
telemetry.configure(None)  # as the CLI does: events to their file, none on stdout
model = OnnxEmbedder(resolve_model_files(), device=sys.argv[1])
np.save(sys.stdout.buffer, model.embed_batch(["pub fn add(a: Int, b: Int) -> Int"]))
print(model.device, file=sys.stderr)
"""


def test_only_an_explicit_cuda_that_falls_back_says_so() -> None:
    """`auto` on the CPU is no news; `cuda` that cannot be had is one line naming why."""
    for asked, available, lines in (
        ("auto", [CPU], []),
        ("cpu", [CUDA, CPU], []),
        ("cuda", [CPU], [NO_CUDA_WARNING.removeprefix("warning: ")]),
        ("auto", [CUDA, CPU], []),
        ("cuda", [CUDA, CPU], []),
    ):
        warned: list[str] = []
        announce(choose_device(asked, available), warned.append, lambda *_, **__: None)
        assert warned == lines, (asked, available)
    warned = []
    no_gpu = fallback(choose_device("cuda", [CUDA, CPU]), "CUDA provider found no usable GPU")
    announce(no_gpu, warned.append, lambda *_, **__: None)
    assert warned == ["--device cuda: CUDA provider found no usable GPU; using CPU"]


@pytest.mark.parametrize("asked", ["auto", "cuda"])
def test_the_model_runs_where_onnxruntime_can_and_on_the_cpu_otherwise(
    asked: str, model: OnnxEmbedder, tmp_path
) -> None:
    """A real load in a fresh process: the device it ran on, what it said on stderr, and
    the vector, which is the CPU model's (within float error on a GPU)."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD, asked], capture_output=True, timeout=120, check=True
    )
    stderr = done.stderr.decode().splitlines()
    device = stderr[-1]
    warned = [line for line in stderr if "--device cuda" in line]
    assert device in ("cpu", "cuda")
    if asked == "auto" or device == "cuda":
        assert warned == []
    else:
        assert len(warned) == 1, stderr
        check_cuda_warnings(warned)
    (tmp_path / "v.npy").write_bytes(done.stdout)
    vector = np.load(tmp_path / "v.npy")
    expected = model.embed_batch(["pub fn add(a: Int, b: Int) -> Int"])
    assert np.allclose(vector, expected, atol=1e-6 if device == "cpu" else 1e-3)


def test_a_bad_device_is_refused_before_anything_loads() -> None:
    with pytest.raises(ConfigError, match="not 'tpu'"):
        OnnxEmbedder(resolve_model_files(), device="tpu")
