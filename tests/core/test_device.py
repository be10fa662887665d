"""Where the model runs: the choice of providers, and the CPU fallback (no GPU here)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gbr.core.embed.device import CPU, CUDA, DEVICE_BATCHES, check_device, choose_device
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.embed.model_files import resolve_model_files
from gbr.core.errors import ConfigError


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


@pytest.mark.parametrize(("asked", "lines"), [("auto", 0), ("cuda", 1)])
def test_without_a_gpu_the_model_runs_on_the_cpu(
    asked: str, lines: int, model: OnnxEmbedder, tmp_path
) -> None:
    """`auto` says nothing on stderr; an explicit `cuda` says why in one line, then works."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD, asked], capture_output=True, timeout=120, check=True
    )
    stderr = done.stderr.decode().splitlines()
    warned = [line for line in stderr if "--device cuda" in line]
    assert len(warned) == lines
    if lines:
        assert warned[0] == (
            "warning: --device cuda: CUDA provider not installed (pip install onnxruntime-gpu); "
            "using CPU"
        )
    assert stderr[-1] == "cpu"
    (tmp_path / "v.npy").write_bytes(done.stdout)
    vector = np.load(tmp_path / "v.npy")
    assert np.allclose(vector, model.embed_batch(["pub fn add(a: Int, b: Int) -> Int"]), atol=1e-6)


def test_a_bad_device_is_refused_before_anything_loads() -> None:
    with pytest.raises(ConfigError, match="not 'tpu'"):
        OnnxEmbedder(resolve_model_files(), device="tpu")
