"""What operators expect on /metrics: latency and time-to-first-byte histograms and token counters per tier and
deployment, a build-info gauge, drop counters by reason present from the start."""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from quantroute.router.metrics.registry import RouterMetrics, merge_worker_metrics
from tests.router.conftest import INT4, INT4_V2, TOLERANT, chat, router_at
from tests.support.sqlite_lock import WriteLock


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
    # the cyclic GC's collections per generation (how often it stopped the event loop; GC_YOUNG_THRESHOLD)
    assert {s.labels["generation"] for s in m["python_gc_collections_total"]} == {"0", "1", "2"}


def test_request_series_render_what_prometheus_client_rendered():
    """The per-request series are plain numbers now; scraped, they read exactly as prometheus_client's Counter
    and Histogram rendered them (names, help, labels, buckets, counts, sums; no _created series)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram

    from quantroute.router.metrics.series import DECISION_BUCKETS, LATENCY_BUCKETS, RequestSeries

    ours, theirs = RequestSeries(), CollectorRegistry()
    requests = Counter("quantroute_requests_total", "Requests routed", ["tier", "deployment", "arm", "status"],
                       registry=theirs)
    decision = Histogram("quantroute_decision_seconds", "Time to decide tier and node (excluding waits)",
                         buckets=DECISION_BUCKETS, registry=theirs)
    duration = Histogram("quantroute_request_duration_seconds", "End-to-end time of routed requests",
                         ["tier", "deployment"], buckets=LATENCY_BUCKETS, registry=theirs)
    ttft = Histogram("quantroute_ttft_seconds", "Time to the first byte of the response body", ["tier", "deployment"],
                     buckets=LATENCY_BUCKETS, registry=theirs)
    tokens = Counter("quantroute_tokens_total", "Tokens of routed requests, as the nodes reported them",
                     ["tier", "deployment", "kind"], registry=theirs)
    cases = [("int4", "d4", "", 200, 0.0042, 0.003, 5, 1), ("int4", "d4", "", 200, 0.005, None, None, 7),
             ("fp16", "d16", "candidate", 502, 300.0, 0.25, 0, None), ("", "", "", 400, 0.0001, None, None, None)]
    for tier, dep, arm, status, latency, first, prompt, completion in cases:
        ours.finished(tier, dep, arm, status, latency, first, prompt, completion)
        requests.labels(tier, dep, arm, str(status)).inc()
        if tier:
            duration.labels(tier, dep).observe(latency)
            if first is not None:
                ttft.labels(tier, dep).observe(first)
            if prompt:
                tokens.labels(tier, dep, "prompt").inc(prompt)
            if completion:
                tokens.labels(tier, dep, "completion").inc(completion)
    for v in (1e-5, 2e-5, 0.00021, 0.5):
        ours.decision.observe(v)
        decision.observe(v)
    mine = CollectorRegistry()
    mine.register(ours)
    assert families(mine) == families(theirs)


def families(registry) -> dict:
    """A registry's exposition as it reads back: name -> help, type and samples (without _created series)."""
    from prometheus_client import generate_latest

    text = generate_latest(registry).decode()
    return {f.name: (f.documentation, f.type, sorted((s.name, sorted(s.labels.items()), s.value)
                                                     for s in f.samples if not s.name.endswith("_created")))
            for f in text_string_to_metric_families(text) if not f.name.endswith("_created")}


def test_pin_series_render_what_prometheus_client_rendered():
    """The pin batch's size and time and an answer's wait for its pin are plain numbers too (every first turn
    observed all three through prometheus_client's locked Histogram at c=1); scraped, they read as before, from
    nothing observed yet (the series present at 0) to values on and beyond the bucket bounds."""
    from prometheus_client import CollectorRegistry, Histogram

    from quantroute.router.metrics.series import PinSeries

    # the buckets written out as prometheus_client had them, so a changed bound fails here too
    seconds = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1)
    theirs = CollectorRegistry()
    batch = Histogram("quantroute_pin_commit_batch_size", "New session pins stored per transaction",
                      buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=theirs)
    commit = Histogram("quantroute_pin_commit_seconds", "Time a batch of new session pins took to be stored, "
                       "timed in the router: the statement, its commit and the rows read back", buckets=seconds,
                       registry=theirs)
    wait = Histogram("quantroute_pin_wait_seconds", "Time a first turn's ready answer waited for its session pin's "
                     "commit", buckets=seconds, registry=theirs)
    ours, mine = PinSeries(), CollectorRegistry()
    mine.register(ours)
    assert families(mine) == families(theirs)
    for pins, s in ((1, 0.0001), (16, 0.00049), (17, 0.0046), (256, 1.0), (300, 7.5)):
        batch.observe(pins)
        commit.observe(s)
        wait.observe(s)
        ours.committed(pins, s)
        ours.wait.observe(s)
    assert families(mine) == families(theirs)


