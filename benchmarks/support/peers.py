"""Peer routers for `router_overhead.py --peers`: LiteLLM's proxy and the PyPI `vllm-router` (Rust), each in its
own venv under `.peers/` (git-ignored), each fronting the same fast backend as the direct and quantroute runs.

A peer that cannot be installed or started is reported with the reason and skipped: the table never shows a
number that was not measured in this run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from quantroute.ports import free_port

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / ".peers"
INSTALL_TIMEOUT_S = 1200
START_TIMEOUT_S = 120

# Figures quoted for these peers on a 2-core machine; printed beside the table for context, never mixed in.
REFERENCE = {"production-stack (Python)": "+1.05 ms p50, ~870 req/s@32",
             "LiteLLM": "+12 ms p50, ~93 req/s@32",
             "vllm-router (Rust)": "+0.16 ms p50, ~14,000 req/s@32"}


class PeerUnavailable(Exception):
    """The peer could not be installed or started here; the message says why."""


@dataclass(frozen=True)
class Peer:
    label: str
    venv: str  # folder under .peers/
    requirement: str  # what pip installs
    command: Callable[[Path, int, int, Path], list[str]]  # (venv bin, port, backend port, work dir) -> argv
    env: dict[str, str]
    ready_path: str  # GET here answers 200 once the peer routes


def _litellm_cmd(bin_: Path, port: int, bport: int, work: Path) -> list[str]:
    cfg = work / "litellm.yaml"
    cfg.write_text(f"""model_list:
  - model_name: llama3-8b
    litellm_params:
      model: openai/bench-int4
      api_base: http://127.0.0.1:{bport}/v1
      api_key: unused
litellm_settings:
  telemetry: false
""")
    return [str(bin_ / "litellm"), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)]


def _vllm_router_cmd(bin_: Path, port: int, bport: int, work: Path) -> list[str]:
    return [str(bin_ / "vllm-router"), "--host", "127.0.0.1", "--port", str(port),
            "--worker-urls", f"http://127.0.0.1:{bport}", "--policy", "round_robin",
            "--worker-startup-check-interval", "1", "--log-level", "warning",
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]


PEER_LIST = (
    # No master key: the quantroute run has no auth on completions either, and this is loopback only.
    Peer("LiteLLM proxy", "litellm", "litellm[proxy]", _litellm_cmd,
         {"LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
          "LITELLM_LOG": "ERROR"}, "/health/liveliness"),
    Peer("vllm-router (Rust)", "vllm-router", "vllm-router", _vllm_router_cmd, {}, "/health"),
)



def ensure_venv(peer: Peer) -> Path:
    """The peer's venv bin folder, installing it first when missing (a stamp records what was installed)."""
    venv = PEERS / peer.venv
    stamp = venv / ".installed"
    bin_ = venv / "bin"
    if stamp.exists() and stamp.read_text() == peer.requirement:
        return bin_
    print(f"  installing {peer.requirement!r} into {venv.relative_to(REPO)} (first run only) ...", flush=True)
    PEERS.mkdir(exist_ok=True)
    log = PEERS / f"{peer.venv}-install.log"
    try:
        with log.open("w") as f:
            if not (bin_ / "python").exists():
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=f, stderr=f)
            subprocess.run([str(bin_ / "python"), "-m", "pip", "install", "-q", peer.requirement], check=True,
                           stdout=f, stderr=f, timeout=INSTALL_TIMEOUT_S)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        raise PeerUnavailable(f"pip install {peer.requirement!r} failed ({e}); last lines of {log}:\n"
                              + _tail(log)) from None
    stamp.write_text(peer.requirement)
    return bin_


def start_peer(peer: Peer, bin_: Path, bport: int, work: Path) -> tuple[subprocess.Popen, int, Path]:
    port = free_port()
    argv = peer.command(bin_, port, bport, work)
    if not Path(argv[0]).exists():
        raise PeerUnavailable(f"{argv[0]} is missing after install")
    log = work / f"{peer.venv}.log"
    with log.open("w") as f:  # a file, not a pipe: a chatty peer must never block on a full pipe
        proc = subprocess.Popen(argv, cwd=work, env={**os.environ, **peer.env}, stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PeerUnavailable(f"exited with code {proc.returncode} at start; last lines:\n{_tail(log)}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}{peer.ready_path}", timeout=2).status_code == 200:
                return proc, port, log
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    stop(proc)
    raise PeerUnavailable(f"not ready on {peer.ready_path} within {START_TIMEOUT_S}s; last lines:\n{_tail(log)}")


def check_routes(port: int, body: bytes) -> None:
    """One real request through the peer before timing it: a peer that answers errors is not measured."""
    r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=body,
                   headers={"content-type": "application/json"}, timeout=30)
    if r.status_code != 200 or "choices" not in r.text:
        raise PeerUnavailable(f"a test request answered {r.status_code}: {r.text[:300]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def run_peers(bport: int, lua: Path, seconds: int, stream_body: bytes, measure, tmp: Path,
              body: bytes | None = None) -> list[dict]:
    """Measure every peer against the backend on `bport` with the caller's `measure`; a peer that cannot run
    yields a row with `unavailable` set (the reason) instead of numbers."""
    results = []
    for peer in PEER_LIST:
        print(f"== peer: {peer.label}", flush=True)
        proc = None
        try:
            bin_ = ensure_venv(peer)
            proc, port, _ = start_peer(peer, bin_, bport, tmp)
            check_routes(port, body or stream_body)
            results.append(measure(peer.label, port, "/v1/chat/completions", lua, seconds, stream_body))
        except PeerUnavailable as e:
            print(f"  {peer.label}: not measured: {e}", flush=True)
            results.append({"label": peer.label, "unavailable": str(e).splitlines()[0]})
        finally:
            if proc is not None:
                stop(proc)
    return results


def _tail(path: Path, n: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


__all__ = ["PEER_LIST", "REFERENCE", "run_peers"]
