"""The other workers of this host's router, reached over owner-only Unix sockets.

`quantroute router --workers N` runs N processes on one port, and the kernel hands each connection to one of them.
Replicas on several hosts are addressed one by one (the admin client calls each), but workers behind one port
cannot be: a scrape of /metrics would see one worker's counters, an unpin would drop the pin from one worker's
cache while another kept routing the session by its old pin, and a drained node would keep getting traffic from
the other workers until their next node refresh. So each worker serves a control socket in a directory the
supervisor made (mode 0700), and the worker an admin call or a scrape reached asks the others.

A worker's name is a slot number, the lowest one free when it started (`flock` on `slot-K.lock`, released by the
kernel when the process dies), so a restarted worker takes its predecessor's name and /metrics's `worker` label
has at most N values. The protocol is one JSON line asking, then the reply: `ok` or `error` and a newline, the
body, the end of the stream."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

log = logging.getLogger(__name__)

Handler = Callable[[dict], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class PeerReply:
    """One other worker's answer: `body` when it answered, else `error` saying why not."""

    worker: str
    body: bytes | None = None
    error: str | None = None


class WorkerPeers:
    def __init__(self, directory: Path | str, *, timeout_s: float = 2.0) -> None:
        self.dir = Path(directory)
        self.timeout_s = timeout_s
        self.worker: str | None = None  # this worker's slot, once started
        self._lock_fd: int | None = None
        self._server: asyncio.AbstractServer | None = None
        self._handlers: dict[str, Handler] = {}

    def _socket(self, worker: str) -> Path:
        return self.dir / f"worker-{worker}.sock"

    def _claim_slot(self) -> str:
        """The lowest slot no live worker holds. The lock lives as long as this process (or until `close`)."""
        for n in range(10_000):
            fd = os.open(self.dir / f"slot-{n}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._lock_fd = fd
            return str(n)
        raise RuntimeError(f"no free worker slot in {self.dir}")

    async def start(self, handlers: dict[str, Handler]) -> str:
        """Take a slot and answer the other workers' questions with `handlers` (op name -> body)."""
        self._handlers = dict(handlers)
        self.worker = self._claim_slot()
        path = self._socket(self.worker)
        # a socket left by the slot's previous holder (killed): nobody can be listening on it, we hold the lock
        path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(self._answer, path=str(path))
        return self.worker

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.worker is not None:
            self._socket(self.worker).unlink(missing_ok=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                ask = orjson.loads(await asyncio.wait_for(reader.readline(), self.timeout_s))
                handler = self._handlers[ask["op"]]
            except (TimeoutError, orjson.JSONDecodeError, KeyError, TypeError) as e:
                writer.write(b"error\nbad request: " + repr(e).encode())
            else:
                try:
                    writer.write(b"ok\n" + await handler(ask))
                except Exception as e:  # the asking worker reports it; this one keeps serving
                    log.exception("answering worker peer op %s", ask.get("op"))
                    writer.write(b"error\n" + f"{type(e).__name__}: {e}".encode())
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the asking worker gave up (its timeout) or died
        finally:
            writer.close()

    def others(self) -> list[str]:
        """The slots of the other workers listening now, by the sockets in the directory."""
        out = []
        for p in self.dir.glob("worker-*.sock"):
            w = p.name[len("worker-"):-len(".sock")]
            if w != self.worker:
                out.append(w)
        return sorted(out, key=lambda w: (len(w), w))

    async def ask(self, op: str, **args) -> list[PeerReply]:
        """Ask every other worker at once; one reply each. A worker that died since its socket was listed (the
        connection is refused) is left out: whatever it held in memory died with it."""
        line = orjson.dumps({"op": op, **args}) + b"\n"
        replies = await asyncio.gather(*(self._ask_one(w, line) for w in self.others()))
        return [r for r in replies if r is not None]

    async def _ask_one(self, worker: str, line: bytes) -> PeerReply | None:
        writer = None
        try:
            async with asyncio.timeout(self.timeout_s):
                reader, writer = await asyncio.open_unix_connection(str(self._socket(worker)))
                writer.write(line)
                await writer.drain()
                data = await reader.read()
        except (ConnectionRefusedError, FileNotFoundError):
            return None
        except TimeoutError:
            return PeerReply(worker, error=f"no answer within {self.timeout_s:g} s")
        except OSError as e:
            return PeerReply(worker, error=f"{type(e).__name__}: {e}")
        finally:
            if writer is not None:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
        status, _, body = data.partition(b"\n")
        if status != b"ok":
            return PeerReply(worker, error=body.decode(errors="replace") or "no answer (the worker stopped?)")
        return PeerReply(worker, body=body)
