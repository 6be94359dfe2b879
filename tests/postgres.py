"""A throwaway PostgreSQL server from the machine's own binaries (Debian's postgresql package),
on loopback, in a temporary directory. initdb refuses to run as root, so as root the server runs
as the `postgres` user."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import free_port


def postgres_bin() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def why_unavailable() -> str | None:
    if postgres_bin() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a `postgres` user to run the server as"
    return None


def _run(args: list[str], as_postgres: bool) -> None:
    command = ["runuser", "-u", "postgres", "--", *args] if as_postgres else args
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)


@contextlib.contextmanager
def postgres_server(database: str = "mlflow") -> Iterator[str]:
    """Yields a SQLAlchemy URI, postgresql://mlflow@127.0.0.1:PORT/DATABASE."""
    binaries = postgres_bin()
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="pg-test-"))
    root.chmod(0o755)
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if as_postgres:
        user = pwd.getpwnam("postgres")
        for path in (root, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    port = free_port()
    _run(
        [str(binaries / "initdb"), "-D", str(data), "-U", "mlflow", "--auth=trust", "-E", "UTF8"], as_postgres
    )
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    _run(
        [
            str(binaries / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "server.log"),
            "-w",
            "start",
        ],
        as_postgres,
    )
    try:
        _run(
            [str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "mlflow", database],
            as_postgres,
        )
        yield f"postgresql://mlflow@127.0.0.1:{port}/{database}"
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            _run([str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], as_postgres)
        shutil.rmtree(root, ignore_errors=True)


def fresh_databases(postgres_url: str, *names: str) -> list[str]:
    """New empty databases on the session's PostgreSQL server, as URLs."""
    import psycopg
    from sqlalchemy import make_url

    server = make_url(postgres_url)
    connect = {"host": server.host, "port": server.port, "user": server.username, "dbname": server.database}
    with psycopg.connect(**connect, autocommit=True) as connection:
        for name in names:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # PostgreSQL 13+
            connection.execute(f"CREATE DATABASE {name}")
    return [server.set(database=name).render_as_string(hide_password=False) for name in names]
