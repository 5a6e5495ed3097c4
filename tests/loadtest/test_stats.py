from quantroute.loadtest.stats import Slo, breach, summarize
from quantroute.loadtest.traffic import RequestResult


def res(start, end, tokens=4, status=200, cls="tolerant", tier="int4"):
    step = (end - start) / (tokens + 1)
    times = [start + step * (i + 1) for i in range(tokens)]
    return RequestResult(started=start, ended=end, status=status, first_token_at=times[0] if status == 200 else None,
                         token_times=times if status == 200 else [], output_tokens=tokens if status == 200 else 0,
                         tier=tier if status == 200 else None, node="n1", request_class=cls,
                         error=None if status == 200 else "boom")


def test_window_accounting_by_start_for_latency_and_by_arrival_for_tokens():
    rs = [res(0.5, 1.5), res(10.0, 11.0), res(11.0, 12.0, status=503, cls="sensitive"), res(19.5, 20.5),
          res(25.0, 26.0)]
    s = summarize(rs, start=10.0, end=20.0, concurrency=2)
    assert s.requests == 3 and s.errors == 1 and s.errors_by_status == {"503": 1}
    assert abs(s.error_rate - 1 / 3) < 1e-9
    # tokens inside [10, 20): 4 from the request at 10-11, 3 of the one at 19.5-20.5 (19.7, 19.9, 20.1 -> 2)
    assert abs(s.output_tok_s - (4 + 2) / 10) < 1e-9
    assert abs(s.req_s - 1 / 10) < 1e-9  # only one request finished inside the window
    assert s.e2e_p50_ms == 1000.0 and s.tiers == {"int4": 2}
    assert s.by_class["sensitive"].errors == 1 and s.by_class["tolerant"].requests == 2


def test_breach_order_and_figures():
    ok = summarize([res(0, 1)], start=0, end=2, concurrency=1)
    bad = summarize([res(0, 1), res(0, 1, status=500)], start=0, end=2, concurrency=2)
    assert "error rate 50.0%" in breach(bad, ok, Slo(max_error_rate=0.01))
    slow = summarize([res(0, 1.5, tokens=40)], start=0, end=2, concurrency=2)
    assert breach(slow, ok, Slo(p95_ms=1000)) == "SLO: end-to-end p95 1500 ms > 1000 ms"
    flat = summarize([res(0, 1)], start=0, end=2, concurrency=2)
    assert breach(flat, ok,
                  Slo()).startswith("throughput plateau: 2 output tok/s at concurrency 2 vs 2 at concurrency 1")
    assert breach(slow, ok, Slo()) is None  # 20 tok/s vs 2: still adding throughput
