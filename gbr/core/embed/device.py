"""Where the embedding model runs: the CPU, or a CUDA GPU when onnxruntime can reach one.

`auto` takes the GPU when the CUDA provider is installed (the `onnxruntime-gpu` package) and
starts on a device, and the CPU otherwise, saying why only in telemetry: most machines have
no GPU, and that is no news. An explicit `cuda` that cannot be had costs one warning line,
and the run goes on on the CPU: indexing slower beats not indexing, and the line names the
fix. Each device gets its own batch shape (see DEVICE_BATCHES).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gbr.core.environ import DEVICE
from gbr.core.errors import ConfigError
from gbr.core.settings import DEVICES

DEVICE_ENV = DEVICE.name
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
# (padded tokens per ONNX run, texts per run). CPU: small runs are faster and keep the
# arena small (gbr.core.embed.embedder). A GPU wants wide runs to fill its cores; 16k tokens is
# 64 texts at the full 256-token window, a few hundred MB of activations for MiniLM.
DEVICE_BATCHES = {"cpu": (1024, 64), "cuda": (16384, 256)}


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    """What to try: `providers` in order of preference, `reason` why the GPU is not among them."""

    asked: str
    device: str  # "cpu" or "cuda"
    providers: tuple[str, ...]
    reason: str | None = None


def check_device(text: str) -> str:
    """`text` as a device name, or a ConfigError naming the choices."""
    device = text.strip().lower()
    if device not in DEVICES:
        raise ConfigError(f"--device must be auto, cpu or cuda, not {text!r}")
    return device


def choose_device(asked: str, available: Sequence[str]) -> DeviceChoice:
    """The providers for `asked` given those onnxruntime was built with (pure: no session)."""
    asked = check_device(asked)
    if asked == "cpu":
        return DeviceChoice(asked, "cpu", (CPU,))
    if CUDA not in available:
        why = "CUDA provider not installed (pip install onnxruntime-gpu)"
        return DeviceChoice(asked, "cpu", (CPU,), why)
    return DeviceChoice(asked, "cuda", (CUDA, CPU))


def fallback(choice: DeviceChoice, reason: str) -> DeviceChoice:
    """The CPU after the GPU was chosen but would not start."""
    return DeviceChoice(choice.asked, "cpu", (CPU,), reason)


def announce(choice: DeviceChoice, warn: Callable[[str], None], info: Callable[..., Any]) -> None:
    """One line when an explicit `cuda` falls back; else a telemetry event, unless the CPU
    was asked for (`search` loads the model that way, and configures no events)."""
    if choice.asked != "cpu":
        info("embed_device", asked=choice.asked, device=choice.device, reason=choice.reason)
    if choice.asked == "cuda" and choice.reason is not None:
        warn(f"--device cuda: {choice.reason}; using CPU")
