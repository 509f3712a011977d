"""A real PostgreSQL for the suite and the benches: Debian's server binaries, a cluster made by `initdb` in a
temporary directory, run as an unprivileged user on a loopback port, stopped and removed at the end.

    with Postgres.start() as pg:
        pg.dsn                      # postgresql://mcpx@127.0.0.1:PORT/mcpx
        pg.create_database("t1")    # a fresh database per test: postgresql://mcpx@127.0.0.1:PORT/t1
        pg.stop(); pg.restart()     # the server going away under a daemon, and coming back on the same port

PostgreSQL refuses to run as root; when the suite runs as root (CI containers do) the server runs as `nobody`,
which owns the cluster's directory. Authentication is `trust` on loopback only: the cluster lives for one run and
holds nothing but test data. Every wait is for an event (the server's log saying it is ready, a process exiting),
bounded; no sleep stands in for one.

    python tests/postgres.py      # start one and print its dsn, until stdin closes (for a bench or by hand)
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from harness import free_port

READY = b"database system is ready to accept connections"
START_PATIENCE = 60.0
USER = "mcpx"


def server_binaries() -> Path | None:
    """The newest PostgreSQL's bin directory Debian installed (postgresql-NN), or one on PATH; None without one."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name))
    if found:
        return found[-1].parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def _as_unprivileged() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when we are root, which PostgreSQL refuses to be; None when we are not."""
    if os.geteuid() != 0:
        return None
    nobody = pwd.getpwnam("nobody")
    return nobody.pw_uid, nobody.pw_gid


class Postgres:
    def __init__(self, bindir: Path, root: Path, port: int, owner: tuple[int, int] | None) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.log = root / "postgres.log"
        self.port = port
        self.owner = owner
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def dsn(self) -> str:
        return self.dsn_for(USER)

    def dsn_for(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    # ---------------------------------------------------------------- lifetime

    @classmethod
    @contextlib.contextmanager
    def start(cls) -> Iterator[Postgres]:
        bindir = server_binaries()
        if bindir is None:
            raise RuntimeError("no PostgreSQL server binaries (Debian: apt-get install postgresql; ./dev test does)")
        owner = _as_unprivileged()
        root = Path(tempfile.mkdtemp(prefix="mcpx-pg-"))
        pg = cls(bindir, root, free_port(), owner)
        try:
            if owner:
                os.chmod(root, 0o700)
                os.chown(root, *owner)
            pg._run([str(bindir / "initdb"), "-D", str(pg.data), "-U", USER, "--auth=trust", "--no-sync",
                     "-E", "UTF8", "--locale=C"])
            pg.restart()
            pg.create_database(USER)
            yield pg
        finally:
            pg.stop()
            shutil.rmtree(root, ignore_errors=True)

    def _preexec(self) -> None:
        os.setsid()  # its own group, so a signal to ours (a test runner stopped) does not reach it first
        if self.owner:
            os.setgid(self.owner[1])
            os.setgroups([])
            os.setuid(self.owner[0])

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(argv, capture_output=True, preexec_fn=self._preexec, cwd=self.root, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")

    def restart(self) -> None:
        """Start the server (again, on the same port and data), and return once its log says it is ready."""
        if self.proc and self.proc.poll() is None:
            return
        log = open(self.log, "ab")  # noqa: SIM115 - the server writes it for as long as it runs
        if self.owner:
            os.chown(self.log, *self.owner)
        start = self.log.stat().st_size
        # fsync off and the rest: a throwaway cluster, where durability across a power cut is not what is tested
        argv = [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.root),
                "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB"]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, preexec_fn=self._preexec, cwd=self.root)
        log.close()
        deadline = time.monotonic() + START_PATIENCE
        while True:
            with open(self.log, "rb") as f:
                f.seek(start)
                if READY in f.read():
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.proc.returncode}): {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres not ready within {START_PATIENCE:.0f}s: {self.log.read_text()[-2000:]}")
            time.sleep(0.02)  # the log file gives no event to wait on; each look is a read of a few bytes

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (SIGINT: clients disconnected, a clean shutdown) or `immediate` (SIGQUIT)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGQUIT if mode == "immediate" else signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def create_database(self, name: str) -> str:
        """A fresh, empty database; its dsn. Made by SQL on a connection to the cluster's own `postgres` database:
        `createdb` made the same, as a process of its own each time (measured: 3x the time, 10x the CPU)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn_for("postgres"), autocommit=True, connect_timeout=int(START_PATIENCE)) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn_for(name)

    def __enter__(self) -> Postgres:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def main() -> None:
    with Postgres.start() as pg:
        print(pg.dsn, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
