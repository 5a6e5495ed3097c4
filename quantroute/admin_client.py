"""A client of the routers' admin API (bearer token), for the dashboard, the rollout service and the CLI.

Routers run as replicas that share the database but each keep their own node health and session-pin cache, so
reads merge every replica's view and a write that touches a cache (unpin) goes to every replica. Failures
raise `RouterUnavailable` naming the replica, so a page can still show what the database knows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from quantroute.node import merge_node_views


class RouterUnavailable(Exception):
    """A replica's admin API could not be reached or refused the request; the message says which and why."""


def split_urls(urls: str | Sequence[str]) -> list[str]:
    """A list of base URLs, or one string of them separated by commas (how settings and env give them)."""
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out = [u.strip().rstrip("/") for u in items if u and u.strip()]
    if not out:
        raise ValueError("router URLs: give at least one base URL, e.g. http://127.0.0.1:8080")
    return out


class RouterAdmin:
    def __init__(self, urls: str | Sequence[str], token: str | None, *, transport: httpx.BaseTransport | None = None,
                 timeout_s: float = 3.0) -> None:
        self.urls = split_urls(urls)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(headers=headers, timeout=timeout_s, transport=transport)

    def _call(self, method: str, url: str, path: str, ok: tuple[int, ...] = (200,)) -> httpx.Response:
        try:
            resp = self._client.request(method, url + path)
        except httpx.HTTPError as e:
            raise RouterUnavailable(f"router at {url} unreachable: {e}") from None
        if resp.status_code not in ok:
            raise RouterUnavailable(f"{method} {url}{path}: HTTP {resp.status_code}: {_message(resp)}")
        return resp

    def _each(self, path: str) -> list[Any]:
        """Every replica's JSON answer; all must answer (a merged view missing a replica would mislead)."""
        return [self._call("GET", url, path).json() for url in self.urls]

    def policy(self) -> dict[str, Any]:
        """The first replica's active policy, plus `replicas`: each replica's active version (they converge
        within the reload interval after an activation)."""
        views = self._each("/admin/policy")
        return {**views[0], "replicas": {url: v.get("version") for url, v in zip(self.urls, views)}}

    def nodes(self) -> list[dict[str, Any]]:
        """Nodes by key, every replica's view merged (`merge_node_views`): healthy only where all find it so,
        in-flight summed."""
        return merge_node_views([view["nodes"] for view in self._each("/admin/nodes")])

    def sessions(self) -> list[dict[str, Any]]:
        """Live pins by session key (replicas sharing a database list the same rows)."""
        out: dict[str, dict[str, Any]] = {}
        for view in self._each("/admin/sessions"):
            for p in view["sessions"]:
                out.setdefault(p["session_key"], p)
        return list(out.values())

    def metrics_text(self) -> str:
        """Every replica's Prometheus text, one after another: counters summed by label add up the fleet."""
        return "\n".join(self._call("GET", url, "/metrics").text for url in self.urls)

    def unpin(self, session_key: str) -> bool:
        """Drop the pin from the shared table and from every replica's cache. True if any replica had it."""
        path = f"/admin/sessions/{quote(session_key, safe='')}"
        found, failed = False, []
        for url in self.urls:  # every replica, even after one fails: the others' caches must still drop it
            try:
                found = self._call("DELETE", url, path, ok=(200, 404)).status_code == 200 or found
            except RouterUnavailable as e:
                failed.append(str(e))
        if failed:
            raise RouterUnavailable("unpin did not reach every replica (their cached pin lives until it expires): "
                                    + "; ".join(failed))
        return found

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RouterAdmin:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _message(resp: httpx.Response) -> str:
    try:
        return resp.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return resp.text[:200]


def counter_by_label(metrics_text: str, name: str, label: str) -> dict[str, float]:
    """Sum a Prometheus counter by one label, from the text exposition format."""
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels, _, value = line.rpartition(" ")
        for part in labels[labels.index("{") + 1:labels.rindex("}")].split(","):
            k, _, v = part.partition("=")
            if k == label:
                out[v.strip('"')] = out.get(v.strip('"'), 0.0) + float(value)
    return out
