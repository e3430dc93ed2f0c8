"""GPU facts for the pipeline analysis: NVML utilisation sampling and model layout checks.

Contract:

- :func:`open_nvml` returns an :class:`Nvml` handle, or ``None`` with a reason when there is no
  usable GPU (``pynvml`` missing, no driver, no device). Nothing here raises on a CPU-only
  machine.
- :class:`UtilSampler` samples GPU utilisation (percent) in a daemon thread between ``start()``
  and ``stop()`` (again and again: samples accumulate); ``summary()`` returns
  ``{"samples": n, "mean_util": float|None, "max_util"}``.
- :func:`model_checks` inspects a Keras model's layers (no GPU needed): convolution
  ``data_format`` values and batch normalisation layers, with advice.
- :func:`no_gpu` is the report section for a machine without a usable GPU.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any


@dataclass
class Nvml:
    """An initialised NVML session and the handles of its devices."""

    module: Any
    handles: list[Any]
    names: list[str]

    def utilization(self) -> list[float]:
        """Current GPU utilisation of each device, percent."""
        return [float(self.module.nvmlDeviceGetUtilizationRates(h).gpu) for h in self.handles]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.module.nvmlShutdown()


def open_nvml() -> tuple[Nvml | None, str]:
    """``(handle, "")`` when NVML sees a GPU, else ``(None, reason)``."""
    try:
        import pynvml
    except ImportError:
        return None, "no GPU (nvidia-ml-py is not installed)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, f"no GPU (NVML: {exc})"
    try:
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        names = [_text(pynvml.nvmlDeviceGetName(h)) for h in handles]
    except Exception as exc:
        pynvml.nvmlShutdown()
        return None, f"no GPU (NVML: {exc})"
    if not handles:
        pynvml.nvmlShutdown()
        return None, "no GPU (NVML found no device)"
    return Nvml(pynvml, handles, names), ""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class UtilSampler:
    """Samples the highest per-device utilisation every ``interval_s`` in a daemon thread."""

    def __init__(self, nvml: Nvml, interval_s: float = 0.05) -> None:
        self._nvml = nvml
        self._interval = interval_s
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="tfperf-nvml", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._samples.append(max(self._nvml.utilization()))
            except Exception:
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def summary(self) -> dict:
        s = self._samples
        return {
            "samples": len(s),
            "mean_util": sum(s) / len(s) if s else None,
            "max_util": max(s) if s else None,
        }


def model_checks(model: Any, on_gpu: bool) -> dict:
    """Layout and batch-norm facts about a Keras ``model`` with advice (empty without a model)."""
    if model is None:
        return {
            "data_formats": [],
            "batchnorm_layers": 0,
            "fused_batchnorm_layers": 0,
            "advice": [],
        }
    formats: set[str] = set()
    batchnorm = 0
    fused_layers = 0
    for layer in _layers(model):
        fmt = getattr(layer, "data_format", None)
        if isinstance(fmt, str) and "Conv" in type(layer).__name__:
            formats.add(fmt)
        if "BatchNormalization" in type(layer).__name__:
            batchnorm += 1
            fused_layers += bool(getattr(layer, "fused", False))
    advice = []
    if on_gpu and "channels_first" in formats:
        advice.append(
            "convolutions use channels_first (NCHW); with mixed precision on Tensor Cores "
            "channels_last (NHWC) avoids layout transposes"
        )
    if not on_gpu and "channels_first" in formats:
        advice.append("channels_first (NCHW) convolutions are slow on CPU; use channels_last")
    if batchnorm:
        fused = "the FusedBatchNorm kernel" if fused_layers == batchnorm else "elementwise ops"
        advice.append(
            f"{batchnorm} BatchNormalization layer(s) computed with {fused}; compile the model "
            "with jit_compile=True so that XLA fuses normalisation into the convolutions"
        )
    return {
        "data_formats": sorted(formats),
        "batchnorm_layers": batchnorm,
        "fused_batchnorm_layers": fused_layers,
        "advice": advice,
    }


def _layers(model: Any) -> list[Any]:
    found = []
    for layer in getattr(model, "layers", []):
        found.append(layer)
        if getattr(layer, "layers", None):
            found.extend(_layers(layer))
    return found


def no_gpu(reason: str, checks: dict) -> dict:
    """The ``gpu`` report section for a machine without a usable GPU."""
    return {
        "available": False,
        "reason": reason,
        "devices": [],
        "utilization": None,
        "bound": None,
        "model": checks,
    }
