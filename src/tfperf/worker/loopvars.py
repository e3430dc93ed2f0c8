"""Worker side: the variables a custom training loop trains, found, restored and handed over.

Contract:

- :func:`capture` is a context manager that records every ``tf.Variable`` created inside it
  (``tf.variable_creator_scope``: Keras 3 variables, optimizer slots, ``tf.random.Generator``
  states and the per-device copies a ``tf.distribute`` strategy makes), with its value when it
  is created eagerly. The training worker imports the user's module and calls the factory
  inside it, then runs the user's step once with ``tf.function`` run eagerly inside it (the
  discovery step), so that variables a step creates at its first call (a model built on its
  first batch, an optimizer's slots) are created eagerly, each with its initial value.
- :class:`LoopState` holds those variables (and those the factory returned as the third
  element of ``(step, dataset, variables)``) with their initial values: :meth:`LoopState.restore`
  puts them back (the guard starts from there), :meth:`LoopState.write` and
  :meth:`LoopState.read` hand them from the default's worker to every candidate's (matched by
  position and shape; another set of variables is a :class:`UserError`), so that a
  factory that draws its weights from a private unseeded generator is still the same model in
  every worker. :meth:`LoopState.trained` are the variables the discovery step read under a
  gradient tape or changed: the fingerprint's ``weights`` are their initial values.
- :func:`strategy_of` names the ``tf.distribute`` strategy the variables were created under
  (``None`` outside any).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfperf.core.errors import UserError

STATE_WAIT_S = 600.0
"""How long a candidate's worker waits for the default's initial values (the parent's start
timeout ends it sooner)."""


@dataclass
class Created:
    """The variables created inside :func:`capture`, and the values of those created eagerly."""

    variables: list[Any] = field(default_factory=list)
    values: dict[int, Any] = field(default_factory=dict)


@contextlib.contextmanager
def capture() -> Iterator[Created]:
    """Record the variables created inside (module docstring)."""
    import tensorflow as tf

    found = Created()

    def creator(next_creator: Any, **kwargs: Any) -> Any:
        var = next_creator(**kwargs)
        found.variables.append(var)
        if tf.executing_eagerly():
            with contextlib.suppress(Exception):  # an uninitialized variable: read later
                found.values[id(var)] = var.numpy().copy()
        return var

    with tf.variable_creator_scope(creator):
        yield found


def components(var: Any) -> list[Any]:
    """The plain variables behind ``var`` (a strategy's per-device copies of a mirrored one)."""
    inner = getattr(var, "values", None)
    if isinstance(inner, (tuple, list)) and inner and not callable(inner):
        return [v for part in inner for v in components(part)]
    value = getattr(var, "value", None)  # a Keras 3 variable wraps a tf.Variable
    if value is not None and not callable(value) and hasattr(value, "assign"):
        return components(value)
    return [var]


class LoopState:
    """The variables of a custom loop and their initial values (module docstring)."""

    def __init__(self, variables: Sequence[Any], values: dict[int, Any]) -> None:
        seen: dict[int, Any] = {}
        for var in variables:
            for part in components(var):
                seen.setdefault(id(part), part)
        self.variables = list(seen.values())
        self.initial = [values[id(v)] if id(v) in values else v.numpy().copy()
                        for v in self.variables]
        self.trained: list[int] = []
        """Positions of the variables the step trains (:meth:`mark_trained`)."""

    def restore(self) -> None:
        """Every variable back to its initial value."""
        for var, value in zip(self.variables, self.initial, strict=True):
            var.assign(value)

    def mark_trained(self, watched: Sequence[Any]) -> list[str]:
        """Note the variables the step trains: those ``watched`` (read under a gradient tape)
        and those whose value the discovery step changed. Returns the names of watched
        variables this state does not hold (created before tfperf could see them)."""
        import numpy as np

        index = {id(v): i for i, v in enumerate(self.variables)}
        unseen, trained = [], set()
        for var in watched:
            parts = [index.get(id(p)) for p in components(var)]
            if any(p is None for p in parts):
                unseen.append(str(getattr(var, "name", "?")))
            trained.update(p for p in parts if p is not None)
        for i, (var, value) in enumerate(zip(self.variables, self.initial, strict=True)):
            if not np.array_equal(var.numpy(), value):
                trained.add(i)
        self.trained = sorted(trained)
        return unseen

    def trained_values(self) -> list[Any]:
        """The initial values of the trained variables (all of them where none is known)."""
        return [self.initial[i] for i in self.trained] if self.trained else list(self.initial)

    def write(self, path: str) -> None:
        """The initial values to ``path`` (``.npz``), written whole before it appears."""
        import numpy as np

        arrays = {f"v{i:05d}": value for i, value in enumerate(self.initial)}
        arrays["names"] = np.asarray([v.name for v in self.variables], dtype=str)
        tmp = f"{path}.{os.getpid()}.tmp.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, path)

    def read(self, path: str, wait_s: float = STATE_WAIT_S) -> None:
        """Take the default's initial values from ``path`` (waiting for it to appear) as this
        worker's: assigned, and kept as the values :meth:`restore` returns to."""
        import numpy as np

        deadline = time.monotonic() + wait_s
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        with np.load(path) as found:
            names = [str(n) for n in found["names"]]
            values = [found[f"v{i:05d}"] for i in range(len(names))]
        theirs = [f"{n} {tuple(v.shape)}" for n, v in zip(names, values, strict=True)]
        mine = [f"{v.name} {tuple(v.shape)}" for v in self.variables]
        # by position and shape: a name may carry another suffix (sgd_1) in another process
        if [tuple(v.shape) for v in values] != [tuple(v.shape) for v in self.variables]:
            raise UserError(_other_variables(theirs, mine))
        self.initial = values
        self.restore()


def _other_variables(theirs: list[str], mine: list[str]) -> str:
    """The sentence for a candidate whose loop created other variables than the default's."""
    differ = next((f"{a} against {b}" for a, b in zip(theirs, mine, strict=False) if a != b),
                  f"{len(theirs)} variables against {len(mine)}")
    return (f"This configuration's step created other variables than the default's ({differ}):"
            " create every variable in the factory or at the step's first call, the same way "
            "whatever the configuration.")


def strategy_of(variables: Sequence[Any]) -> Any:
    """The ``tf.distribute`` strategy the first distributed variable belongs to, or ``None``."""
    for var in variables:
        for candidate in (var, getattr(var, "value", None)):
            strategy = getattr(candidate, "_distribute_strategy", None)
            if strategy is not None and not type(strategy).__name__.startswith("_Default"):
                return strategy
    return None
