"""A local OTLP/HTTP trace receiver: what an OpenTelemetry collector's HTTP port (4318) does with POST /v1/traces,
decoding each ExportTraceServiceRequest (protobuf, gzip or not) into plain span records a test can query."""

from __future__ import annotations

import contextlib
import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus


@dataclass
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    kind: str  # SERVER, CLIENT, INTERNAL, ...
    attributes: dict = field(default_factory=dict)
    error: bool = False
    start_ns: int = 0
    end_ns: int = 0


def _value(v: AnyValue):
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


def decode(body: bytes) -> list[Span]:
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    spans = []
    for rs in req.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                spans.append(Span(
                    service=str(resource.get("service.name", "")), name=s.name, trace_id=s.trace_id.hex(),
                    span_id=s.span_id.hex(), parent_id=s.parent_span_id.hex(),
                    kind=PbSpan.SpanKind.Name(s.kind).removeprefix("SPAN_KIND_"),
                    attributes={a.key: _value(a.value) for a in s.attributes},
                    error=s.status.code == PbStatus.STATUS_CODE_ERROR, start_ns=s.start_time_unix_nano,
                    end_ns=s.end_time_unix_nano))
    return spans


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.posts = 0
        self.lock = threading.Lock()

    def named(self, name: str, **attributes) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.name == name and attributes.items() <= s.attributes.items()]

    def by_id(self, span_id: str) -> Span | None:
        with self.lock:
            return next((s for s in self.spans if s.span_id == span_id), None)


@contextlib.contextmanager
def otlp_receiver() -> Iterator[tuple[str, Receiver]]:
    """(endpoint for OTEL_EXPORTER_OTLP_ENDPOINT, the receiver) on a free port of 127.0.0.1."""
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
                self.send_response(404)
                self.end_headers()
                return
            spans = decode(body)
            with got.lock:
                got.spans.extend(spans)
                got.posts += 1
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()