def test_an_answer_held_for_its_pin_is_counted_with_how_long_it_waited(make_settings):
    """Another connection holds SQLite's write lock for a second when a session's first turn arrives: the
    answer is ready long before the pin can be stored, so it waits, and /metrics counts that one wait with its
    time. A request without a session and the session's next turn (its pin stored) add none."""
    settings = make_settings()
    with router_at(settings) as (url, app):
        assert chat(url, TOLERANT).status_code == 200
        before = samples(url)
        assert before["quantroute_pin_wait_seconds_count"][0].value == 0
        lock = WriteLock(settings.db_url.removeprefix("sqlite:///"), seconds=1.0)
        try:
            assert chat(url, TOLERANT, session="held").status_code == 200
        finally:
            lock.join()
        for session in ("held", None):
            assert chat(url, TOLERANT, session=session).status_code == 200
        m = samples(url)
    (count,), (total,) = m["quantroute_pin_wait_seconds_count"], m["quantroute_pin_wait_seconds_sum"]
    assert count.value == 1
    assert 0.1 < total.value < 5  # most of the second the lock was still held (the answer took milliseconds)
    assert app.pins.cache["held"].stored is None
    # The batch's own time in the database says why: one batch, one pin, most of that second
    (batches,), (pins,) = m["quantroute_pin_commit_batch_size_count"], m["quantroute_pin_commit_batch_size_sum"]
    (commits,), (commit_s,) = m["quantroute_pin_commit_seconds_count"], m["quantroute_pin_commit_seconds_sum"]
    assert batches.value == commits.value == pins.value == 1
    assert 0.1 < commit_s.value < 5


def test_workers_expositions_merge_into_one_that_keeps_every_sample_under_its_worker():
    one, two = RouterMetrics(), RouterMetrics()
    one.retries.labels("int4").inc(2)
    two.retries.labels("int4").inc(5)
    two.retries.labels("int8").inc(1)

    class Out:
        ttft, prompt_tokens, completion_tokens = 0.01, 7, 3

    one.finished("int4", INT4, "baseline", 200, 0.2, Out())
    two.finished("int4", INT4_V2, "candidate", 503, 0.4, Out())
    parts = [("0", generate_latest(one.registry)), ("1", generate_latest(two.registry))]
    merged = merge_worker_metrics(parts, ["2"]).decode()

    def keyed(text: str, worker: str | None) -> set:
        return {(s.name, tuple(sorted({**s.labels, **({"worker": worker} if worker else {})}.items())), s.value)
                for f in text_string_to_metric_families(text) for s in f.samples if not s.name.endswith("_created")}

    got = keyed(merged, None)
    want = keyed(parts[0][1].decode(), "0") | keyed(parts[1][1].decode(), "1")
    up = {("quantroute_router_worker_up", (("worker", w),), v) for w, v in (("0", 1.0), ("1", 1.0), ("2", 0.0))}
    assert got == want | up
    # one HELP and one TYPE a family, whatever the number of workers: Prometheus refuses a repeated TYPE
    types = [line.split()[2] for line in merged.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types)) and "quantroute_requests_total" in types


def test_promtool_accepts_the_merged_exposition():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (.ci/run installs Debian's prometheus package)")
    m = RouterMetrics()
    m.retries.labels("int4").inc()
    text = merge_worker_metrics([("0", generate_latest(m.registry)), ("1", generate_latest(RouterMetrics().registry))])
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60)
    # promtool's lint also prints style advice (exit 3); a parse error is exit 1
    assert out.returncode in (0, 3) and b"error" not in out.stderr.lower(), out.stderr.decode()
