"""What tracing costs the router: routers with no tracing code, with tracing off, and on (sampling 1 % and every
request), side by side against the same minimal backend, in interleaved short wrk runs.

- `no tracing code`: this checkout's HEAD with the router's tracing hooks taken out (HOOKS below, applied in a
  temporary git worktree): the request path as if tracing did not exist, everything else as now. `--base REV` runs
  a revision of your choosing instead.
- `off`: this working tree, no OTEL_* variables: the router holds no tracer and a request pays a None check.
- `on 1 %` and `on 100 %`: OTEL_EXPORTER_OTLP_ENDPOINT set to a sink in this process that takes OTLP/HTTP posts
  and counts their bytes (a collector that does no work), with OTEL_TRACES_SAMPLER=traceidratio at 0.01 and 1.0.
  A sampled request makes three spans (request, decision, upstream attempt); an unsampled one makes non-recording
  spans and still sends a traceparent to the node.

All four run at once, each on a fresh SQLite database, and the runs rotate their order every round so each round's
host state is shared. Printed per router: p50 and p99 at c=1 and req/s at c=32 (medians over rounds, with min-max),
the ratio against `no tracing code`, the router's CPU per request at c=32, and what reached the sink.

    python benchmarks/tracing_overhead.py                 # 5 rounds of 3 s
    python benchmarks/tracing_overhead.py --rounds 9 --seconds 4 --sessions new
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import router_overhead as ro
from router_paired import checkout, imports_from
from support import wrk

# The router's tracing hooks, taken out of HEAD's request path for `no tracing code`: (file, pattern, replacement),
# each pattern required to match. A hook reshaped without this list fails the bench (then give --base REV).
_IND = r"^[ \t]+"
_APP, _FWD = "quantroute/router/app.py", "quantroute/router/path/forward.py"
HOOKS: tuple[tuple[str, str, str], ...] = (
    (_APP, r"^from quantroute\.router\.path import trace\n", ""),
    (_APP, r"^from quantroute\.tracing import Tracing\n", ""),
    (_APP, _IND + r"self\.tracing: Tracing \| None = None.*\n", ""),
    (_APP, _IND + r"self\.tracing = Tracing\.from_env\(.*\n", ""),
    (_APP, r", tracing=self\.tracing\)", ")"),
    (_APP, _IND + r"if self\.tracing is not None:\n" + _IND + r"await .*self\.tracing\.shutdown.*\n", ""),
    (_APP, _IND + r"tracing = self\.tracing\n", ""),
    (_APP, r"ForwardResult\(span=trace\.request_span\(.*\) if tracing is not None else None\)", "ForwardResult()"),
    (_APP, _IND + r"decide_ns = time\.time_ns\(\) if tracing is not None else 0\n", ""),
    (_APP, _IND + r"if tracing is not None:\n" + _IND + r"trace\.decided\(.*\n", ""),
    (_APP, _IND + r"if out\.span is not None:\n" + _IND + r"trace\.finished\(.*\n", ""),
    (_FWD, r"^from quantroute\.router\.path import trace\n", ""),
    (_FWD, r"^from quantroute\.tracing import Tracing\n", ""),
    (_FWD, _IND + r"upstream_status: int = 0.*\n", ""),
    (_FWD, _IND + r"span: Any = None.*\n", ""),
    (_FWD, r",\s*tracing: Tracing \| None = None\)", ")"),
    (_FWD, _IND + r"self\.tracing = tracing\n", ""),
    (_FWD, _IND + r"tracing = self\.tracing if out\.span is not None else None\n", ""),
    (_FWD, _IND + r"hop, hop_headers = \(trace\.attempt\(.*\) if tracing is not None\n"
     r"\s*else \(None, fwd_headers\)\)\n", ""),
    (_FWD, _IND + r"done = False\n", ""),
    (_FWD, r"\bhop_headers\b", "fwd_headers"),
    (_FWD, _IND + r"if hop is not None:\n" + _IND + r"trace\.attempt_done\(.*\n", ""),
    (_FWD, _IND + r"out\.upstream_status = resp\.status_code\n", ""),
)


class Sink:
    """An OTLP/HTTP endpoint that accepts every export and counts it (no decoding: its CPU is the router's host's)."""

    def __init__(self) -> None:
        self.posts = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("content-length", 0))
                self.rfile.read(n)
                sink.posts += 1
                sink.bytes += n
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def strip_hooks(read) -> dict[str, str]:
    """The HOOKED files' text (`read(name)`) with HOOKS taken out; SystemExit when a hook is not found as listed."""
    texts: dict[str, str] = {}
    for name, pattern, replacement in HOOKS:
        text, n = re.subn(pattern, replacement, texts.get(name) or read(name), flags=re.M)
        if n == 0:
            raise SystemExit(f"{name} has no tracing hook like /{pattern}/ (reshaped?): update HOOKS, or give --base")
        texts[name] = text
    for name, text in texts.items():
        left = [line for line in text.splitlines()
                if re.search(r"\btrac(e|ing)\b", line) and not line.lstrip().startswith("#")]
        if left:
            raise SystemExit(f"{name}: tracing hooks left after taking them out: {left}; update HOOKS")
        compile(text, name, "exec")
    return texts


