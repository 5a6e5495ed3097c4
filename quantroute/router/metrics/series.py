"""The Prometheus series updated on the request path, kept as plain numbers and turned into metric families only
when scraped.

Every routed request counts itself, observes its latency, TTFT and the decision time, and adds its tokens; every
first turn's pin batch observes its size and time, and an answer that waits for its pin observes the wait. With
prometheus_client's Counter and Histogram each update takes a lock and walks the buckets in Python, a real share of
a short request path. These are updated from the event loop only (one thread), so a dict entry and a bisect do;
`collect` renders the same names, labels, buckets and help texts."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
DECISION_BUCKETS = (2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)
# A pin's commit and an answer's wait for it: a tenth of a millisecond (a commit without the flush) to a second
# (a database that is down or locked; the claim's own timeout is a few seconds)
PIN_SECONDS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0)
PIN_BATCH_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)


class Hist:
    """One histogram series: a count per bucket (the last one +Inf) and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # le is inclusive: the first bound >= value
        self.sum += value

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        total = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            total += n
            out.append((floatToGoString(bound), total))
        return out


class RequestSeries:
    """quantroute_requests_total, _request_duration_seconds, _ttft_seconds, _tokens_total, _decision_seconds."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, str, str], int] = {}
        self.duration: dict[tuple[str, str], Hist] = {}
        self.ttft: dict[tuple[str, str], Hist] = {}
        self.tokens: dict[tuple[str, str, str], int] = {}
        self.decision = Hist(DECISION_BUCKETS)

    def finished(self, tier: str, deployment: str, arm: str, status: int, latency_s: float, ttft_s: float | None,
                 prompt_tokens: int | None, completion_tokens: int | None) -> None:
        key = (tier, deployment, arm, str(status))
        self.requests[key] = self.requests.get(key, 0) + 1
        if not tier:  # refused before a tier was chosen: counted, nothing to observe per tier
            return
        td = (tier, deployment)
        h = self.duration.get(td) or self.duration.setdefault(td, Hist(LATENCY_BUCKETS))
        h.observe(latency_s)
        if ttft_s is not None:
            h = self.ttft.get(td) or self.ttft.setdefault(td, Hist(LATENCY_BUCKETS))
            h.observe(ttft_s)
        if prompt_tokens:
            k = (tier, deployment, "prompt")
            self.tokens[k] = self.tokens.get(k, 0) + prompt_tokens
        if completion_tokens:
            k = (tier, deployment, "completion")
            self.tokens[k] = self.tokens.get(k, 0) + completion_tokens

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("quantroute_requests_total", "Requests routed",
                                       labels=["tier", "deployment", "arm", "status"])
        for labels, n in list(self.requests.items()):
            requests.add_metric(list(labels), n)
        yield requests
        yield _histogram("quantroute_decision_seconds", "Time to decide tier and node (excluding waits)",
                         [], {(): self.decision})
        yield _histogram("quantroute_request_duration_seconds", "End-to-end time of routed requests",
                         ["tier", "deployment"], self.duration)
        yield _histogram("quantroute_ttft_seconds", "Time to the first byte of the response body",
                         ["tier", "deployment"], self.ttft)
        tokens = CounterMetricFamily("quantroute_tokens_total", "Tokens of routed requests, as the nodes reported them",
                                     labels=["tier", "deployment", "kind"])
        for labels3, n in list(self.tokens.items()):
            tokens.add_metric(list(labels3), n)
        yield tokens


class PinSeries:
    """quantroute_pin_commit_batch_size, _pin_commit_seconds, _pin_wait_seconds: one observation per pin batch
    and one per answer that waited for its pin (at c=1 and on PostgreSQL, both on every first turn)."""

    def __init__(self) -> None:
        self.batch = Hist(PIN_BATCH_BUCKETS)
        # A batch's claim as the router times it: the database's statement and commit, and also the event loop's
        # delay in reading the answer, which on a saturated router is most of it. Set
        # against the database's own time for the statement, it shows how much of a first turn's wait is the
        # router's; against the wait, whether answers wait for commits at all.
        self.commit = Hist(PIN_SECONDS_BUCKETS)
        # What a session pin costs a client: only answers that were ready before their pin was stored are
        # observed (over the requests served, the share a pin delayed at all; turns of one session that arrive
        # while its pin is being stored all wait on it, so the count can exceed the pins claimed)
        self.wait = Hist(PIN_SECONDS_BUCKETS)

    def committed(self, pins: int, seconds: float) -> None:
        """One batch of new session pins stored: its size and how long its claim took, timed in the router."""
        self.batch.observe(pins)
        self.commit.observe(seconds)

    def collect(self) -> Iterator[Metric]:
        yield _histogram("quantroute_pin_commit_batch_size", "New session pins stored per transaction", [],
                         {(): self.batch})
        yield _histogram("quantroute_pin_commit_seconds", "Time a batch of new session pins took to be stored, "
                         "timed in the router: the statement, its commit and the rows read back", [],
                         {(): self.commit})
        yield _histogram("quantroute_pin_wait_seconds",
                         "Time a first turn's ready answer waited for its session pin's commit", [], {(): self.wait})


class PinTouchCounts:
    """quantroute_pin_touches_total: the pin committer's own counts of returning turns' refreshes, read at scrape
    time (a touch costs no metric call of its own)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def collect(self) -> Iterator[Metric]:
        touches = CounterMetricFamily("quantroute_pin_touches_total",
                                      "Returning turns' session pin refreshes by outcome: written (in batches), "
                                      "retried (a batch the database failed, queued again), refused (the queue "
                                      "was full: the pin stays due), failed (a row the database refused)",
                                      labels=["outcome"])
        for outcome, n in self.counts.items():
            touches.add_metric([outcome], n)
        yield touches


def _histogram(name: str, doc: str, labels: list[str], series: dict) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, h in list(series.items()):
        family.add_metric(list(values), h.buckets(), h.sum)
    return family
