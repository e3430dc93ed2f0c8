"""CLI: the ``--train`` options bench and tune share, and the training lines of their output.

``tfperf bench --train TARGET`` and ``tfperf tune --train TARGET`` measure the user's own
training step (:mod:`tfperf.worker.training`): TARGET is ``module:function`` returning
``(model, dataset)`` or ``(model, x, y)``, or a ``.keras`` file saved after compile with
``--inputs`` and ``--labels``. A training built-in (``--workload cnn-train``) is measured the
same way, with or without ``--train``. :func:`train_options` adds the options,
:func:`trains` says whether a command measures a training step, :func:`train_workload` turns
them into the workload dict (:func:`tfperf.modelref.resolve_train_target`,
:func:`tfperf.modelref.builtin_train_target`), and
:func:`render_train` prints steps/s, samples/s, the first steps' cost and the input wait.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click
from click.core import ParameterSource

from tfperf.core.errors import UserError


def train_options(labels: bool) -> Any:
    """The ``--train`` options (``--labels`` too where the command lacks it)."""

    def decorate(fn: Any) -> Any:
        options = [
            click.option(
                "--train",
                "train",
                is_flag=True,
                help="Measure MODEL's training step (module:function returning (model, "
                "dataset) or (model, x, y), or a compiled .keras with --inputs/--labels).",
            ),
            click.option(
                "--guard-steps",
                type=int,
                default=None,
                help="With --train: training steps each candidate's loss is compared over "
                "(default 100 or 60 s, never fewer than 50).",
            ),
            click.option(
                "--guard-seconds",
                type=float,
                default=None,
                help="With --train: the guard's time cap per worker in seconds (default 60; "
                "never fewer than 50 steps).",
            ),
            click.option(
                "--loss-key",
                "loss_keys",
                multiple=True,
                help="With --train: a key of your train_step's logs to guard (repeatable; "
                "default: every key whose name contains 'loss').",
            ),
            click.option(
                "--steps-counter",
                default=None,
                help="With --train: the attribute path on the model that counts training "
                "steps (default optimizer.iterations; a GAN's d_optimizer.iterations).",
            ),
            click.option(
                "--validation",
                type=click.Path(dir_okay=False),
                help="With --train: an .npz with x and y on which the compiled metrics must "
                "agree after the guard's steps.",
            ),
        ]
        if labels:
            options.append(
                click.option(
                    "--labels",
                    type=click.Path(dir_okay=False),
                    help="With --train and a .keras MODEL: the training targets (.npy/.npz).",
                )
            )
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


def given_batch(name: str = "batch") -> bool:
    """Whether ``--batch`` was typed (training's default is Keras' 32, not 1)."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(name) not in (
        ParameterSource.DEFAULT,
        None,
    )


def trains(opts: dict[str, Any]) -> bool:
    """Whether the command measures a training step: ``--train``, or a training built-in
    (``--workload cnn-train``), which needs no ``--train``."""
    from tfperf.core.workloads import is_training_builtin

    return bool(opts.get("train")) or is_training_builtin(opts.get("workload"))


def train_workload(model: str | None, opts: dict[str, Any]) -> dict[str, Any]:
    """The workload dict of ``--train MODEL`` (or a training built-in) with the command's
    options."""
    from tfperf.modelref import TrainGuard, builtin_train_target, resolve_train_target

    guard = TrainGuard(opts.get("guard_steps"), opts.get("guard_seconds"),
                       opts.get("validation"), tuple(opts.get("loss_keys") or ()),
                       opts.get("steps_counter"))
    if opts.get("workload") and model:
        raise UserError("name exactly one thing to measure: --workload NAME or a MODEL path.")
    if opts.get("workload"):
        for name in ("inputs", "labels", "unsafe"):
            if opts.get(name):
                raise UserError(f"--{name} applies to your own MODEL, not to a built-in "
                                "--workload: leave it out.")
        return builtin_train_target(opts["workload"], size=opts.get("size") or "standard",
                                    batch=opts.get("batch") or 1, guard=guard)
    if not model:
        raise UserError("--train takes your own MODEL (module:function or a .keras file) or "
                        "a training built-in (--workload cnn-train).")
    if opts.get("size") not in (None, "standard"):
        raise UserError(f"--size {opts['size']} sizes a built-in --workload; your own MODEL "
                        "has its own size: leave it out.")
    return resolve_train_target(
        model,
        inputs=opts.get("inputs"),
        labels=opts.get("labels"),
        unsafe=bool(opts.get("unsafe")),
        batch=opts.get("batch") if given_batch() else None,
        **dataclasses.asdict(guard),
    )


def refuse_train_only(opts: dict[str, Any]) -> None:
    """The ``--train`` options without ``--train``: say so."""
    for name in TRAIN_ONLY:
        if opts.get(name) not in (None, ()):
            raise UserError(f"--{name.replace('_', '-')} applies with --train only; add --train.")


