"""Nodes registered through the router's admin API, so a restarted router or another replica knows them, and
what operators did to them (drained, removed), so no replica brings a removed node back."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, Session, SQLModel, select

from quantroute.clock import utcnow
from quantroute.node import SERVED_FIELDS, NodeIdentity


class NodeRow(SQLModel, table=True):
    """One vLLM server serving one deployment; written by the router on `POST /admin/nodes`."""

    __tablename__ = "node"
    key: str = Field(primary_key=True)  # node id, or the URL when none was given
    url: str
    model: str = Field(index=True)
    deployment: str = Field(index=True)
    tier: str
    format: str
    method: str = "none"
    checksum: str = ""
    hardware: str = "unknown"
    vram_gb: float | None = None
    generation: int = 1
    generation_started: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow, index=True)
    state: str = Field(default="active", sa_column_kwargs={"server_default": "active"})  # NODE_STATES

    @classmethod
    def from_identity(cls, node: NodeIdentity, *, generation: int, generation_started: datetime,
                      state: str = "active") -> NodeRow:
        return cls(key=node.key, url=node.base_url, generation=generation, generation_started=generation_started,
                   state=state, **node.model_dump(mode="json", include=set(SERVED_FIELDS)))

    def identity(self) -> NodeIdentity:
        return NodeIdentity(url=self.url, node_id=self.key, **self.model_dump(include=set(SERVED_FIELDS)))


NODE_STATES = ("active", "draining", "removed")


def upsert_node(*, session: Session, row: NodeRow) -> NodeRow:
    merged = session.merge(row)
    session.commit()
    return merged


def list_nodes(*, session: Session) -> list[NodeRow]:
    return list(session.exec(select(NodeRow).order_by(NodeRow.key)))

