"""What a finite dataset's epochs cost in ``model.fit``, side by side in one process.

Keras' ``fit`` over a finite ``tf.data.Dataset`` makes a new iterator each epoch. Deleting the
last one waits for tf.data's autotune thread to wake, and that thread's period starts at 10 ms
and doubles (up to 60 s), so an epoch can begin with a wait of up to the last one's length. Three
ways to run the same epochs, interleaved round by round:

- ``as written``: ``model.fit(dataset, epochs=E)``;
- ``repeat``: ``model.fit(dataset.repeat(), steps_per_epoch=N, epochs=E)``, one iterator for all
  epochs (N: the dataset's batches);
- ``autotune off``: the dataset with ``options.autotune.enabled = False``.

Each epoch is timed from ``on_epoch_begin`` to ``on_epoch_end`` (a callback without batch hooks,
so fit dispatches as it does for a plain call), and each call of fit whole.

    python benchmarks/fit_epochs.py [--models rnn,transformer] [--epochs 6] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "train"))


def _epoch_timer(keras):
    class EpochTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epochs_s: list[float] = []
            self._began = 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self._began = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.epochs_s.append(time.perf_counter() - self._began)

    return EpochTimer


def _variants(tf, dataset):
    batches = int(dataset.cardinality())
    off = tf.data.Options()
    off.autotune.enabled = False
    return {
        "as written": (dataset, None),
        "repeat": (dataset.repeat(), batches),
        "autotune off": (dataset.with_options(off), None),
    }, batches


def measure(name: str, epochs: int, rounds: int) -> None:
    import keras
    import suite_models
    import tensorflow as tf

    model, dataset = getattr(suite_models, name)()[:2]
    variants, batches = _variants(tf, dataset)
    timer_cls = _epoch_timer(keras)
    model.fit(dataset, epochs=1, verbose=0)  # tracing, first iterator
    epoch_s = {v: [] for v in variants}
    call_s = {v: [] for v in variants}
    order = list(variants)
    for r in range(rounds):
        for v in order[r % len(order):] + order[: r % len(order)]:
            data, steps = variants[v]
            timer = timer_cls()
            began = time.perf_counter()
            model.fit(data, steps_per_epoch=steps, epochs=epochs, verbose=0, callbacks=[timer])
            call_s[v].append(time.perf_counter() - began)
            epoch_s[v].extend(timer.epochs_s[1:])  # the first epoch of a call starts fresh
    base = statistics.median(call_s["as written"])
    print(f"\n{name}: {batches} batches an epoch, {epochs} epochs a call, {rounds} rounds")
    print("| way | epoch ms median | epoch ms max | call s median | call / as written |")
    print("|---|---|---|---|---|")
    for v in variants:
        ep, calls = epoch_s[v], call_s[v]
        print(f"| {v} | {statistics.median(ep) * 1e3:.0f} | {max(ep) * 1e3:.0f} | "
              f"{statistics.median(calls):.2f} | {statistics.median(calls) / base:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="rnn,transformer")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for name in args.models.split(","):
        measure(name.strip(), args.epochs, args.rounds)


if __name__ == "__main__":
    main()
