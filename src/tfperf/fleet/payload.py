"""What travels to the nodes: the user's model and inputs (and a profile to verify), never a path.

Contract:

- :func:`stage` copies what a workload needs into a fresh staging folder -- a ``.keras`` or
  ``.tflite`` file, a SavedModel directory, a factory's module (its file, or its top-level
  package's folder), the ``--inputs`` archive -- and returns a :class:`Payload`: the folder
  and the ``tfperf`` arguments that name the workload *relative to it* (``model/m.keras``,
  ``--inputs inputs.npz``). A built-in workload ships nothing.
- :meth:`Payload.archive` is the folder as one tar archive (bytes). The driver puts it in Ray's
  object store once (:mod:`tfperf.fleet.dispatch`) and every node's task gets it from there and
  unpacks it (:func:`unpack`) into the directory its commands run in, so the node's ``tfperf``
  finds the model where the arguments say, with no shared file system. (Ray's
  ``runtime_env`` ``working_dir`` ships a local folder only for a whole job, not for one task,
  and a fleet tune ships each kind its own profile.)
- :meth:`Payload.add` puts one more file in it (a tune's profile and converted model, for the
  hosts that verify it). :meth:`Payload.cleanup` removes the folder.

Nothing here imports Ray.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.modelref import find_module

MODEL_DIR = "model"
INPUTS = "inputs.npz"


@dataclass(frozen=True)
class Payload:
    """A staging folder shipped to every node and the workload's arguments relative to it."""

    folder: Path | None
    args: tuple[str, ...]

    def archive(self) -> bytes | None:
        """The folder as an uncompressed tar archive (``None`` when there is nothing to ship)."""
        if self.folder is None:
            return None
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for item in sorted(self.folder.iterdir()):
                tar.add(item, arcname=item.name)
        return buffer.getvalue()

    def add(self, name: str, data: bytes) -> Payload:
        """This payload with one more file ``name`` (a relative path) in its folder."""
        folder = self.folder or Path(tempfile.mkdtemp(prefix="tfperf-fleet-"))
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return Payload(folder, self.args)

    def copy(self) -> Payload:
        """An independent copy of the folder (to add files for one group of hosts)."""
        if self.folder is None:
            return self
        folder = Path(tempfile.mkdtemp(prefix="tfperf-fleet-"))
        shutil.copytree(self.folder, folder, dirs_exist_ok=True)
        return Payload(folder, self.args)

    def cleanup(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)


def _factory_source(path: str, search_path: str | None) -> Path:
    """The file or top-level package folder that holds a factory's module."""
    top = path.split(":", 1)[0].split(".")[0]
    spec = find_module(top)
    origin = getattr(spec, "origin", None)
    if spec is None or not origin or origin in ("built-in", "frozen"):
        raise UserError(
            f"the module of {path!r} cannot be found from {search_path or 'here'}; run from "
            "its folder so that tfperf fleet can ship it to the nodes."
        )
    file = Path(origin)
    return file.parent if spec.submodule_search_locations else file


def stage(workload: dict[str, Any]) -> Payload:
    """The payload of ``workload`` (a dict of :func:`tfperf.modelref.workload_from_args`)."""
    builtin = workload.get("name") if workload.get("kind") == "builtin" else workload.get("builtin")
    if builtin:  # a training built-in too: the node names it as this command did
        args = ("--workload", str(builtin), "--size", str(workload.get("size")))
        return Payload(None, (*args, "--batch", str(workload.get("batch", 1))))
    folder = Path(tempfile.mkdtemp(prefix="tfperf-fleet-"))
    try:
        path = str(workload["path"])
        if workload.get("format") == "factory":
            source = _factory_source(path, workload.get("search_path"))
            _copy(source, folder / source.name)
            model = path  # a factory is imported from the working directory, by name
        else:
            source = Path(path)
            _copy(source, folder / MODEL_DIR / source.name)
            model = f"{MODEL_DIR}/{source.name}"
        args = [model, "--batch", str(workload.get("batch", 1))]
        if workload.get("inputs"):
            _copy(Path(workload["inputs"]), folder / INPUTS)
            args += ["--inputs", INPUTS]
        if workload.get("unsafe"):
            args.append("--unsafe")
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise UserError(f"cannot copy the model to ship it to the nodes ({exc}).") from exc
    return Payload(folder, tuple(args))


def unpack(archive: bytes | None, target: Path) -> None:
    """Unpack :meth:`Payload.archive` into ``target`` (on the node); nothing for ``None``."""
    target.mkdir(parents=True, exist_ok=True)
    if archive is None:
        return
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        if not hasattr(tarfile, "data_filter"):  # Python 3.10 before .12, 3.11 before .4
            _refuse_what_the_data_filter_would(tar)
            tar.extractall(target)
            return
        try:
            tar.extractall(target, filter="data")
        except tarfile.FilterError as exc:
            raise _not_made_by_tfperf(exc.tarinfo.name) from exc


def _refuse_what_the_data_filter_would(tar: tarfile.TarFile) -> None:
    """Raise :class:`UserError` for a member that is not a plain file or folder inside the
    target: the payload never holds one, so an archive that does was not made by tfperf."""
    for member in tar.getmembers():
        parts = Path(member.name).parts
        if not (member.isfile() or member.isdir()) or member.name.startswith("/") or ".." in parts:
            raise _not_made_by_tfperf(member.name)


def _not_made_by_tfperf(name: str) -> UserError:
    return UserError(
        f"the shipped archive holds {name!r}, which is not a file or folder inside it; ship "
        "the model again from the driver with this tfperf."
    )
