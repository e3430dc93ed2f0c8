"""The node's side of a fleet command, run here without a cluster: what travels, and the
version check."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest

import tfperf
from tfperf import __version__
from tfperf.core.errors import UserError
from tfperf.fleet.node import Job, Step, run_job
from tfperf.fleet.payload import stage, unpack


def test_a_node_with_another_tfperf_runs_nothing_and_says_what_to_install():
    report = run_job(Job((Step("doctor"),), tfperf_version="0.0.1", timeout_s=10))
    assert report["status"] == "incompatible" and report["steps"] == {}
    assert f"runs tfperf {__version__} and the driver 0.0.1" in report["reason"]
    assert "install tfperf==0.0.1" in report["reason"]


def test_a_node_with_the_same_version_but_other_code_runs_nothing(tmp_path):
    import shutil
    import subprocess
    import sys

    from tfperf.core.codeid import code_identity

    # another install: this package's files with one line changed, version unchanged
    other = tmp_path / "site"
    shutil.copytree(Path(tfperf.__file__).parent, other / "tfperf")
    with (other / "tfperf" / "fleet" / "node.py").open("a") as edited:
        edited.write("\n# a local change\n")
    code = "from tfperf.core.codeid import code_identity; print(code_identity())"
    theirs = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"PYTHONPATH": str(other)}, check=True).stdout.strip()
    assert theirs.startswith(f"{__version__}+") and theirs != code_identity()

    job = Job((Step("history"),), tfperf_version=__version__, timeout_s=60, tfperf_code=theirs)
    report = run_job(job)
    assert report["status"] == "incompatible" and report["steps"] == {}
    assert "the same version, other code" in report["reason"] and theirs in report["reason"]
    same = run_job(Job((Step("history"),), __version__, 60, tfperf_code=code_identity()))
    assert same["status"] == "ok" and same["tfperf_code"] == code_identity()
    assert same["steps"]["history"]["status"] == "ok"


def test_a_model_file_and_its_inputs_travel_as_one_archive_named_relative_to_it(tmp_path):
    model = tmp_path / "m.keras"
    model.write_bytes(b"model bytes")
    inputs = tmp_path / "x.npz"
    inputs.write_bytes(b"inputs")
    workload = {
        "kind": "model",
        "path": str(model),
        "format": "keras",
        "inputs": str(inputs),
        "unsafe": True,
        "batch": 4,
    }
    payload = stage(workload)
    try:
        assert payload.args == (
            "model/m.keras",
            "--batch",
            "4",
            "--inputs",
            "inputs.npz",
            "--unsafe",
        )
        node = tmp_path / "node"
        unpack(payload.archive(), node)
        assert (node / "model" / "m.keras").read_bytes() == b"model bytes"
        assert (node / "inputs.npz").read_bytes() == b"inputs"
    finally:
        payload.cleanup()


def test_a_factory_ships_its_package_and_a_builtin_ships_nothing(tmp_path, monkeypatch):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text("def build():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    payload = stage(
        {
            "kind": "model",
            "path": "mypkg.models:build",
            "format": "factory",
            "search_path": str(tmp_path),
            "batch": 1,
        }
    )
    try:
        assert payload.args[0] == "mypkg.models:build"
        unpack(payload.archive(), tmp_path / "node")
        assert (tmp_path / "node" / "mypkg" / "models.py").is_file()
    finally:
        payload.cleanup()
    builtin = stage({"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1})
    assert builtin.archive() is None
    assert builtin.args == ("--workload", "mlp", "--size", "tiny", "--batch", "1")


def test_a_config_travels_as_the_set_and_env_arguments_that_name_it():
    from tfperf.core.config import Config
    from tfperf.fleet.node import config_args

    config = Config.parse(["onednn=off", "intra_threads=2"], ["OMP_NUM_THREADS=1"])
    args = config_args(config)
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    envs = [args[i + 1] for i, a in enumerate(args) if a == "--env"]
    assert Config.parse(sets, envs) == config
    assert config_args(Config()) == []


def test_a_verification_without_its_shipped_profile_fails_with_the_reason(tmp_path):
    from tfperf.fleet.node import run_step

    step = Step("bench", ("--workload", "mlp"), profile="tuned/profile.json")
    report = run_step(step, tmp_path / "out", 10, {}, cwd=tmp_path)
    assert report["status"] == "failed"
    assert "profile shipped to this node is missing" in report["reason"]


def _archive_escaping_its_folder() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = b"not for the node"
        member = tarfile.TarInfo("../escaped.txt")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("filters", ["with extraction filters", "a Python without them"])
def test_an_archive_that_escapes_its_folder_is_refused_and_writes_nothing(
    filters, tmp_path, monkeypatch
):
    if filters == "a Python without them":  # 3.10 before .12, 3.11 before .4
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
        package = tmp_path / "mypkg"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "models.py").write_text("def build():\n    pass\n")
        monkeypatch.chdir(tmp_path)
        shipped = stage({"kind": "model", "path": "mypkg.models:build", "format": "factory",
                         "search_path": str(tmp_path), "batch": 1})
        try:
            unpack(shipped.archive(), tmp_path / "node")
        finally:
            shipped.cleanup()
        assert (tmp_path / "node" / "mypkg" / "models.py").is_file()
    target = tmp_path / "inner" / "node"
    refused = re.escape("'../escaped.txt', which is not a file or folder inside")
    with pytest.raises(UserError, match=refused):
        unpack(_archive_escaping_its_folder(), target)
    assert not (tmp_path / "inner" / "escaped.txt").exists()
