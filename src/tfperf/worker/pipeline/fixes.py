"""Candidate fixes for a ``tf.data`` pipeline, each one applied for real (worker side).

Contract: :func:`candidates` returns the fixes that can be applied to the user's pipeline as
:class:`Fix` objects (in :class:`Candidates`); ``fix.build(target)`` returns the rebuilt
``tf.data.Dataset``. Two kinds:

- *wrappers* applied with public APIs on top of any pipeline: ``prefetch(AUTOTUNE)``,
  ``cache()`` (only for a finite pipeline that fits in memory and has no random stage), and
  ``tf.data.Options`` (autotune RAM/CPU budget, private thread pool size, the pipeline/model
  thread split, ``deterministic=False``);
- *structural* fixes (parallel map, parallel interleave, caching decoded data, batch before
  map): measured through the function's keyword flags where it takes them (see
  :data:`tfperf.worker.pipeline.target.STRUCTURAL_FLAGS`), otherwise rebuilt from the built
  pipeline where that is safe (:mod:`tfperf.worker.pipeline.structural`); the rest are listed
  unmeasured, ranked, each with the code change it needs (``Candidates.unmeasured``).

:func:`combine` merges several fixes into one (flags united, wrappers in a fixed order).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfperf.worker.pipeline import functions, stages, structural
from tfperf.worker.pipeline.target import Target

Wrapper = Callable[[Any], Any]

STRUCTURAL_CHANGES = {
    "parallel_map": "ds = ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)",
    "interleave": (
        "ds = files.interleave(read_one, cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE)"
    ),
    "cache_decoded": "ds = ds.map(decode).cache()  # cache before the random augmentation",
    "batch_before_map": "ds = ds.batch(n).map(augment_batch)  # vectorised: one call per batch",
}


@dataclass
class Fix:
    """One candidate: structural flags for ``Target.rebuild`` plus wrappers applied on top."""

    name: str
    change: str
    flags: dict[str, bool] = field(default_factory=dict)
    wrappers: list[tuple[int, Wrapper]] = field(default_factory=list)

    @property
    def structural(self) -> bool:
        """Whether the fix changes the pipeline's stages (flags, or a rebuild: order < 0)."""
        return bool(self.flags) or any(order < 0 for order, _ in self.wrappers)

    def build(self, target: Target) -> Any:
        """The pipeline with this fix applied."""
        if self.flags:
            assert target.rebuild is not None
            ds = target.rebuild(**self.flags)
        else:
            ds = target.dataset
        for _, wrap in sorted(self.wrappers, key=lambda pair: pair[0]):
            ds = wrap(ds)
        return ds


def _options(**settings: Any) -> Wrapper:
    def wrap(ds: Any) -> Any:
        import tensorflow as tf

        opts = tf.data.Options()
        for dotted, value in settings.items():
            obj = opts
            *path, last = dotted.split("__")
            for part in path:
                obj = getattr(obj, part)
            setattr(obj, last, value)
        return ds.with_options(opts)

    return wrap


def _prefetch(ds: Any) -> Any:
    import tensorflow as tf

    return ds.prefetch(tf.data.AUTOTUNE)


def _cache(ds: Any) -> Any:
    return ds.cache()


def has_random_stage(ds: Any) -> bool:
    """Whether the pipeline shuffles or draws random numbers (caching its output would freeze
    them). Reads the pipeline's serialized graph; unknown counts as random, and so does Python
    (a ``py_function`` or generator may draw from ``random`` or NumPy unseen)."""
    import tensorflow as tf

    chain = stages.chain(ds)
    if any("Shuffle" in stages.kind(d) or functions.runs_python(d) for d in chain):
        return True
    try:
        graph = tf.compat.v1.GraphDef()
        graph.ParseFromString(ds._as_serialized_graph().numpy())
    except Exception:
        return True
    ops = {n.op for n in graph.node}
    for fn in graph.library.function:
        ops.update(n.op for n in fn.node_def)
    return any("Random" in op or "Shuffle" in op or op in functions.PYTHON_OPS for op in ops)


_AFTER_CACHE_FREE = {"PrefetchDataset", "OptionsDataset", "RepeatDataset"}
"""Stages that cost nothing to repeat after a cache (a cache before them caches the output)."""


def _cache_problem(ds: Any, mem_budget: int, kinds: list[str]) -> str | None:
    """Why ``cache()`` at the end of ``ds`` must not be measured, or ``None`` when it can
    (``kinds``: the pipeline's stage kinds, source first)."""
    import tensorflow as tf

    if "CacheDataset" in kinds:
        after = kinds[len(kinds) - kinds[::-1].index("CacheDataset") :]
        if all(k in _AFTER_CACHE_FREE for k in after):
            return "the pipeline already caches its output"
    card = int(ds.cardinality())
    if card in (int(tf.data.INFINITE_CARDINALITY), int(tf.data.UNKNOWN_CARDINALITY)):
        return "the pipeline is infinite or of unknown length, so cache() would never complete"
    if has_random_stage(ds):
        return (
            "the pipeline shuffles, augments at random or runs Python (which may draw random "
            "numbers); cache() at its end would freeze that: cache() after decoding, before the "
            "random steps"
        )
    first = next(iter(ds))
    nbytes = sum(int(t.numpy().nbytes) for t in tf.nest.flatten(first))
    if nbytes * card > mem_budget:
        return f"one epoch takes about {nbytes * card / 2**30:.1f} GiB, more than the RAM budget"
    return None


