"""The router's admin API as the dashboard uses it (bearer token). Reads fail soft: the dashboard still
shows what the DB knows when the router is down, and says so."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx


class RouterUnavailable(Exception):
    """The admin API could not be reached or refused the token; the message says which."""


class RouterAdmin:
    def __init__(self, base_url: str, token: str | None, *, transport: httpx.BaseTransport | None = None,
                 timeout_s: float = 3.0) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport)

    def _get(self, path: str) -> Any:
        try:
            resp = self._client.get(path)
        except httpx.HTTPError as e:
            raise RouterUnavailable(f"router at {self.base_url} unreachable: {e}") from None
        if resp.status_code != 200:
            raise RouterUnavailable(f"GET {path}: HTTP {resp.status_code}: {_message(resp)}")
        return resp.json()

    def policy(self) -> dict[str, Any]:
        return self._get("/admin/policy")

    def nodes(self) -> list[dict[str, Any]]:
        return self._get("/admin/nodes")["nodes"]

    def sessions(self) -> list[dict[str, Any]]:
        return self._get("/admin/sessions")["sessions"]

    def metrics_text(self) -> str:
        try:
            return self._client.get("/metrics").text
        except httpx.HTTPError as e:
            raise RouterUnavailable(f"router at {self.base_url} unreachable: {e}") from None

    def unpin(self, session_key: str) -> bool:
        try:
            resp = self._client.delete(f"/admin/sessions/{quote(session_key, safe='')}")
        except httpx.HTTPError as e:
            raise RouterUnavailable(f"router at {self.base_url} unreachable: {e}") from None
        if resp.status_code not in (200, 404):
            raise RouterUnavailable(f"DELETE session: HTTP {resp.status_code}: {_message(resp)}")
        return resp.status_code == 200


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