TRAIN_ONLY = ("guard_steps", "guard_seconds", "loss_keys", "steps_counter", "validation")
"""The options :func:`train_options` adds besides ``--train`` (and ``--labels``)."""


def _fmt(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)


def render_train(doc: dict[str, Any]) -> None:
    """One line per measured config of a bench document: its training figures."""
    from rich.markup import escape

    from tfperf.report.console import console

    out = console()
    for r in doc.get("results", []):
        t = r.get("train")
        if not t:
            continue
        low, high = t.get("steps_per_s_ci95") or (None, None)
        share = t.get("input_wait_share")
        out.print(
            f"{escape(r['label'])}: {_fmt(t.get('steps_per_s'))} steps/s "
            f"(95% CI {_fmt(low)}-{_fmt(high)}), {_fmt(t.get('samples_per_s'))} samples/s, "
            f"batch {t.get('batch')}, {t.get('steps_per_call')} step(s) per call; first steps "
            f"(tracing, compilation) {_fmt(t.get('first_steps_s'), '.3g')} s; waiting for "
            f"input {'-' if share is None else format(share, '.0%')} of a step",
            soft_wrap=True,
        )


def _guard_text(guard: dict[str, Any]) -> str:
    if "steps" not in guard:
        return guard.get("verdict", "")
    final = guard.get("final_loss")
    return (
        f"guard {guard['verdict']} over {guard['steps']} steps: loss "
        f"{_fmt(guard['default_first_loss'])} -> {_fmt(guard['default_final_loss'])} at the "
        f"default, {_fmt(final)} here"
    )


def render_train_tune(doc: dict[str, Any]) -> None:
    """A training tune's lines: the default's first steps and input wait, each candidate's
    guard, and the code lines the recommendation needs."""
    from rich.markup import escape

    from tfperf.report.console import console

    out = console()
    default = (doc["train"].get("default")) or {}
    share = default.get("input_wait_share")
    out.print(
        f"training step: first steps (tracing, compilation) "
        f"{_fmt(default.get('first_steps_s'), '.3g')} s, waiting for input "
        f"{'-' if share is None else format(share, '.0%')} of a step; "
        f"{doc['train']['note']}",
        soft_wrap=True,
    )
    rec = doc.get("recommendation") or {}
    speed = rec.get("speedup") or {}
    batch = default.get("batch") or 1
    if not rec.get("keep_default") and speed.get("default_samples_per_s"):
        out.print(
            f"per training step: {_fmt(speed['default_samples_per_s'] / batch)} -> "
            f"{_fmt(speed['candidate_samples_per_s'] / batch)} steps/s at batch {batch}",
            soft_wrap=True,
        )
    for row in doc.get("candidates", []):
        if row.get("guard"):
            out.print(f"  {escape(row['label'])}: {_guard_text(row['guard'])}", soft_wrap=True)
    fit = rec.get("fit_speedup") or {}
    if fit.get("median"):
        low, high = fit.get("ci95") or (None, None)
        out.print(
            f"model.fit of {fit['steps']} steps: {_fmt(fit['default_step_ms'], '.3g')} -> "
            f"{_fmt(fit['candidate_step_ms'], '.3g')} ms per step, {fit['median']:.2f}x "
            f"({_fmt(low, '.2f')}-{_fmt(high, '.2f')})", soft_wrap=True)
    _by_hand_lines(rec, out)
    _environment_lines(doc, rec, out)


def _by_hand_lines(rec: dict[str, Any], out: Any) -> None:
    """What the answer needs that ``tfperf run`` does not do: installs, then code lines."""
    from rich.markup import escape

    from tfperf.core.loopcode import is_diff
    from tfperf.profiles import DIFF_HEADING, INSTALL, to_do_by_hand

    by_hand = to_do_by_hand(rec.get("code") or [])
    installs = [line for line in by_hand if line.startswith(INSTALL)]
    changes = [line for line in by_hand if line not in installs]
    add = DIFF_HEADING[2:] if is_diff(changes) else (
        "add to your training script (tfperf run cannot set these from outside):")
    for heading, lines in (("install first:", installs), (add, changes)):
        if lines:
            out.print(heading)
            for line in lines:
                out.print(f"  {escape(line)}", soft_wrap=True, highlight=False)


def _environment_lines(doc: dict[str, Any], rec: dict[str, Any], out: Any) -> None:
    """The answer's environment, where it has one: what to set before the script starts."""
    from rich.markup import escape

    from tfperf.profiles import profile_env

    env = {} if rec.get("keep_default") else profile_env({"config": rec.get("config") or {}})
    if not env:
        return
    out.print(f"and start it with (tfperf run --profile {escape(doc.get('profile', 'P'))} -- "
              "python train.py sets them):", soft_wrap=True)
    for name, value in env.items():
        out.print(f"  {escape(name)}={escape(value)}", soft_wrap=True, highlight=False)