@dataclass(frozen=True)
class Candidates:
    """What :func:`candidates` found: fixes to measure, fixes that do not apply (with the
    reason), and structural fixes that would address a stage but went unmeasured."""

    fixes: list[Fix]
    skipped: list[dict]
    unmeasured: list[dict]


def candidates(
    target: Target, ncpu: int, mem_total: int, bounding: str | None = None
) -> Candidates:
    """The fixes for ``target``; ``bounding`` (the label of the bounding stage) ranks the
    unmeasured ones."""
    ds = target.dataset
    kinds = [stages.kind(d) for d in stages.chain(ds)]
    fixes, unmeasured = _structural(target, bounding)
    skipped: list[dict] = []
    if kinds[-1] != "PrefetchDataset":
        fixes.append(
            Fix("prefetch", "ds = ds.prefetch(tf.data.AUTOTUNE)", wrappers=[(9, _prefetch)])
        )
    else:
        skipped.append({"name": "prefetch", "reason": "the pipeline already ends with prefetch"})
    fixes.extend(_option_fixes(target, ncpu, mem_total))
    if any("Parallel" in k for k in kinds):
        fixes.append(
            Fix(
                "nondeterministic",
                "options = tf.data.Options()\noptions.deterministic = False\n"
                "ds = ds.with_options(options)",
                wrappers=[(8, _options(deterministic=False))],
            )
        )
    else:
        skipped.append(
            {"name": "nondeterministic", "reason": "no parallel stage, so order costs nothing"}
        )
    problem = _cache_problem(ds, mem_total // 4, kinds)
    if problem is None:
        fixes.append(
            Fix("cache", "ds = ds.cache()  # after the last stage", wrappers=[(0, _cache)])
        )
    else:
        skipped.append({"name": "cache", "reason": problem})
    return Candidates(fixes, skipped, unmeasured)


def _structural(target: Target, bounding: str | None) -> tuple[list[Fix], list[dict]]:
    """Structural fixes: through the function's flags where it takes them, else rebuilt from
    the built pipeline where that is safe (:mod:`tfperf.worker.pipeline.structural`)."""
    if target.rebuild is not None:
        return [
            Fix(flag, target.changes.get(flag, STRUCTURAL_CHANGES[flag]), flags={flag: True})
            for flag in target.flags
        ], []
    found = structural.plan(target.dataset, bounding)
    # Rewrites rebuild the user's pipeline, so they come before every wrapper (order < 0);
    # batch-before-map first, so that a map it moved after the batch can then be parallelised.
    order = {"batch_before_map": -3, "interleave": -2, "parallel_map": -1}
    fixes = [Fix(r.name, r.change, wrappers=[(order[r.name], r.apply)]) for r in found.rewrites]
    return fixes, found.unmeasured


def _option_fixes(target: Target, ncpu: int, mem_total: int) -> list[Fix]:
    """The tf.data options worth trying: autotune budgets, a private pool, a thread split."""
    ram = mem_total // 2
    fixes = [
        Fix(
            "autotune_budget",
            "options = tf.data.Options()\n"
            "options.autotune.enabled = True\n"
            f"options.autotune.ram_budget = {ram}  # half of this machine's RAM\n"
            f"options.autotune.cpu_budget = {ncpu}\n"
            "ds = ds.with_options(options)",
            wrappers=[
                (
                    5,
                    _options(
                        autotune__enabled=True, autotune__ram_budget=ram, autotune__cpu_budget=ncpu
                    ),
                )
            ],
        ),
        Fix(
            "private_threadpool",
            "options = tf.data.Options()\n"
            f"options.threading.private_threadpool_size = {ncpu}\n"
            "ds = ds.with_options(options)",
            wrappers=[(6, _options(threading__private_threadpool_size=ncpu))],
        ),
    ]
    if target.model is not None and ncpu > 1:
        split = max(1, ncpu // 2)
        fixes.append(
            Fix(
                "thread_split",
                "# give the pipeline its own threads so it does not compete with the model\n"
                "options = tf.data.Options()\n"
                f"options.threading.private_threadpool_size = {split}\n"
                "options.threading.max_intra_op_parallelism = 1\n"
                "ds = ds.with_options(options)",
                wrappers=[
                    (
                        7,
                        _options(
                            threading__private_threadpool_size=split,
                            threading__max_intra_op_parallelism=1,
                        ),
                    )
                ],
            )
        )
    return fixes


def combine(fixes: list[Fix]) -> Fix:
    """One fix that applies all of ``fixes`` (flags united, wrappers in their fixed order)."""
    flags: dict[str, bool] = {}
    wrappers: list[tuple[int, Wrapper]] = []
    for fix in fixes:
        flags.update(fix.flags)
        wrappers.extend(fix.wrappers)
    name = "+".join(f.name for f in fixes)
    change = "\n".join(f"# {f.name}\n{f.change}" for f in fixes)
    return Fix(name, change, flags=flags, wrappers=wrappers)


def cpu_count() -> int:
    """CPUs this process may use (affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
