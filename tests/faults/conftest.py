"""The fault suite runs against the router tests' simulated fleet and settings (one fleet per module), and
registers misbehaving raw nodes (tests/faults/rawnode.py) through the admin API."""

import httpx

# the fixtures are shared with tests/router (`name as name`: imported to be found here, not used)
from tests.router.conftest import INT4, MODEL, TOLERANT, admin
from tests.router.conftest import make_settings as make_settings
from tests.router.conftest import policies as policies
from tests.router.conftest import sim as sim


def register(url: str, node_url: str, key: str = "raw-a") -> None:
    r = admin(url).post("/admin/nodes", json={"url": node_url, "model": MODEL, "deployment": INT4, "tier": "int4",
                                              "format": "int4", "method": "awq", "node_id": key})
    assert r.status_code == 201, r.text


def post(url: str, timeout: float = 30) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", timeout=timeout,
                      json={"model": MODEL, "messages": TOLERANT, "max_tokens": 4})
