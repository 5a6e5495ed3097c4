"""A fresh database per benchmarked router configuration: a SQLite file, or a new schema in a PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path


class Database:
    """A fresh database per router configuration: a SQLite file, or a new schema in the given PostgreSQL.

    `tree`: the source tree whose migrations create the schema (router_paired.py runs other revisions from git
    worktrees, and a router refuses a schema newer or older than its own); None: this process's quantroute."""

    def __init__(self, spec: str, tmp: Path, *, tree: Path | None = None) -> None:
        self.kind = "sqlite" if spec == "sqlite" else "postgres"
        self.spec, self.tmp, self.tree = spec, tmp, tree
        self.url = ""
        self.schema: str | None = None

    def __enter__(self) -> Database:
        self._create()
        if self.tree is not None:  # that tree's `quantroute db upgrade`, as before its routers start
            subprocess.run([sys.executable, "-m", "quantroute.cli.main", "db", "upgrade", "--db", self.url],
                           cwd=self.tree, env={**os.environ, "PYTHONPATH": str(self.tree)}, check=True,
                           stdout=subprocess.DEVNULL)
            return self
        from quantroute.db.engine import init_db, make_engine

        eng = make_engine(self.url)  # what `quantroute db upgrade` does before routers start
        init_db(eng)
        eng.dispose()
        return self

    def _create(self) -> None:
        if self.kind == "sqlite":
            self.url = f"sqlite:///{self.tmp / f'bench-{uuid.uuid4().hex[:8]}.db'}"
            return
        from quantroute.db.engine import database_url
        from quantroute.demo.simulated import fresh_schema_url

        self.schema = f"bench_{uuid.uuid4().hex[:10]}"
        self.url = fresh_schema_url(database_url(self.spec), self.schema)

    def __exit__(self, *exc) -> None:
        if self.schema is None:
            return
        from sqlalchemy import text

        from quantroute.db.engine import database_url, make_engine

        eng = make_engine(database_url(self.spec))
        with eng.begin() as c:
            c.execute(text(f'DROP SCHEMA "{self.schema}" CASCADE'))
        eng.dispose()

    def counts(self) -> tuple[int, int]:
        """(request_log rows, session_pin rows): what the router wrote during its run."""
        from sqlalchemy import text

        from quantroute.db.engine import make_engine

        eng = make_engine(self.url)
        try:
            with eng.connect() as c:
                return tuple(c.execute(text(f"select count(*) from {t}")).scalar_one()  # type: ignore[return-value]  # a tuple of the counts, one per table
                             for t in ("request_log", "session_pin"))
        finally:
            eng.dispose()

    def server_pid(self) -> int | None:
        """The PostgreSQL server's main process when it runs on this host (its CPU time, with its backends',
        is the database's share of a request); None for SQLite (its work is in the router's own processes) or a
        server elsewhere."""
        return None if self.kind == "sqlite" else postgres_server_pid(self.url)


def postgres_server_pid(url: str) -> int | None:
    """The main process of the PostgreSQL server at `url` when it runs on this host, else None."""
    from sqlalchemy import text

    from quantroute.db.engine import make_engine

    eng = make_engine(url)
    try:
        with eng.connect() as c:  # read while the backend lives: its parent is the server
            backend = c.execute(text("select pg_backend_pid()")).scalar_one()
            try:
                status = Path(f"/proc/{backend}/status").read_text()
            except OSError:  # not a process of this host
                return None
    finally:
        eng.dispose()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))

