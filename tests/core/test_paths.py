"""tfperf.core.paths: store path precedence and the cache directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfperf.core import paths
from tfperf.core.errors import UserError


def test_cli_beats_env_beats_default(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TFPERF_STORE", str(tmp_path / "env.sqlite"))
    assert paths.resolve_store_path(str(tmp_path / "cli.sqlite")) == tmp_path / "cli.sqlite"
    assert paths.resolve_store_path(None) == tmp_path / "env.sqlite"
    monkeypatch.delenv("TFPERF_STORE")
    assert paths.resolve_store_path(None) == paths.default_store_path()
    monkeypatch.setenv("TFPERF_STORE", "  ")
    assert paths.resolve_store_path("") == paths.default_store_path()


def test_default_store_is_in_user_data_dir(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = paths.default_store_path()
    assert path == tmp_path / "data" / "tfperf" / "store.sqlite"
    assert not path.exists()


def test_tilde_is_expanded(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert paths.resolve_store_path("~/x.sqlite") == tmp_path / "x.sqlite"


def test_cache_dir_created_and_overridable(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path / "c" / "d"))
    assert paths.cache_dir() == tmp_path / "c" / "d"
    assert (tmp_path / "c" / "d").is_dir()
    monkeypatch.delenv("TFPERF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir() == tmp_path / "xdg" / "tfperf"


def test_cache_dir_unwritable_is_a_user_error(monkeypatch, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(UserError, match="TFPERF_CACHE_DIR"):
        paths.cache_dir()
