"""``BottleneckCallback``: the input-bound diagnosis from a real ``model.fit`` run.

Keras 3 pulls each batch inside its compiled train step, so a callback cannot time the wait for
input directly. This one records the wall time between consecutive ``on_train_batch_end``
calls (the real step, input included; the first ``skip_steps`` of every epoch are left out as
warm-up), and after every epoch (by default) replays the compute alone: ``model.fit`` on one
cached batch, repeated, timed the same way, with the model's and optimizer's variables (and
``model.history``) saved before and restored after, so the replay does not change the
training. Each replay is paired with the epoch's real steps, so drift cancels out of each
pair. The input share is ``1 - compute / real``, judged with TensorFlow profiler's thresholds
(see :mod:`tfperf.core.inputbound`).

Contract: when training ends (or after the epoch named by ``replay``) ``cb.report`` holds a
dict of the same shape as ``tfperf pipeline --json`` (fields that need the pipeline's
structure -- stages, fixes, best_fix -- are empty or ``None``) and, with ``verbose``, one line
with the verdict is printed. With a single replay (``replay="end"`` or one epoch) the share
rests on one pair and ``report["notes"]`` says so. This module runs in the user's training
process.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import keras

from tfperf.core import gpu as gpu_mod
from tfperf.core.inputbound import classify, input_share, one_line, verdict


def _one_batch(data: Any) -> Any:
    """The first batch of a ``tf.data.Dataset`` (or any iterable of batches), or ``data``."""
    import tensorflow as tf

    if isinstance(data, tf.data.Dataset):
        return next(iter(data.take(1)))
    return data


class _StepTimer(keras.callbacks.Callback):
    """Wall time between consecutive step ends, per step, skipping each epoch's first steps."""

    def __init__(self, skip_steps: int) -> None:
        super().__init__()
        self.skip_steps = skip_steps
        self.step_s: list[float] = []
        self._last: float | None = None
        self._seen = 0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._last = None
        self._seen = 0

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        now = time.perf_counter()
        self._seen += 1
        if self._last is not None and self._seen > self.skip_steps:
            spe = int(getattr(self.model, "steps_per_execution", 1) or 1)
            self.step_s.append((now - self._last) / spe)
        self._last = now


