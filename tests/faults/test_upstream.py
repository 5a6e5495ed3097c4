"""The router's upstream client against nodes that misbehave, on real sockets: a client that gives up before the
response headers aborts the upstream request (vLLM frees the slot); a kept-alive connection that goes quiet is a
counted upstream failure answered with OpenAI error JSON, never an unhandled 500; https:// nodes get TLS."""

from __future__ import annotations

import ssl

import httpx
import pytest
import trustme

from tests.conftest import wait_until
from tests.faults.conftest import post, register
from tests.faults.rawnode import raw_node
from tests.router.conftest import router_at


def test_client_gone_before_headers_aborts_the_upstream_request(make_settings):
    """A non-streamed request gets its headers only when generation ends; a client that leaves before must not
    leave the node generating while the router counts it free."""
    with raw_node("silent") as node, router_at(make_settings(fleet_file=None)) as (url, app):
        register(url, node.url)
        with pytest.raises(httpx.ReadTimeout):
            post(url, timeout=0.5)  # the client gives up and closes its connection
        wait_until(lambda: node.closed_after_post, what="the router to close the upstream connection")
        assert node.posts == 1
        wait_until(lambda: app.fleet.nodes["raw-a"].inflight == 0, what="in-flight back to 0")
        wait_until(lambda: app.writer.written >= 1, what="the request logged")


def test_quiet_keepalive_connection_is_a_counted_failure_not_a_500(make_settings):
    with raw_node("once_per_conn") as node, router_at(
            make_settings(fleet_file=None, upstream_timeout_s=0.5, retries=0)) as (url, app):
        register(url, node.url)
        assert post(url).status_code == 200  # leaves a kept-alive connection in the pool
        r = post(url)  # goes to that connection, which stays quiet
        assert r.status_code in (502, 504) and r.json()["error"]["type"], r.text
        metrics = httpx.get(url + "/metrics").text
        assert 'quantroute_upstream_errors_total{kind="timeout",tier="int4"} 1.0' in metrics
        assert app.fleet.nodes["raw-a"].inflight == 0
        assert post(url).status_code == 200  # a fresh connection works


@pytest.fixture(scope="module")
def tls():
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server)
    return ca, server


def test_https_node_gets_tls(make_settings, tls, tmp_path):
    ca, server_ctx = tls
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with raw_node("once_per_conn", server_ctx) as node, router_at(
            make_settings(fleet_file=None, upstream_ca_bundle=ca_file)) as (url, app):
        assert node.url.startswith("https://")
        register(url, node.url)
        wait_until(lambda: app.fleet.nodes["raw-a"].last_probe is not None, what="a probe")
        r = post(url)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ok", r.text
        assert app.fleet.nodes["raw-a"].healthy


def test_https_node_with_an_untrusted_certificate_fails_closed(make_settings, tls):
    _, server_ctx = tls  # the router is not given the CA: the system trust store does not know it
    # no probe before the request (a probe would eject the node for the same reason and answer 503)
    settings = make_settings(fleet_file=None, probe_interval_s=600)
    with raw_node("once_per_conn", server_ctx) as node, router_at(settings) as (url, app):
        register(url, node.url)
        r = post(url)
        assert r.status_code == 502 and "certificate" in r.json()["error"]["message"].lower(), r.text
        assert node.posts == 0
