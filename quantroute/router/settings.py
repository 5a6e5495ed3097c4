"""Router settings: one pydantic-settings class, read from the CLI and from `QUANTROUTE_ROUTER_*` env vars."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from quantroute.router.requestlog.privacy import DEFAULT_HEADER_ALLOWLIST, PromptStorage


class RouterSettings(BaseSettings):
    """Everything the router needs to start; tests build one per router."""

    model_config = SettingsConfigDict(env_prefix="QUANTROUTE_ROUTER_", extra="forbid")

    policies_dir: Path = Field(default=Path("policies"), description=(
        "Directory that mirrors the policy versions as policy-NNNN.yaml files, plus the 'active' pointer"))
    fleet_file: Path | None = Field(default=None, description="Fleet YAML with the nodes known at start")
    db_url: str | None = Field(default=None, description="SQLAlchemy URL; default $DATABASE_URL or data/quantroute.db")
    host: str = Field(default="127.0.0.1", description="Bind address (0.0.0.0 in a container)")
    port: int = Field(default=8080, ge=1, le=65535, description="Port for /v1, /admin, /health and /metrics")
    admin_token: str | None = Field(default=None, description="Bearer token for /admin/*; unset = admin API refused")
    max_body_bytes: int = Field(default=8 * 1024 * 1024, gt=0, description="Largest request body accepted (413 above)")
    log_level: str = Field(default="warning", pattern="^(?i:debug|info|warning|error|critical)$",
                           description="debug, info, warning, error or critical")
    log_json: bool = Field(default=False, description="Log one JSON object per line (for log collectors)")
    workers: int = Field(default=1, ge=1, description=(
        "Router processes serving one port (use the host's cores); they share pins and the active policy through "
        "the database, as replicas do"))
    runtime_dir: Path | None = Field(default=None, description=(
        "Where several workers keep their control sockets (a private directory made inside it at start, removed "
        "at exit); default: the system's temporary directory. Must be writable (in a container: a volume)"))
    body_read_timeout_s: float = Field(default=30.0, gt=0, description="Longest time to receive a request body; "
                                       "a client that sends it slower gets a 408 (a slow sender holds a slot)")
    max_concurrent_requests: int = Field(default=4096, ge=1, description="Completions in progress on this "
                                         "replica; beyond it a 503 (code overloaded) with Retry-After")

    # Client keys (quantroute key create)
    client_auth: Literal["off", "optional", "required"] = Field(default="off", description=(
        "Client API keys on /v1 completions: off (anyone who reaches the router), optional (a request without a "
        "key passes with no tenant; a key sent must be valid) or required (401 without a valid key). A key's "
        "tenant brings its tier floor, priority and rate limits"))
    client_keys_refresh_s: float = Field(default=2.0, gt=0, description=(
        "How often the router checks the database for changed keys and tenants: a revoked key is refused by "
        "every replica within about this long"))

    # Fleet state
    probe_interval_s: float = Field(default=1.5, gt=0,
                                    description="How often each node's /health and /metrics are read")
    # a busy real vLLM answers /metrics in seconds
    probe_timeout_s: float = Field(default=5.0, gt=0, description="Time a node has to answer a probe")
    eject_after_failures: int = Field(default=3, ge=1, description="Failed probes in a row that mark a node unhealthy")
    node_max_inflight: int = Field(default=256, ge=1, description="Router in-flight requests that make a node full")
    node_max_waiting: int = Field(default=64, ge=0, description="Scraped waiting requests that make a node full")
    node_refresh_s: float = Field(default=5.0, gt=0,
                                  description="How often to read nodes other replicas registered (also on a miss)")

    # Forwarding
    retries: int = Field(default=2, ge=0, description="Extra attempts on other nodes of the same tier")
    connect_timeout_s: float = Field(default=2.0, gt=0, description="Wait for a TCP connection to a node")
    upstream_timeout_s: float = Field(default=600.0, gt=0, description="Wait for a node's response headers")
    upstream_read_timeout_s: float = Field(
        default=120.0, gt=0, description="Longest silence between body chunks once a node sent its headers; then "
        "a stream ends with an error event and a non-streamed request is retried elsewhere or gets a 502")
    retry_after_s: int = Field(default=1, ge=1, description="Retry-After of a 503 when no node has capacity")
    # TLS to https:// nodes: the system trust store, plus these when set
    upstream_ca_bundle: Path | None = Field(default=None, description="PEM CA bundle trusted for https:// nodes "
                                            "besides the system store")
    upstream_client_cert: Path | None = Field(default=None, description="PEM client certificate (mutual TLS)")
    upstream_client_key: Path | None = Field(default=None, description="PEM key of the client certificate; "
                                             "omit when it is in the certificate file")

    # Policy reload
    policy_poll_s: float = Field(default=2.0, gt=0, description="How often to read policy_activation from the DB")
    watch_pointer: bool = Field(default=True,
                                description="Reload when the policies directory's 'active' pointer changes")

    # Request log
    # small batches: the writer thread holds the GIL the event loop needs only briefly
    log_batch_size: int = Field(default=100, ge=1, description="Request-log rows written per transaction")
    log_flush_interval_s: float = Field(default=0.5, gt=0, description="Longest wait before buffered rows are written")
    log_buffer_max: int = Field(default=20_000, ge=1,
                                description="Rows buffered while the database is slow; beyond it rows are dropped "
                                            "(counted)")
    prompt_storage: PromptStorage = Field(
        default="redacted", description="What the request log keeps of bodies for the what-if replay: full, "
        "redacted (keys, tokens, e-mail addresses and card-like numbers masked) or none")
    log_headers: tuple[str, ...] = Field(
        default=DEFAULT_HEADER_ALLOWLIST, description="Request headers kept for the replay (the policy's own "
        "classifier headers are always added); a name that looks like a credential is never kept")
    log_retention_days: float | None = Field(
        default=30.0, gt=0, description="Delete request-log rows older than this, in the background; unset = keep")
    log_retention_interval_s: float = Field(default=3600.0, gt=0, description="How often retention runs")
    log_buffer_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024,
                                      description="Bound on buffered rows' bytes (bodies kept for replay count)")

    pin_touch_interval_s: float = Field(
        default=300.0, gt=0, description="A returning session's stored pin expiry is refreshed at most this often "
        "(and at least every tenth of its TTL); stored pins outlive their TTL by up to this much")
    pin_cache_max: int = Field(default=200_000, ge=1, description="Session pins cached in memory; past it the "
                               "pins idle longest go first (a DB-backed pin is read back on its next turn): size it "
                               "for the sessions active at once")
    pin_commit_timeout_s: float = Field(
        default=5.0, gt=0, description="How long a new session's pin may take to be stored (retried meanwhile) "
        "before its request fails with 503: no answer leaves before its pin is durable")
    pin_synchronous_commit: bool = Field(
        default=True, description="PostgreSQL: a new session's pin commit waits for its WAL record to reach disk "
        "(it survives a database crash). Off: the pin is visible to every replica as soon as it commits, as "
        "before, and reaches disk within ~0.6 s (3 x wal_writer_delay), so a crash of the PostgreSQL server can "
        "lose the newest pins (those sessions pin again, perhaps at another tier); saves a disk flush on each "
        "first turn's path. SQLite never flushes a commit (synchronous=NORMAL)")
    pin_purge_interval_s: float = Field(default=60.0, gt=0, description="How often to delete expired session pins")
    pin_purge_batch: int = Field(default=1000, ge=1, description="Pins each step of the purge checks: a range of "
                                 "this many session keys, whose expired pins it deletes (one short lock per step)")
    pin_purge_max_batches: int = Field(default=1000, ge=1, description="Steps per purge run. A run ends once it has "
                                       "checked every pin; past this bound the next run goes on where it stopped. "
                                       "Size batch x max_batches above the pins stored, or expired pins pile up")

    node_affinity: bool = Field(default=False, description="A pinned session's turn goes to the node that served its "
                                "last turn (its KV prefix is cached there) while that node is healthy and below "
                                "node_affinity_max_load; else the least-loaded node of the tier (logged)")
    node_affinity_max_load: float = Field(default=0.8, gt=0, le=1, description="Utilization (batch slots or KV "
                                          "cache in use, 0-1) from which node affinity gives way to load balance")

    @model_validator(mode="after")
    def _key_needs_cert(self) -> RouterSettings:
        if self.upstream_client_key is not None and self.upstream_client_cert is None:
            raise ValueError("upstream_client_key is set without upstream_client_cert; give both or neither")
        return self


def tls_context(settings: RouterSettings) -> ssl.SSLContext:
    """The context every connection to an https:// node uses (requests and probes alike)."""
    ctx = ssl.create_default_context()
    if settings.upstream_ca_bundle is not None:
        ctx.load_verify_locations(cafile=str(settings.upstream_ca_bundle))
    if settings.upstream_client_cert is not None:
        ctx.load_cert_chain(str(settings.upstream_client_cert),
                            str(settings.upstream_client_key) if settings.upstream_client_key else None)
    return ctx
