"""What operators expect on /metrics: latency and time-to-first-byte histograms and token counters per tier and
deployment, a build-info gauge, drop counters by reason present from the start."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.router.conftest import INT4, INT4_V2, TOLERANT, chat


def samples(url: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(httpx.get(url + "/metrics").text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_latency_ttft_tokens_and_build_info(router):
    url, _ = router
    for stream in (False, True, False):
        r = chat(url, TOLERANT, stream=stream, stream_options={"include_usage": True} if stream else None)
        assert r.status_code == 200
    m = samples(url)
    counts = [s for s in m["quantroute_request_duration_seconds_count"] if s.labels["tier"] == "int4"]
    assert sum(s.value for s in counts) == 3 and {s.labels["deployment"] for s in counts} <= {INT4, INT4_V2}
    assert sum(s.value for s in m["quantroute_ttft_seconds_count"]) == 3
    kinds = {s.labels["kind"]: s.value for s in m["quantroute_tokens_total"]}
    assert kinds["prompt"] > 0 and kinds["completion"] > 0
    (info,) = m["quantroute_build_info"]
    assert info.value == 1 and info.labels["version"]
    reasons = {s.labels["reason"]: s.value for s in m["quantroute_request_log_dropped_total"]}
    assert reasons == {"buffer_full": 0, "rejected": 0, "shutdown": 0}
