"""Semantic diff of two policy versions: what a reviewer needs to see, not a text diff."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quantroute.policy.loader import policy_to_data
from quantroute.policy.model import Policy

META = {"version", "parent", "author", "created_at", "message", "content_hash"}


@dataclass(frozen=True)
class Change:
    section: str  # rules | thresholds | tiers | deployments | canaries | settings
    kind: str  # added | removed | changed
    path: str
    old: Any = None
    new: Any = None

    def __str__(self) -> str:
        if self.kind == "added":
            return f"+ {self.path}: {_short(self.new)}"
        if self.kind == "removed":
            return f"- {self.path}: {_short(self.old)}"
        return f"~ {self.path}: {_short(self.old)} -> {_short(self.new)}"


def _short(v: Any) -> str:
    s = repr(v) if not isinstance(v, str) else v
    return s if len(s) <= 100 else s[:97] + "..."


def _flatten(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _compare(section: str, old: dict[str, Any], new: dict[str, Any], base: str) -> list[Change]:
    changes = []
    fo, fn = _flatten(old, base), _flatten(new, base)
    for key in sorted(fo.keys() | fn.keys()):
        if key not in fn:
            changes.append(Change(section, "removed", key, old=fo[key]))
        elif key not in fo:
            changes.append(Change(section, "added", key, new=fn[key]))
        elif fo[key] != fn[key]:
            changes.append(Change(section, "changed", key, fo[key], fn[key]))
    return changes


def _keyed(items: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    return {str(i[key]): {k: v for k, v in i.items() if k != key} for i in items}


def _thresholds(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[Change]:
    """A threshold moved to another score is one change of its tier's threshold ("score>=6" -> "score>=7"),
    not a removal plus an addition; a score that now maps to another tier is one change of that score."""
    a = {(str(t["min_score"]), t["tier"]) for t in old}
    b = {(str(t["min_score"]), t["tier"]) for t in new}
    gone, came = sorted(a - b), sorted(b - a)
    changes = []
    for key in ("tier", "score"):  # pair by tier first (the usual edit), then by score
        for x in list(gone):
            y = next((y for y in came if (y[1] == x[1] if key == "tier" else y[0] == x[0])), None)
            if y is None:
                continue
            gone.remove(x)
            came.remove(y)
            if key == "tier":
                changes.append(Change("thresholds", "changed", f"thresholds.{x[1]}", f"score>={x[0]}",
                                      f"score>={y[0]}"))
            else:
                changes.append(Change("thresholds", "changed", f"thresholds.score>={x[0]}", x[1], y[1]))
    changes += [Change("thresholds", "removed", f"thresholds.score>={s}", old=t) for s, t in gone]
    changes += [Change("thresholds", "added", f"thresholds.score>={s}", new=t) for s, t in came]
    return changes


def diff_policies(a: Policy, b: Policy) -> list[Change]:
    da, db = policy_to_data(a), policy_to_data(b)
    changes: list[Change] = []
    # rules by name: a whole rule added/removed is one change; an edited rule lists each field
    ra, rb = _keyed(da["rules"], "name"), _keyed(db["rules"], "name")
    for name in sorted(ra.keys() | rb.keys()):
        if name not in rb:
            changes.append(Change("rules", "removed", f"rules.{name}", old=ra[name]))
        elif name not in ra:
            changes.append(Change("rules", "added", f"rules.{name}", new=rb[name]))
        else:
            changes += _compare("rules", ra[name], rb[name], f"rules.{name}")
    order_a = [n for n in (r["name"] for r in da["rules"]) if n in rb]
    order_b = [n for n in (r["name"] for r in db["rules"]) if n in ra]
    if order_a != order_b:
        changes.append(Change("rules", "changed", "rules (order)", order_a, order_b))
    changes += _thresholds(da["thresholds"], db["thresholds"])
    changes += _compare("tiers", _keyed(da["tiers"], "name"), _keyed(db["tiers"], "name"), "tiers")
    changes += _compare("deployments", da["deployments"], db["deployments"], "deployments")
    changes += _compare("canaries", _keyed(da["canaries"], "model"), _keyed(db["canaries"], "model"), "canaries")
    skip = META | {"rules", "thresholds", "tiers", "deployments", "canaries"}
    changes += _compare("settings", {k: v for k, v in da.items() if k not in skip},
                        {k: v for k, v in db.items() if k not in skip}, "")
    return changes
