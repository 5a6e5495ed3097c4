"""quantroute.tracing: which OTEL_* environments turn tracing on, the errors when it cannot run, and spans that
link through `traceparent` (exported to a local OTLP/HTTP receiver)."""

from __future__ import annotations

import sys

import pytest

from quantroute.tracing import Tracing, TracingUnavailable, enabled
from tests.conftest import wait_until
from tests.support.otlp import otlp_receiver


@pytest.mark.parametrize(("env", "on"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "console"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ({"OTEL_SERVICE_NAME": "router-eu"}, False),  # naming the service alone sends nothing anywhere
])
def test_the_standard_variables_turn_tracing_on(env, on):
    assert enabled(env) is on
    tracing = Tracing.from_env("quantroute-test", env)
    assert (tracing is not None) is on
    if tracing is not None:
        tracing.shutdown()


def test_tracing_asked_for_without_the_otel_extra_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    with pytest.raises(TracingUnavailable, match=r"pip install 'quantroute\[otel\]'"):
        Tracing.from_env("quantroute-test", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})


@pytest.mark.parametrize(("env", "named"), [
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
     "OTEL_EXPORTER_OTLP_PROTOCOL"),
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
])
def test_an_exporter_quantroute_cannot_build_is_refused_by_name(env, named):
    with pytest.raises(TracingUnavailable, match=named):
        Tracing.from_env("quantroute-test", env)


def test_spans_link_through_traceparent_and_reach_the_receiver(monkeypatch):
    with otlp_receiver() as (endpoint, got):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "renamed")  # the environment's name wins over the default
        tracing = Tracing.from_env("quantroute-test")
        assert tracing is not None
        with tracing.span("outer", {"k": "v"}) as outer:
            header = tracing.current_traceparent()
            with tracing.span("inner"):
                pass
        # another process continues from the header
        remote = tracing.start("remote", traceparent=header, kind="server")
        tracing.end(remote, {"n": 1, "skipped": None}, error="it broke")
        tracing.shutdown()  # flushes
        wait_until(lambda: len(got.spans) == 3, what="three spans", timeout=30)
        spans = {s.name: s for s in got.spans}
        oid = format(outer.get_span_context().span_id, "016x")
        assert spans["outer"].parent_id == "" and spans["outer"].attributes == {"k": "v"}
        assert spans["inner"].parent_id == oid and spans["remote"].parent_id == oid
        # sampled (01), and with the SDK's random trace ids also the W3C level-2 random flag (02)
        assert header is not None and header[:-2] == f"00-{spans['outer'].trace_id}-{oid}-" and int(header[-2:]) & 1
        assert spans["remote"].error and spans["remote"].attributes == {"n": 1} and spans["remote"].kind == "SERVER"
        assert {s.service for s in got.spans} == {"renamed"}



def test_the_router_command_refuses_a_bad_tracing_variable_before_it_serves(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from quantroute.cli.router import router

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    out = CliRunner().invoke(router, ["--no-db", "--policies", str(tmp_path)])
    assert out.exit_code == 2 and "OTEL_TRACES_EXPORTER='zipkin'" in out.output
