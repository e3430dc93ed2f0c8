"""Where tfperf keeps its files: the store and the per-machine cache.

Contract:

- :func:`default_store_path` is ``<user data dir>/store.sqlite`` (platformdirs, app ``tfperf``).
- :func:`resolve_store_path` picks the store a command uses: the ``--store`` value beats the
  ``TFPERF_STORE`` environment variable, which beats the default. ``~`` is expanded; the path is
  not created and not checked here (:meth:`tfperf.store.Store.open` does that).
- :func:`cache_dir` is the per-user cache directory (``TFPERF_CACHE_DIR`` overrides it), created
  on first use; a cache there can always be deleted.
- :func:`read_text` reads a file a child wrote (its log, its record), never raising.

Nothing here imports anything heavier than platformdirs.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from tfperf.core.errors import UserError

APP_NAME = "tfperf"
STORE_ENV = "TFPERF_STORE"
CACHE_ENV = "TFPERF_CACHE_DIR"
STORE_FILENAME = "store.sqlite"


def default_store_path() -> Path:
    """The store used when neither ``--store`` nor ``TFPERF_STORE`` is given."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / STORE_FILENAME


def resolve_store_path(cli: str | os.PathLike[str] | None) -> Path:
    """The store path for a command: ``cli`` (``--store``) > ``TFPERF_STORE`` > the default."""
    if cli is not None and str(cli) != "":
        return Path(cli).expanduser()
    env = os.environ.get(STORE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return default_store_path()


def cache_dir() -> Path:
    """The per-user cache directory (``TFPERF_CACHE_DIR`` overrides it), created if missing.

    Raises :class:`~tfperf.core.errors.UserError` when it cannot be created.
    """
    env = os.environ.get(CACHE_ENV, "").strip()
    path = Path(env).expanduser() if env else Path(platformdirs.user_cache_dir(APP_NAME, False))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot create the cache directory {path} ({exc.strerror or exc}); "
            f"set {CACHE_ENV} to a writable directory."
        ) from exc
    return path


def read_text(path: str) -> str:
    """The text of ``path`` (undecodable bytes replaced), or ``""`` when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""
