"""A real Ray cluster of several nodes on this machine, talking over loopback only.

Ray registers a node at the machine's network address even when told ``--node-ip-address
127.0.0.1``, so the cluster runs inside a network namespace of its own in which only loopback
is up: a holder process made by ``unshare -n`` keeps the namespace, every ``ray start`` and
every tfperf driver enters it with ``nsenter --net``. Nothing in the namespace can reach
another interface. The cluster is stopped by killing the processes in that namespace, one by
one by pid -- never ``ray stop``, which stops every Ray process on the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
PORT = 6379
RAY = str(Path(sys.executable).with_name("ray"))


def can_run() -> str | None:
    """Why a loopback cluster cannot start here, or ``None``."""
    if not all(shutil.which(tool) for tool in ("unshare", "nsenter", "ip")):
        return "unshare, nsenter (util-linux) and ip (iproute2) are needed"
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install 'tfperf[ray]')"
    probe = ["unshare", "-n", "sh", "-c", "ip link set lo up"]
    done = subprocess.run(probe, capture_output=True, text=True)
    if done.returncode != 0:
        return (
            "a network namespace of its own needs root with CAP_SYS_ADMIN "
            f"(unshare -n: {done.stderr.strip()[:200]})"
        )
    return None


class LoopbackCluster:
    """Nodes of one Ray cluster in a loopback-only network namespace (module docstring)."""

    def __init__(self) -> None:
        # Short: Ray's socket paths under the temp dir must fit in 107 characters.
        self.root = Path(tempfile.mkdtemp(prefix="tfr", dir="/tmp"))
        self.holder = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", "ip link set lo up && exec sleep infinity"],
            start_new_session=True,
        )
        self.address = f"127.0.0.1:{PORT}"
        self.nodes: list[Path] = []
        self.ids: dict[Path, str] = {}
        self._wait_for_namespace()

    def _wait_for_namespace(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(psutil.Error):
                if psutil.Process(self.holder.pid).cmdline()[:1] == ["sleep"]:
                    return
            time.sleep(0.05)
        raise RuntimeError("the network namespace did not come up")

    @property
    def netns(self) -> str:
        return f"/proc/{self.holder.pid}/ns/net"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])]
        )
        env.update(RAY_ADDRESS=self.address, RAY_USAGE_STATS_ENABLED="0")
        env.update(extra or {})
        return env

    def inside(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` in the cluster's network namespace and wait for it."""
        kwargs.setdefault("env", self.env())
        return subprocess.run(["nsenter", f"--net={self.netns}", *argv], **kwargs)

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("env", self.env())
        return subprocess.Popen(["nsenter", f"--net={self.netns}", *argv], **kwargs)

    def add_node(self, cpus: int = 1) -> Path:
        """Start the head (first call) or one more node; its temp dir names it."""
        temp = self.root / f"n{len(self.nodes)}"
        common = ["--num-cpus", str(cpus), "--num-gpus", "0", "--temp-dir", str(temp)]
        common += ["--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
        if not self.nodes:
            argv = [RAY, "start", "--head", "--port", str(PORT), "--include-dashboard", "false"]
        else:
            argv = [RAY, "start", "--address", self.address]
        done = self.inside(argv + common, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"ray start failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        self.nodes.append(temp)
        flag = "--node_id="
        self.ids[temp] = next(
            a[len(flag) :] for a in self.raylet(temp).cmdline() if a.startswith(flag)
        )
        return temp

    def processes(self) -> list[psutil.Process]:
        """Every process in the cluster's network namespace (all of them started here)."""
        mine = os.readlink(self.netns)
        found = []
        for proc in psutil.process_iter():
            with contextlib.suppress(OSError, psutil.Error):
                if proc.pid != self.holder.pid and os.readlink(f"/proc/{proc.pid}/ns/net") == mine:
                    found.append(proc)
        return found

    def raylet(self, temp: Path) -> psutil.Process:
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                cmd = proc.cmdline()
                if cmd and cmd[0].endswith("raylet") and any(str(temp) in a for a in cmd):
                    return proc
        raise LookupError(f"no raylet of {temp}")

    def node_id(self, temp: Path) -> str:
        """The Ray node id of the node started with temp dir ``temp`` (alive or not)."""
        return self.ids[temp]

    def kill_node(self, temp: Path) -> None:
        """Kill one node as a machine that dies would: its raylet and all it started."""
        raylet = self.raylet(temp)
        victims = [raylet, *raylet.children(recursive=True)]
        victims += [p for p in self.processes() if any(str(temp) in a for a in _cmdline(p))]
        for proc in victims:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)

    def stop(self) -> None:
        """Kill every process of the namespace by pid, then the holder; remove the temp dir."""
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.holder.kill()
        self.holder.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def descendants(proc: psutil.Process, needle: str) -> list[psutil.Process]:
    """The processes ``proc`` started (at any depth) whose command line contains ``needle``."""
    found = []
    for child in proc.children(recursive=True):
        if needle in " ".join(_cmdline(child)):
            found.append(child)
    return found