class BottleneckCallback(keras.callbacks.Callback):
    """Tell whether ``model.fit`` waits for its input; see the module docstring.

    ``data`` is the training dataset (its first batch is cached for the replay) or one batch
    ``(x, y)`` / ``(x, y, sample_weight)``. ``replay`` says when the compute-only replay of
    ``replay_steps`` steps runs: ``"epoch"`` (after every epoch, each replay paired with that
    epoch's real steps), ``"end"`` (once, after training) or an epoch number (once, after that
    epoch; later steps are not recorded).
    """

    def __init__(
        self,
        data: Any,
        *,
        replay_steps: int = 20,
        skip_steps: int = 2,
        replay: str | int = "epoch",
        verbose: bool = True,
    ) -> None:
        super().__init__()
        if replay_steps < 1:
            raise ValueError("replay_steps must be at least 1")
        if replay not in ("epoch", "end") and not isinstance(replay, int):
            raise ValueError("replay must be 'epoch', 'end' or an epoch number")
        self._data = data
        self.replay_steps = replay_steps
        self.skip_steps = skip_steps
        self.replay_at = replay
        self.verbose = verbose
        self.pairs: list[tuple[list[float], list[float]]] = []
        """(real step times, compute-only step times) of each replay and the steps before it."""
        self.report: dict | None = None
        self._timer = _StepTimer(skip_steps)
        self._since = 0
        self._nvml: Any = None
        self._sampler: gpu_mod.UtilSampler | None = None
        self._gpu_reason = ""

    @property
    def step_s(self) -> list[float]:
        """Seconds per real training step, warm-up steps left out."""
        return self._timer.step_s

    @property
    def compute_s(self) -> list[float]:
        """Seconds per compute-only step, all replays."""
        return [t for _, replayed in self.pairs for t in replayed]

    def set_model(self, model: Any) -> None:
        super().set_model(model)
        self._timer.set_model(model)

    # --- recording real steps ---------------------------------------------------------
    def on_train_begin(self, logs: dict | None = None) -> None:
        self._nvml, self._gpu_reason = gpu_mod.open_nvml()
        if self._nvml is not None:
            self._sampler = gpu_mod.UtilSampler(self._nvml)
            self._sampler.start()

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._timer.on_epoch_begin(epoch, logs)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.report is None:
            self._timer.on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.report is not None:
            return
        if self.replay_at == "epoch":
            self._pair()
        elif not isinstance(self.replay_at, str) and epoch == self.replay_at:
            self._pair()
            self._finish()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.report is None:
            if self.replay_at == "end" or not self.pairs:
                self._pair()
            self._finish()

    # --- the compute-only replay ----------------------------------------------------------
    def replay(self) -> list[float]:
        """Time ``replay_steps`` compute-only steps on the cached batch; weights restored.

        The replay goes through ``model.fit`` itself (on the one cached batch, repeated), so
        that it carries the same per-step overhead as the real steps and only the input
        pipeline differs.
        """
        import tensorflow as tf

        model = self.model
        cached = tf.data.Dataset.from_tensors(_one_batch(self._data)).repeat()
        weights = model.get_weights()
        opt = getattr(model, "optimizer", None)
        opt_vars = [v.numpy() for v in opt.variables] if opt is not None else []
        history, stop = getattr(model, "history", None), model.stop_training
        timer = _StepTimer(self.skip_steps)
        if self._sampler is not None:
            self._sampler.stop()
        try:
            model.fit(
                cached,
                epochs=1,
                steps_per_epoch=self.replay_steps + self.skip_steps,
                callbacks=[timer],
                verbose=0,
            )
        finally:
            model.set_weights(weights)
            if opt is not None:
                for var, value in zip(opt.variables, opt_vars, strict=True):
                    var.assign(value)
            model.history, model.stop_training = history, stop
            if self._sampler is not None and self.report is None:
                self._sampler.start()
        return timer.step_s

    def _pair(self) -> None:
        """Replay now and pair it with the real steps recorded since the last replay."""
        real = self.step_s[self._since :]
        self._since = len(self.step_s)
        self.pairs.append((real, self.replay()))

    def _finish(self) -> None:
        util = None
        if self._sampler is not None:
            self._sampler.stop()
            util = self._sampler.summary()
        self.report = self._build_report(util)
        if self._nvml is not None:
            self._nvml.close()
        if self.verbose:
            print(f"tfperf: {self._line()}")

    def _share(self, notes: list[str]) -> tuple[float | None, list[float | None] | None]:
        """Input share and its 95% interval from the (real, replay) pairs."""
        from tfperf.core.stats import paired_speedup  # scipy: only when a report is made

        usable = [(r, c) for r, c in self.pairs if r and c]
        if not usable:
            notes.append(
                f"no steady-state steps were recorded (each epoch's first {self.skip_steps} "
                "are warm-up); train for more steps"
            )
            return None, None
        real = [statistics.median(r) for r, _ in usable]
        compute = [statistics.median(c) for _, c in usable]
        ratio = paired_speedup(real, compute)
        if len(usable) == 1:
            notes.append(
                "one replay: real steps and the compute-only replay were timed one after the "
                "other, so a machine whose speed drifts biases the share"
            )
            return input_share(real[0], compute[0]), None
        notes.append(f"{len(usable)} replays, each paired with the real steps just before it")
        low, high = ratio["ci95"]
        ci = [input_share(x, 1.0) if x else None for x in (low, high)]
        return input_share(ratio["median"], 1.0), ci

    def _build_report(self, util: dict | None) -> dict:
        notes: list[str] = []
        share, share_ci = self._share(notes)
        checks = gpu_mod.model_checks(self.model, self._nvml is not None)
        if self._nvml is not None:
            gpu_doc = {
                "available": True,
                "reason": "",
                "devices": self._nvml.names,
                "utilization": util,
                "bound": classify((util or {}).get("mean_util"), verdict(share)),
                "model": checks,
            }
        else:
            gpu_doc = gpu_mod.no_gpu(self._gpu_reason, checks)
        real = statistics.median(self.step_s) if self.step_s else None
        compute = statistics.median(self.compute_s) if self.compute_s else None
        return {
            "target": f"model.fit({self.model.name})",
            "verdict": verdict(share),
            "input_share": share,
            "input_share_ci95": share_ci,
            "dataset": None,
            "compute": {
                "steps_per_s": 1.0 / compute if compute else None,
                "samples_s": self.compute_s,
            },
            "train": {"steps_per_s": 1.0 / real if real else None, "samples_s": self.step_s},
            "metric": "steps/s",
            "stages": [],
            "bounding_stage": None,
            "fixes": [],
            "best_fix": None,
            "gpu": gpu_doc,
            "notes": notes,
        }

    def _line(self) -> str:
        assert self.report is not None
        train = self.report["train"]["steps_per_s"]
        comp = self.report["compute"]["steps_per_s"]
        detail = ""
        if train and comp:
            detail = f" (real step {1e3 / train:.1f} ms, compute only {1e3 / comp:.1f} ms)"
        return one_line(self.report["input_share"], self.report["verdict"]) + detail
