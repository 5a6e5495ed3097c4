"""The one description of a node's identity: where a vLLM server is and which deployment it serves.

The other node shapes derive from it instead of copying its fields: the fleet file's `fleet.NodeSpec.identity()`,
the `node` table (`db.node.NodeRow.from_identity` / `.identity()`) and the router's runtime
`router.nodes.Node.from_identity` / `.identity()`. It is also what the router's `POST /admin/nodes` accepts and
what `quantroute node register` sends after reading the model directory."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, HttpUrl

from quantroute.tiers import Tier

# What the node serves, besides where it is (url) and who it is (key): the fields every node shape shares.
SERVED_FIELDS = ("model", "deployment", "tier", "format", "method", "checksum", "hardware", "vram_gb")


class NodeIdentity(BaseModel):
    """One vLLM server serving one deployment. Sent by the registrar or an operator."""

    model_config = ConfigDict(extra="forbid")

    url: HttpUrl = Field(description="Base URL of the vLLM server, e.g. http://10.0.0.5:8000")
    model: str = Field(min_length=1, description="Logical model the deployment belongs to, e.g. llama3-8b")
    deployment: str = Field(min_length=1, description="Concrete artifact id, e.g. llama3-8b-awq-w4a16")
    tier: Tier
    format: str = Field(min_length=1,
                        description="Weight format as read from the artifact: bf16, fp16, fp8, int8, int4")
    method: str = Field(default="none",
                        description="Quantization method: none, awq, gptq, fp8, compressed-tensors, bitsandbytes...")
    checksum: str = Field(default="", description="Artifact checksum, e.g. sha256:...")
    hardware: str = Field(default="unknown", description="Hardware class key from data/hardware.yaml, e.g. a100-80g")
    vram_gb: float | None = Field(default=None, gt=0)
    node_id: str | None = Field(default=None, description="Stable node id; defaults to the URL")

    @property
    def key(self) -> str:
        return self.node_id or str(self.url).rstrip("/")

    @property
    def base_url(self) -> str:
        """The URL as the router uses it: no trailing slash."""
        return str(self.url).rstrip("/")


def merge_node_views(views: list[list[dict]]) -> list[dict]:
    """Several routers' views of the nodes (replicas, or the workers of one replica) as one, by key: healthy
    only where every view finds it healthy, in-flight counts summed (each router counts only what it sent), the
    scraped figures (waiting, KV use) from the last view."""
    out: dict[str, dict] = {}
    for view in views:
        for n in view:
            prev = out.get(n["key"])
            out[n["key"]] = n if prev is None else {
                **n, "healthy": bool(prev["healthy"] and n["healthy"]),
                **{k: prev.get(k, 0) + n.get(k, 0) for k in ("inflight", "shadow_inflight") if k in prev or k in n}}
    return list(out.values())
