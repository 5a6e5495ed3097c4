"""Webhook notifications against a real HTTP receiver on loopback: every notable rollout event arrives once, in
order, as Slack-compatible JSON with structured fields; a receiver that fails is retried with backoff and holds
later notifications back (order); one that never answers is given up after max_attempts and shown as failed."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from quantroute.clock import utcnow
from quantroute.controller import webhooks
from quantroute.db import notification as outbox
from quantroute.db.engine import session as db_session
from quantroute.policy.store import PolicyStore
from quantroute.ports import free_port
from tests.rollout.conftest import MODEL, policy_data, progressing_rollout, write_v1


class Receiver:
    """A local HTTP server that records JSON bodies; the first `fail_first` posts get a 503."""

    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[dict] = []
        self.statuses: list[int] = []
        self.fail_left = fail_first
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                code = 503 if outer.fail_left > 0 else 200
                outer.fail_left -= code == 503
                if code == 200:
                    outer.bodies.append(body)
                outer.statuses.append(code)
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"ok" if code == 200 else b"busy")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver(fail_first=2)
    yield r
    r.close()


@pytest.fixture
def svc(tmp_path: Path, engine):
    write_v1(tmp_path / "policies", policy_data())
    return progressing_rollout(PolicyStore(tmp_path / "policies", engine), engine)


def run_until_done(engine, urls, backoff, *, rounds: int = 50):
    """Delivery rounds with the clock moved past each retry delay (no sleeping on backoff)."""
    now = utcnow()
    with httpx.Client(timeout=5) as client:
        for _ in range(rounds):
            webhooks.deliver(engine, client, urls, backoff, now=now)
            with db_session(engine) as s:
                if not any(outbox.undelivered(session=s, url=u, since=now - timedelta(hours=1)) for u in urls):
                    return
            now += timedelta(seconds=backoff.first_s * 2 ** 6)


def test_deliveries_arrive_in_order_after_retries_with_the_figures(svc, engine, receiver):
    svc.step(MODEL, by="alice")
    svc.rollback(MODEL, by="alice", reason="answers look off")
    with db_session(engine) as s:
        sent = [(n.kind, n.payload["message"]) for n in s.exec(outbox.select(outbox.Notification)
                                                                .order_by(outbox.Notification.id))]
    assert [k for k, _ in sent] == ["gate_passed", "awaiting_approval", "step", "step", "rollback", "rolled_back"]

    backoff = webhooks.Backoff(first_s=0.5, max_attempts=5)
    with httpx.Client(timeout=5) as client:
        out = webhooks.deliver(engine, client, [receiver.url], backoff)
    assert (out.delivered, out.failed_attempts) == (0, 1)  # the first 503 holds everything behind it
    with db_session(engine) as s:
        failing = outbox.failures(session=s, since=utcnow() - timedelta(hours=1))
    assert len(failing) == 1 and "HTTP 503" in failing[0][1].last_error  # visible while it is retried
    run_until_done(engine, [receiver.url], backoff)

    assert receiver.statuses[:3] == [503, 503, 200]
    assert [(b["event"], b["message"]) for b in receiver.bodies] == sent  # each once, in order
    body = receiver.bodies[-2]
    assert body["text"].startswith(f"[quantroute] {MODEL}: rolling back") and "answers look off" in body["text"]
    assert (body["phase_before"], body["phase"], body["percent_before"], body["percent"]) == \
        ("progressing", "rolling-back", 50, 0)
    with db_session(engine) as s:
        assert outbox.failures(session=s, since=utcnow() - timedelta(hours=1)) == []


def test_a_breach_notification_carries_the_guard_figures(svc, engine, receiver):
    from quantroute.db.request_log import RequestLog

    with db_session(engine) as s:
        s.add_all(RequestLog(ts=utcnow(), model=MODEL, deployment=svc.status(MODEL).candidate, arm="candidate",
                             status=500, latency_ms=5.0) for _ in range(30))
        s.commit()
    svc.evaluate_guards(MODEL, by="controller")
    run_until_done(engine, [receiver.url], webhooks.Backoff(first_s=0.1))
    kinds = [b["event"] for b in receiver.bodies]
    assert kinds[-3:] == ["breach", "rollback", "rolled_back"]
    figures = receiver.bodies[-3]["figures"]
    assert figures["status"] == "breach" and figures["breaches"][0]["guard"] == "error_rate"
    assert figures["candidate"]["errors"] == 30 and figures["breaches"][0]["value"] > figures["breaches"][0]["limit"]


def test_a_receiver_that_never_answers_is_given_up_and_shown(svc, engine):
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    backoff = webhooks.Backoff(first_s=0.1, max_attempts=3)
    run_until_done(engine, [dead], backoff)
    with db_session(engine) as s:
        failed = outbox.failures(session=s, since=utcnow() - timedelta(hours=1))
    assert failed and all(d.status == "failed" and d.attempts == 3 and "ConnectError" in d.last_error
                          for _, d in failed)
