"""OpenTelemetry traces for every quantroute process, off unless the standard OTEL_* variables turn them on.

Off is free: `Tracing.from_env` returns None and callers hold None, so a request pays one `is not None` check and
opentelemetry is never imported (the base install does not have it; `pip install 'quantroute[otel]'`). On: the
SDK's TracerProvider with its OTLP/HTTP exporter behind a batch processor, all configured by the SDK's own
variables (endpoint, headers, sampler, resource attributes, batch delays), and W3C `traceparent` headers to carry
a trace into the next process (vLLM continues it)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

# OTEL_TRACES_EXPORTER values this module can build (the spec's default is otlp)
EXPORTERS = ("otlp", "console")


class TracingUnavailable(RuntimeError):
    """Tracing was asked for but cannot run: the otel extra is missing, or an exporter or protocol it lacks."""


def enabled(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint or a traces exporter is named, and the SDK is
    not disabled. Nothing set means off (the spec's implicit `otlp` default would send to localhost unasked)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def check(env: Mapping[str, str]) -> str | None:
    """The exporter the environment asks for (None: tracing off), or TracingUnavailable naming the variable to
    change and why. Builds nothing: a command can check before it starts serving."""
    if not enabled(env):
        return None
    exporter = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if exporter not in EXPORTERS:
        raise TracingUnavailable(f"OTEL_TRACES_EXPORTER={exporter!r}: quantroute exports traces with "
                                 f"{' or '.join(EXPORTERS)} (or none)")
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf")
    if exporter == "otlp" and protocol != "http/protobuf":
        raise TracingUnavailable(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: quantroute sends OTLP over HTTP "
                                 "(http/protobuf); point it at the collector's HTTP port (4318)")
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        raise TracingUnavailable(f"tracing is on (OTEL_* variables: {exporter}) but OpenTelemetry is not installed: "
                                 "pip install 'quantroute[otel]', or unset OTEL_EXPORTER_OTLP_ENDPOINT")
    return exporter


class Tracing:
    """One process's tracer and the few operations quantroute uses. Spans are the SDK's (typed Any here, so this
    module's importers never need opentelemetry)."""

    def __init__(self, provider: Any, propagator: Any) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("quantroute")
        self.propagator = propagator
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        self._trace = trace
        self.kinds = {"server": SpanKind.SERVER, "client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str] | None = None) -> Tracing | None:
        """A Tracing configured by the OTEL_* variables, or None when they do not turn tracing on. `service` is
        service.name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name one."""
        env = os.environ if env is None else env
        exporter = check(env)
        if exporter is None:
            return None
        try:
            from opentelemetry.sdk.resources import OTELResourceDetector, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError as e:
            raise TracingUnavailable(f"tracing is on (OTEL_* variables) but OpenTelemetry is not installed ({e}): "
                                     "pip install 'quantroute[otel]', or unset OTEL_EXPORTER_OTLP_ENDPOINT") from None
        # the environment's service name wins over the process's default
        resource = Resource.create({"service.name": service}).merge(OTELResourceDetector().detect())
        provider = TracerProvider(resource=resource)  # the sampler comes from OTEL_TRACES_SAMPLER(_ARG)
        if exporter == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        return cls(provider, TraceContextTextMapPropagator())

    # -- spans ------------------------------------------------------------------------------------------------
    def start(self, name: str, *, parent: Any = None, traceparent: str | None = None, kind: str = "internal",
              attributes: Mapping[str, Any] | None = None, start_ns: int | None = None) -> Any:
        """A started span (end it with `end`): child of `parent` (a span), else of the W3C `traceparent` a caller
        sent, else of the current span, else a new trace."""
        if parent is not None:
            ctx = self._trace.set_span_in_context(parent)
        elif traceparent:
            ctx = self.propagator.extract({"traceparent": traceparent})
        else:
            ctx = None
        return self.tracer.start_span(name, context=ctx, kind=self.kinds[kind], attributes=attributes,
                                      start_time=start_ns)

    @staticmethod
    def end(span: Any, attributes: Mapping[str, Any] | None = None, *, error: str | None = None) -> None:
        Tracing.annotate(span, attributes, error=error)
        span.end()

    @staticmethod
    def annotate(span: Any, attributes: Mapping[str, Any] | None = None, *, error: str | None = None) -> None:
        """Attributes (None values left out) and, for a failure that was handled rather than raised, an error."""
        if attributes:
            span.set_attributes({k: v for k, v in attributes.items() if v is not None})
        if error is not None:
            span.set_status(span_error(error))

    @staticmethod
    def traceparent(span: Any) -> bytes:
        """The W3C `traceparent` header value that makes the receiver's spans children of `span` (formatted here:
        the propagator's inject builds a context per call, on the request path). Sampled or not, as `span` is."""
        ctx = span.get_span_context()
        return b"00-%032x-%016x-%02x" % (ctx.trace_id, ctx.span_id, ctx.trace_flags)

    @contextmanager
    def span(self, name: str, attributes: Mapping[str, Any] | None = None, kind: str = "internal") -> Iterator[Any]:
        """A span around a block, current inside it (spans started there are its children); an exception raised
        in the block is recorded on it, marks it an error, and propagates."""
        with self.tracer.start_as_current_span(name, kind=self.kinds[kind], attributes=attributes) as s:
            yield s

    def current_traceparent(self) -> str | None:
        """The `traceparent` of the current span (for an HTTP call made inside `span`), if one is recording."""
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier)
        return carrier.get("traceparent")

    def shutdown(self) -> None:
        """Export what is buffered and stop (at process exit)."""
        self.provider.shutdown()


def span_error(message: str) -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR, message)
