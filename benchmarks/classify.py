"""Classifier speed: decisions per second and p50/p99 per decision for 200-token, 2 KB and 32 KB prompts.

Target: p50 <= 20 us for a 2 KB chat prompt. The baseline measured in the same run is `json.loads` of the same
body (what any proxy pays to read the request at all), so the ratio is comparable across machines."""

from __future__ import annotations

import functools
import json
import statistics
import time
from pathlib import Path

from quantroute.classify import compile_policy
from quantroute.policy.loader import load_policy

REPO = Path(__file__).resolve().parent.parent
SENTENCE = ("Our quarterly report covers revenue, churn and the roadmap for the analytics product; "
            "customers asked for faster exports and better sharing. ")


def body(chars: int) -> dict:
    text = (SENTENCE * (chars // len(SENTENCE) + 1))[:chars]
    return {"model": "llama3-8b", "temperature": 0.3, "max_tokens": 300,
            "messages": [{"role": "system", "content": "You are a helpful analyst."},
                         {"role": "user", "content": text + " Summarize the key points."}]}


def timeit(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1000)
    return out


def main() -> None:
    policy = compile_policy(load_policy(REPO / "policies" / "policy-0001.yaml"))
    headers = {"x-priority": "5"}
    print(f"{'prompt':>10} {'decisions/s':>12} {'p50 us':>8} {'p99 us':>8} {'json.loads p50 us':>18} {'ratio':>6}")
    for label, chars in (("200 tok", 800), ("2 KB", 2048), ("32 KB", 32768)):
        b = body(chars)
        raw = json.dumps(b)
        n = 20000 if chars < 10000 else 3000
        for _ in range(500):
            policy.classify(b, headers, "chat")
        lat = sorted(timeit(functools.partial(policy.classify, b, headers, "chat"), n))
        base = sorted(timeit(functools.partial(json.loads, raw), n))
        p50, p99 = statistics.median(lat), lat[int(len(lat) * 0.99)]
        print(f"{label:>10} {1e6 / statistics.fmean(lat):>12,.0f} {p50:>8.1f} {p99:>8.1f} "
              f"{statistics.median(base):>18.1f} {p50 / statistics.median(base):>6.2f}")
    print("target: p50 <= 20 us for the 2 KB chat prompt")


if __name__ == "__main__":
    main()
