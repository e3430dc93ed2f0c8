"""Parent-side check of a user's model argument: what it is, before any worker starts.

Contract: :func:`resolve_model` turns the argument of ``tfperf bench MODEL`` into the workload
dict of ``docs/ARCHITECTURE.md`` (``{"kind": "model", "path", "format", "inputs", "unsafe",
"batch"}``), or raises :class:`~tfperf.core.errors.UserError` with one sentence (not found, not a
model, corrupt file, unsupported format) that names the supported formats. It reads at most a
few bytes and one small JSON member of the file; it never imports TensorFlow, and for a
``module:function`` factory it locates the module (``importlib.util.find_spec``) without
importing it. A factory workload also carries ``"search_path"`` (the directory the user ran
from), so the worker can import a module that lives there. :func:`workload_from_args` turns a
command's ``--workload NAME`` or ``MODEL`` argument (the same for ``bench``, ``compare`` and
``tune``) into a workload dict. :func:`resolve_train_target` does the same for ``--train
TARGET`` (the user's training step), :func:`builtin_train_target` for a training built-in with
the guard's options.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.kerasbackend import configured_backend
from tfperf.core.workloads import builtin_workload, check_batch

SUPPORTED = (
    "a .keras file, a SavedModel directory, a .tflite file, or module:function "
    "returning (model, inputs)"
)
"""The supported formats, as every error sentence names them."""

TFLITE_IDENTIFIER = b"TFL3"
"""FlatBuffer file identifier of a TensorFlow Lite model (bytes 4-8 of the file)."""

_FACTORY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


def resolve_model(
    arg: str, *, unsafe: bool = False, inputs: str | None = None, batch: int = 1
) -> dict[str, Any]:
    """The workload dict for the user's model argument ``arg``.

    ``unsafe`` allows a ``.keras`` file to run code on load (Lambda layers, custom objects);
    ``inputs`` is an optional ``.npz`` of sample inputs; ``batch`` the samples per call (>= 1).
    """
    check_batch(batch)
    path, fmt = _identify(arg)
    return {
        "kind": "model",
        "path": path,
        "format": fmt,
        "inputs": _check_inputs(inputs),
        "unsafe": bool(unsafe),
        "batch": int(batch),
        **({"search_path": os.getcwd()} if fmt == "factory" else {}),
    }


def _identify(arg: str) -> tuple[str, str]:
    """``(path, format)`` for ``arg``; the path is absolute except for a factory."""
    if not arg:
        raise UserError(f"No model given: pass {SUPPORTED}.")
    path = Path(arg).expanduser()
    if path.is_dir():
        return _savedmodel(path)
    if path.is_file():
        return _model_file(path)
    if ":" in arg and "/" not in arg:
        return _factory(arg)
    raise UserError(f"Model {arg!r} not found: pass {SUPPORTED}.")


def _savedmodel(path: Path) -> tuple[str, str]:
    if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
        return str(path.resolve()), "savedmodel"
    raise UserError(
        f"Directory {str(path)!r} is not a SavedModel (no saved_model.pb in it): pass {SUPPORTED}."
    )


def _model_file(path: Path) -> tuple[str, str]:
    name = str(path)
    suffix = path.suffix.lower()
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        return _savedmodel(path.parent)
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise UserError(f"Cannot read model file {name!r} ({exc.strerror}).") from None
    if head[4:8] == TFLITE_IDENTIFIER:
        return str(path.resolve()), "tflite"
    if zipfile.is_zipfile(path):
        _check_keras_zip(path)
        return str(path.resolve()), "keras"
    if suffix == ".tflite":
        raise UserError(f"{name!r} is a corrupt .tflite file (no TFL3 FlatBuffer identifier).")
    if suffix == ".keras":
        raise UserError(f"{name!r} is a corrupt .keras file (not a zip archive).")
    if suffix in (".h5", ".hdf5") or head.startswith(b"\x89HDF"):
        raise UserError(
            f"{name!r} is a legacy HDF5 Keras file, which is not supported: re-save it with "
            f"model.save('model.keras'), or pass {SUPPORTED}."
        )
    raise UserError(f"{name!r} is not a model: pass {SUPPORTED}.")


def _check_keras_zip(path: Path) -> None:
    """Raise :class:`UserError` unless ``path`` is a zip holding a readable ``config.json``."""
    name = str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            if "config.json" not in zf.namelist():
                raise UserError(
                    f"{name!r} is a zip archive but not a .keras model (no config.json): "
                    f"pass {SUPPORTED}."
                )
            json.loads(zf.read("config.json"))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise UserError(f"{name!r} is a corrupt .keras file ({exc}).") from None


def _factory(arg: str) -> tuple[str, str]:
    if not _FACTORY.match(arg):
        raise UserError(
            f"{arg!r} is neither a model file nor module:function (e.g. mymodels:build): "
            f"pass {SUPPORTED}."
        )
    module = arg.split(":", 1)[0]
    spec = find_module(module)
    if spec is None:
        raise UserError(
            f"Module {module!r} of {arg!r} cannot be found (or its package fails to import): "
            "run from its directory or add it to PYTHONPATH."
        )
    return arg, "factory"


def find_module(module: str) -> Any:
    """The import spec of ``module`` looked up from the current directory first, or ``None``.

    The module itself is not imported (a dotted name imports its parent packages, as
    :func:`importlib.util.find_spec` does): a factory module may import TensorFlow, which only
    the worker does.
    """
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.util.find_spec(module)
    except Exception:  # a parent package that fails to import: the module cannot be found
        return None
    finally:
        if added:
            sys.path.remove(cwd)


def _check_inputs(inputs: str | None) -> str | None:
    """The absolute path of the ``--inputs`` file, checked to be a readable ``.npz`` archive."""
    if inputs is None:
        return None
    path = Path(inputs).expanduser()
    if not path.is_file():
        raise UserError(f"Inputs file {inputs!r} not found: pass a .npz made with numpy.savez.")
    if not zipfile.is_zipfile(path):
        raise UserError(f"Inputs file {inputs!r} is not a .npz archive: write it with numpy.savez.")
    return str(path.resolve())


def workload_from_args(
    workload: str | None,
    model: str | None,
    *,
    inputs: str | None = None,
    unsafe: bool = False,
    batch: int = 1,
    size: str = "standard",
) -> dict[str, Any]:
    """The workload dict for a command given ``--workload NAME`` or a ``MODEL`` argument.

    Exactly one of ``workload`` and ``model`` must be given; ``inputs`` (an ``.npz``) and
    ``unsafe`` apply to a model only, ``size`` to a built-in only. A model is checked by
    :func:`tfperf.modelref.resolve_model` (parent side, no TensorFlow). Bad input raises
    :class:`UserError`.
    """
    if (workload is None) == (model is None):
        raise UserError("name exactly one thing to measure: --workload NAME or a MODEL path.")
    if workload is not None:
        if inputs:
            raise UserError("--inputs applies to your own MODEL, not to a built-in --workload.")
        if unsafe:
            raise UserError("--unsafe lets your own .keras MODEL run code on load; a built-in "
                            "--workload needs no trust: leave it out.")
        return builtin_workload(workload, size=size, batch=batch)
    if size != "standard":
        raise UserError(f"--size {size} sizes a built-in --workload; your own MODEL has its own "
                        "size: leave it out.")
    return resolve_model(model, unsafe=unsafe, inputs=inputs, batch=batch)  # type: ignore[arg-type]


TRAIN_SUPPORTED = (
    "module:function returning (model, dataset) or (model, x, y) with a compiled Keras model, "
    "or a .keras file saved after compile with --inputs and --labels"
)
TRAIN_BATCH = 32
"""The batch arrays are cut into for training when none is given (Keras' ``fit`` default)."""


def resolve_train_target(
    arg: str,
    *,
    inputs: str | None = None,
    labels: str | None = None,
    unsafe: bool = False,
    batch: int | None = None,
    guard_steps: int | None = None,
    guard_seconds: float | None = None,
    validation: str | None = None,
    loss_keys: tuple[str, ...] = (),
    steps_counter: str | None = None,
) -> dict[str, Any]:
    """The workload dict of ``--train TARGET`` (kind ``"train"``, see
    :mod:`tfperf.worker.training`), checked like :func:`resolve_model`."""
    check_keras_backend()
    path, fmt = _identify(arg)
    if fmt not in ("factory", "keras"):
        raise UserError(f"--train takes {TRAIN_SUPPORTED}; {arg!r} is a {fmt} model.")
    if fmt == "keras" and not (inputs and labels):
        raise UserError("Training a .keras file needs --inputs X.npz and --labels Y.npz.")
    check_batch(batch or TRAIN_BATCH)
    return {
        "kind": "train",
        "path": path,
        "format": fmt,
        "inputs": _check_inputs(inputs),
        "labels": _check_array_file(labels, "--labels"),
        "unsafe": bool(unsafe),
        "batch": int(batch or TRAIN_BATCH),
        **({"batch_given": True} if batch else {}),  # refused for data batched already
        **TrainGuard(guard_steps, guard_seconds, validation, tuple(loss_keys),
                     steps_counter).checked(),
        "keras_backend": configured_backend()[0],
        **({"search_path": os.getcwd()} if fmt == "factory" else {}),
    }


@dataclass(frozen=True)
class TrainGuard:
    """The training guard's options of a training workload (``--guard-steps``,
    ``--guard-seconds``, ``--validation``, ``--loss-key``, ``--steps-counter``)."""

    guard_steps: int | None = None
    guard_seconds: float | None = None
    validation: str | None = None
    loss_keys: tuple[str, ...] = ()
    steps_counter: str | None = None

    def checked(self) -> dict[str, Any]:
        """The guard's part of a training workload dict; bad values raise :class:`UserError`."""
        steps, seconds, counter = self.guard_steps, self.guard_seconds, self.steps_counter
        if steps is not None and steps < 1:
            raise UserError(f"--guard-steps must be a whole number >= 1, not {steps}.")
        if seconds is not None and not seconds > 0:
            raise UserError(f"--guard-seconds must be a positive number of seconds, not "
                            f"{seconds}.")
        if counter is not None and not all(p.isidentifier() for p in counter.split(".")):
            raise UserError(f"--steps-counter {counter!r} is not an attribute path: write "
                            "it like d_optimizer.iterations.")
        return {
            "validation": _check_inputs(self.validation),
            "guard_steps": steps,
            "guard_seconds": seconds,
            "loss_keys": list(self.loss_keys),
            "steps_counter": counter,
        }


def builtin_train_target(
    name: str, *, size: str = "standard", batch: int = 1, guard: TrainGuard = TrainGuard()
) -> dict[str, Any]:
    """The workload dict of the training built-in ``name`` (``--workload cnn-train``) with the
    guard's options, checked as :func:`resolve_train_target` checks a user's."""
    workload = builtin_workload(name, size=size, batch=batch)
    if workload["kind"] == "train":
        check_keras_backend()
    if workload["kind"] != "train":
        raise UserError(f"--train measures a training step and {name} is an inference "
                        "workload: leave out --train, or train --workload cnn-train or your "
                        "own MODEL.")
    return {**workload, **guard.checked()}


MEASURED_BACKENDS = ("tensorflow", "jax")
"""The Keras backends a training step is measured on."""


def check_keras_backend(environ: Any = None) -> None:
    """One sentence where Keras here runs on a backend tfperf does not measure (torch,
    openvino): the training worker inherits it and could not import it, or would train
    another program than TensorFlow's."""
    backend, source = configured_backend(environ)
    if backend in MEASURED_BACKENDS:
        return
    where = f"KERAS_BACKEND={backend}" if source == "KERAS_BACKEND" else \
        f"the backend of keras.json is {backend!r}"
    raise UserError(
        f"Keras here runs on {backend} ({where}), a backend tfperf does not measure: it "
        "measures training on Keras' tensorflow and jax backends; set KERAS_BACKEND=tensorflow "
        "(or jax) to measure your training step."
    )


def _check_array_file(path: str | None, option: str) -> str | None:
    """The absolute path of an ``.npy``/``.npz`` file named by ``option``."""
    if path is None:
        return None
    found = Path(path).expanduser()
    if not found.is_file():
        raise UserError(f"{option} file {path!r} not found: save it with numpy.save or savez.")
    return str(found.resolve())