def without_tracing(tmp: Path) -> tuple[Path, str]:
    """HEAD in a worktree with HOOKS taken out of the router's request path."""
    tree = checkout("HEAD", tmp)
    for name, text in strip_hooks(lambda name: (tree / name).read_text()).items():
        (tree / name).write_text(text)
    return tree, "HEAD with the router's tracing hooks taken out"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds; figures are medians with min-max [5]")
    ap.add_argument("--seconds", type=int, default=3, help="length of each wrk run [3]")
    ap.add_argument("--sessions", choices=wrk.SESSION_MODES, default="none", help="session mode [none]")
    ap.add_argument("--base", default=None, help="git revision for the `no tracing code` router [HEAD less the "
                                                 "tracing hooks]")
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds < 1:
        ap.error("--rounds and --seconds must be >= 1")
    if not shutil.which(wrk.WRK):
        raise SystemExit(f"{wrk.WRK} not found (Debian package wrk)")
    try:
        import opentelemetry.sdk  # noqa: F401 - the `on` routers need it
    except ImportError:
        raise SystemExit("pip install 'quantroute[otel]' (the `on` routers export spans)") from None

    tmp = Path(tempfile.mkdtemp(prefix="qr-tracing-"))
    shutil.copytree(ro.REPO / "policies", tmp / "policies", ignore=shutil.ignore_patterns("active"))
    sinks = {"on 1 %": Sink(), "on 100 %": Sink()}
    trees: list[Path] = []
    try:
        with contextlib.ExitStack() as stack:
            if args.base is None:
                base, described = without_tracing(tmp)
            else:
                base, described = checkout(args.base, tmp), args.base
            trees.append(base)
            imports_from(base, {"PYTHONPATH": str(base)})
            # a batch every 200 ms, and a queue that holds a second of spans at c=32: nothing dropped, all paid for
            otel = {"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
                    "OTEL_TRACES_SAMPLER": "traceidratio"}
            arms = {"no tracing code": (base, {}), "off": (ro.REPO, {}),
                    **{name: (ro.REPO, {**otel, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url,
                                        "OTEL_TRACES_SAMPLER_ARG": "0.01" if name == "on 1 %" else "1.0"})
                       for name, sink in sinks.items()}}
            bports = [ro.free_port() for _ in ro.BACKENDS]
            for p, (dep, _, _) in zip(bports, ro.BACKENDS):
                stack.callback(ro.stop, ro.start([ro.PY, str(ro.HERE / "support" / "fast_backend.py"), str(p), dep,
                                                  "0"]))
            for p in bports:
                ro.wait_port(p)
            routers = {}
            for name, (tree, env) in arms.items():
                db = stack.enter_context(ro.Database("sqlite", tmp, tree=tree if tree != ro.REPO else None))
                port, proc = ro.launch_router(db, 1, tmp / "policies", bports,
                                              tmp / f"router-{name.replace(' ', '-')}.log", env=env, tree=tree)
                stack.callback(ro.stop, proc)
                routers[name] = (f"http://127.0.0.1:{port}/v1/chat/completions", proc)
            time.sleep(1.5)
            rows = measure(args, tmp, routers, sinks)
            report(args, rows, described)
    finally:
        for tree in trees:
            subprocess.run(["git", "-C", str(ro.REPO), "worktree", "remove", "--force", str(tree)], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


def measure(args, tmp: Path, routers: dict, sinks: dict[str, Sink]) -> dict[str, dict]:
    body = json.dumps(ro.BODY).encode()
    names = list(routers)
    got: dict[str, dict] = {n: {"p50": [], "p99": [], "rps": [], "cpu_us": [], "errors": 0, "requests": 0}
                            for n in names}
    for url, _ in routers.values():
        wrk.run_wrk(url, wrk.lua_script(tmp, body, args.sessions), 8, 1)
    for sink in sinks.values():
        sink.posts = sink.bytes = 0
    for i in range(args.rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            url, proc = routers[name]
            c1 = wrk.run_wrk(url, wrk.lua_script(tmp, body, args.sessions), 1, args.seconds)
            cpu0 = ro.cpu_seconds(proc.pid)
            c32 = wrk.run_wrk(url, wrk.lua_script(tmp, body, args.sessions), 32, args.seconds)
            cpu = ro.cpu_seconds(proc.pid) - cpu0
            g = got[name]
            g["p50"].append(c1["p50_ms"])
            g["p99"].append(c1["p99_ms"])
            g["rps"].append(c32["rps"])
            g["cpu_us"].append(cpu / c32["requests"] * 1e6)
            g["errors"] += c1["errors"] + c1["timeouts"] + c32["errors"] + c32["timeouts"]
            g["requests"] += c1["requests"] + c32["requests"]
        print(f"round {i + 1}/{args.rounds}: " + ", ".join(f"{n} {got[n]['rps'][-1]:.0f} req/s" for n in names),
              flush=True)
    time.sleep(1.0)  # the last batches leave the routers
    for name, sink in sinks.items():
        got[name]["sink"] = (sink.posts, sink.bytes)
    return got


def _spread(xs: list[float], fmt: str) -> str:
    return f"{statistics.median(xs):{fmt}} ({min(xs):{fmt}}-{max(xs):{fmt}})"


def report(args, rows: dict[str, dict], base: str) -> None:
    ref = rows["no tracing code"]
    print(f"\nno tracing code = {base}; sessions {args.sessions}, {args.rounds} rounds of {args.seconds} s, one "
          "worker each, SQLite; wrk, the backend, the sink and all four routers share this host's cores")
    print("| router | p50 ms at c=1 | p99 ms at c=1 | req/s at c=32 | x no tracing code | CPU us per request at c=32 "
          "| exported (posts, bytes per request) | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for name, g in rows.items():
        ratio = statistics.median(g["rps"]) / statistics.median(ref["rps"])
        sink = g.get("sink")
        exported = f"{sink[0]}, {sink[1] / max(1, g['requests']):.0f}" if sink else "-"
        print(f"| {name} | {_spread(g['p50'], '.3f')} | {_spread(g['p99'], '.3f')} | {_spread(g['rps'], '.0f')} | "
              f"{ratio:.2f} | {_spread(g['cpu_us'], '.0f')} | {exported} | {g['errors']} |")


if __name__ == "__main__":
    sys.exit(main())
