"""tfperf.core.allocators against the real system libraries and real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import require
from tfperf.core import allocators
from tfperf.core.errors import UserError

CHILD = "from tfperf.core.allocators import current_allocator; print(current_allocator())"


def _child_allocator(ld_preload: str | None) -> str:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if ld_preload:
        env["LD_PRELOAD"] = ld_preload
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("name", sorted(allocators.ALLOCATOR_PACKAGES))
def test_preloaded_allocator_is_seen_in_the_child_maps(name: str) -> None:
    path = allocators.find_allocator(name)
    require(path is not None, f"{allocators.ALLOCATOR_PACKAGES[name]} is not installed")
    assert os.path.isabs(path) and os.path.isfile(path)
    assert _child_allocator(allocators.preload_env(name, None)) == name


def test_plain_process_runs_with_the_system_allocator() -> None:
    assert _child_allocator(None) == "system"


def test_available_allocators_lists_both_names() -> None:
    found = allocators.available_allocators()
    assert set(found) == {"tcmalloc", "jemalloc"}
    for path in found.values():
        assert path is None or os.path.isfile(path)


def test_allocator_in_maps_reads_real_maps_lines() -> None:
    jemalloc = (
        "7f1c2a400000-7f1c2a42a000 r--p 00000000 08:01 1234 "
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
    )
    tcmalloc = (
        "7f3b1d200000-7f3b1d210000 r-xp 00000000 08:01 99 "
        "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10\n"
    )
    libc = "7f3b1d000000-7f3b1d022000 r--p 00000000 08:01 5 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    assert allocators.allocator_in_maps(libc + jemalloc) == "jemalloc"
    assert allocators.allocator_in_maps(libc + tcmalloc) == "tcmalloc"
    assert allocators.allocator_in_maps(libc) == "system"
    assert allocators.allocator_in_maps(tcmalloc + jemalloc) == "tcmalloc"


def test_preload_env_replaces_another_allocator_and_keeps_other_libraries() -> None:
    path = allocators.find_allocator("jemalloc")
    require(path is not None, "libjemalloc2 is not installed")
    value = allocators.preload_env("jemalloc", "/opt/x/libfoo.so /usr/lib/libtcmalloc.so.4")
    assert value.split(":") == [path, "/opt/x/libfoo.so"]


def test_missing_allocator_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(allocators, "_SEARCH_DIRS", (str(tmp_path),))
    monkeypatch.setattr(allocators, "_ldconfig_entries", lambda: {})
    assert allocators.find_allocator("jemalloc") is None
    with pytest.raises(UserError, match="libjemalloc2"):
        allocators.preload_env("jemalloc", None)


def test_unknown_allocator_is_a_user_error() -> None:
    with pytest.raises(UserError, match="Unknown allocator"):
        allocators.find_allocator("mimalloc")
