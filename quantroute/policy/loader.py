"""Parse and validate policy YAML. Every problem is reported at once, each with its path and what would be valid."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from quantroute import yamlsafe
from quantroute.policy.condition import CONDITION_KINDS
from quantroute.policy.model import Policy, Spill
from quantroute.tiers import TIER_ORDER


@dataclass(frozen=True)
class Issue:
    path: str
    message: str
    line: int | None = None  # 1-based line in the YAML text, where the issue came from a file or a string

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.path}: {self.message}" if self.path else f"{where}{self.message}"


class PolicyValidationError(ValueError):
    def __init__(self, source: str, issues: list[Issue]):
        self.source = source
        self.issues = issues
        lines = "\n".join(f"  {i}" for i in issues)
        super().__init__(f"{source}: {len(issues)} problem(s)\n{lines}")


def format_loc(loc: tuple[Any, ...]) -> str:
    """('rules', 3, 'when', 'temperature', 'temperature', 'max') -> 'rules[3].when.temperature.max'.
    Tagged unions repeat the tag before the field of the same name; drop the repeat."""
    parts: list[Any] = []
    for el in loc:
        if parts and el == parts[-1] and el in CONDITION_KINDS:
            continue
        parts.append(el)
    out = ""
    for el in parts:
        if isinstance(el, int):
            out += f"[{el}]"
        else:
            out += ("." if out else "") + str(el)
    return out.replace(".not_", ".not")


def _pydantic_issues(err: ValidationError) -> list[Issue]:
    issues = []
    for e in err.errors(include_url=False):
        msg = e["msg"]
        if e["type"] == "enum":
            msg = f"{msg} (got {e.get('input')!r})"
        elif e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] == "missing":
            msg = "required key is missing"
        issues.append(Issue(format_loc(tuple(e["loc"])), msg.removeprefix("Value error, ")))
    return issues


def semantic_issues(p: Policy) -> list[Issue]:
    """Cross-field rules pydantic cannot see field by field."""
    where = _deployment_places(p)
    return [*_tier_issues(p), *_deployment_issues(p, where), *_rule_issues(p), *_threshold_issues(p),
            *_canary_issues(p, where), *_shadow_issues(p)]


def _tier_issues(p: Policy) -> list[Issue]:
    issues: list[Issue] = []
    ladder = [t.name for t in p.tiers]
    seen: dict[str, int] = {}
    for i, t in enumerate(p.tiers):
        if t.name.value in seen:
            issues.append(Issue(f"tiers[{i}].name",
                                f"duplicate tier {t.name.value!r} (also tiers[{seen[t.name.value]}])"))
        seen.setdefault(t.name.value, i)
    ranks = [t.rank for t in ladder]
    if ranks != sorted(ranks):
        want = [t.value for t in TIER_ORDER if t in ladder]
        issues.append(Issue("tiers", f"tiers must be listed in fidelity order: {', '.join(want)}"))
    return issues


def _deployment_places(p: Policy) -> dict[str, str]:
    """Each deployment's first place in the tiers (`tiers[i].deployments.<model>[j]`)."""
    where: dict[str, str] = {}
    for i, t in enumerate(p.tiers):
        for model, deps in t.deployments.items():
            for j, dep in enumerate(deps):
                where.setdefault(dep, f"tiers[{i}].deployments.{model}[{j}]")
    return where


def _deployment_issues(p: Policy, where: dict[str, str]) -> list[Issue]:
    issues: list[Issue] = []
    for i, t in enumerate(p.tiers):
        for model, deps in t.deployments.items():
            for j, dep in enumerate(deps):
                path = f"tiers[{i}].deployments.{model}[{j}]"
                if where[dep] != path:
                    issues.append(Issue(path, f"deployment {dep!r} is already listed at {where[dep]}; "
                                              "a deployment serves exactly one tier"))
    for dep, meta in p.deployments.items():
        if dep not in where:
            issues.append(Issue(f"deployments.{dep}",
                                "no tier lists this deployment; add it under tiers[].deployments"))
        elif p.deployment_model(dep) != meta.model:
            issues.append(Issue(f"deployments.{dep}.model",
                                f"{meta.model!r} but the tiers list it under model {p.deployment_model(dep)!r}"))
    return issues


def _rule_issues(p: Policy) -> list[Issue]:
    issues: list[Issue] = []
    names: dict[str, int] = {}
    for i, r in enumerate(p.rules):
        if r.name in names:
            issues.append(Issue(f"rules[{i}].name", f"duplicate rule name {r.name!r} (also rules[{names[r.name]}])"))
        names.setdefault(r.name, i)
    return issues


def _threshold_issues(p: Policy) -> list[Issue]:
    """Thresholds (and the escalation ceiling) name listed tiers, and a higher score never maps to a cheaper one."""
    issues: list[Issue] = []
    ladder = [t.name for t in p.tiers]
    for i, th in enumerate(p.thresholds):
        if th.tier not in ladder:
            issues.append(Issue(f"thresholds[{i}].tier",
                                f"tier {th.tier.value!r} is not in tiers; valid: {', '.join(t.value for t in ladder)}"))
    ordered = sorted(enumerate(p.thresholds), key=lambda it: it[1].min_score)
    for (ia, a), (ib, b) in zip(ordered, ordered[1:]):
        if a.min_score == b.min_score:
            issues.append(Issue(f"thresholds[{ib}].min_score", f"same min_score as thresholds[{ia}]"))
        elif b.tier.rank > a.tier.rank:
            issues.append(Issue(f"thresholds[{ib}]",
                                f"not monotone: score >= {b.min_score} maps to {b.tier.value}, lower fidelity than "
                                f"{a.tier.value} at score >= {a.min_score}; a higher score must require an equal "
                                "or higher-fidelity tier"))
    if p.escalation.max_tier not in ladder:
        issues.append(Issue("escalation.max_tier", f"tier {p.escalation.max_tier.value!r} is not in tiers"))
    return issues


def _canary_issues(p: Policy, where: dict[str, str]) -> list[Issue]:
    issues: list[Issue] = []
    models = p.models()
    seen_canary: set[str] = set()
    for i, c in enumerate(p.canaries):
        path = f"canaries[{i}]"
        if c.model not in models:
            issues.append(Issue(f"{path}.model",
                                f"unknown model {c.model!r}; tiers list: {', '.join(sorted(models)) or 'none'}"))
        if c.model in seen_canary:
            issues.append(Issue(f"{path}.model", f"a canary for {c.model!r} is already defined"))
        seen_canary.add(c.model)
        for key in ("baseline", "candidate"):
            dep = getattr(c, key)
            if dep not in where:
                issues.append(Issue(f"{path}.{key}", f"deployment {dep!r} is not listed by any tier"))
            elif p.deployment_model(dep) != c.model:
                issues.append(Issue(f"{path}.{key}", f"deployment {dep!r} belongs to model "
                                                     f"{p.deployment_model(dep)!r}, not {c.model!r}"))
        if c.baseline == c.candidate:
            issues.append(Issue(f"{path}.candidate", "the candidate must be a new deployment id, not the baseline's"))
        if c.percent not in (0, *c.steps):
            issues.append(Issue(f"{path}.percent", f"{c.percent} is not 0 or one of the steps {c.steps}"))
    return issues


def _shadow_issues(p: Policy) -> list[Issue]:
    issues: list[Issue] = []
    if p.shadow is None:
        return issues
    ladder = [t.name for t in p.tiers]
    valid = ", ".join(t.value for t in ladder)
    for i, pair in enumerate(p.shadow.pairs):
        for j, tier in enumerate(pair.served):
            if tier not in ladder:
                issues.append(Issue(f"shadow.pairs[{i}].served[{j}]", f"tier {tier.value!r} is not in tiers; "
                                                                     f"valid: {valid}"))
        if pair.shadow is not None and pair.shadow not in ladder:
            issues.append(Issue(f"shadow.pairs[{i}].shadow", f"tier {pair.shadow.value!r} is not in tiers; "
                                                             f"valid: {valid}"))
    return issues


def canonical_hash(data: dict[str, Any]) -> str:
    """Hash of the content, excluding the hash itself, stable across key order and YAML formatting."""
    body = {k: v for k, v in data.items() if k != "content_hash"}
    blob = json.dumps(body, sort_keys=True, default=str, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def _prune(data: dict[str, Any], err: ValidationError) -> tuple[dict[str, Any], dict[str, list[int]]] | None:
    """Drop the parts that failed field validation so the cross-field checks can still run on the rest.
    Returns the pruned data and, per list, the original index of each kept element (to report true paths)."""
    drop_items: dict[str, set[int]] = {}
    pruned = dict(data)
    for e in err.errors():
        loc = e["loc"]
        top = str(loc[0]) if loc else None
        if top is None or top in ("tiers", "thresholds") and len(loc) < 2:
            return None
        value = data.get(top)
        if isinstance(value, list) and len(loc) > 1 and isinstance(loc[1], int):
            drop_items.setdefault(top, set()).add(loc[1])
        elif isinstance(value, dict) and top == "deployments" and len(loc) > 1:
            pruned[top] = {k: v for k, v in pruned[top].items() if k != loc[1]}
        elif top in Policy.model_fields and Policy.model_fields[top].is_required():
            return None  # a required scalar is broken: nothing sensible to check across fields
        else:
            pruned.pop(top, None)  # falls back to the default
    index: dict[str, list[int]] = {}
    for key, bad in drop_items.items():
        keep = [i for i in range(len(data[key])) if i not in bad]
        pruned[key] = [data[key][i] for i in keep]
        index[key] = keep
    return pruned, index


def _remap(issue: Issue, index: dict[str, list[int]]) -> Issue:
    """Rewrite `rules[1]`-style references (in the path and the message) to the original indices."""
    def fix(m: re.Match[str]) -> str:
        key, i = m.group(1), int(m.group(2))
        return f"{key}[{index[key][i]}]" if key in index and i < len(index[key]) else m.group(0)

    rx = re.compile(r"\b(\w+)\[(\d+)\]")
    return Issue(rx.sub(fix, issue.path), rx.sub(fix, issue.message))


def validate_data(data: Any, source: str = "<policy>") -> Policy:
    if not isinstance(data, dict):
        raise PolicyValidationError(source, [Issue("", f"a policy is a mapping, got {type(data).__name__}")])
    try:
        policy = Policy.model_validate(data)
    except ValidationError as e:
        issues = _pydantic_issues(e)
        pruned = _prune(data, e)
        if pruned is not None:
            try:
                partial = Policy.model_validate(pruned[0])
                issues += [_remap(i, pruned[1]) for i in semantic_issues(partial)]
            except ValidationError:
                pass  # the remainder still does not parse; the field errors above say why
        raise PolicyValidationError(source, issues) from None
    issues = semantic_issues(policy)
    stored = data.get("content_hash")
    if stored and stored != canonical_hash(policy_to_data(policy)):
        issues.append(Issue("content_hash", "does not match the content: the file was edited after it was written"))
    if issues:
        raise PolicyValidationError(source, issues)
    return policy


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def locate(root: yaml.Node | None, path: str) -> int | None:
    """The 1-based line of `path` (as `format_loc` writes it) in a composed YAML tree: the key's line for a
    mapping entry, the item's line for a list element. A path into something missing (a required key, say)
    stops at the deepest part that exists, which is where the fix goes."""
    node, line = root, (root.start_mark.line + 1 if root is not None else None)
    for name, index in _STEP.findall(path):
        if isinstance(node, yaml.MappingNode) and name:
            hit = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == name), None)
            if hit is None:
                break
            line, node = hit[0].start_mark.line + 1, hit[1]
        elif isinstance(node, yaml.SequenceNode) and index and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            break
    return line


def parse_policy(text: str, source: str = "<string>") -> Policy:
    try:  # one parse: the node tree (for line numbers), then the data from it, within size/depth/alias limits
        root, data = yamlsafe.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PolicyValidationError(source, [Issue(where, f"not valid YAML: {getattr(e, 'problem', e)}")]) from None
    try:
        return validate_data(data, source)
    except PolicyValidationError as e:
        located = [Issue(i.path, i.message, locate(root, i.path)) for i in e.issues]
        # in file order, as an editor would walk them (stable: same-line issues keep their order)
        located.sort(key=lambda i: i.line if i.line is not None else 0)
        raise PolicyValidationError(source, located) from None


def load_policy(path: str | Path) -> Policy:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PolicyValidationError(str(path), [Issue("", f"cannot read: {e.strerror}")]) from None
    return parse_policy(text, str(path))


def policy_to_data(policy: Policy) -> dict[str, Any]:
    """The YAML-ready dict, without defaults noise removed (explicit is better for reviewers)."""
    data = policy.model_dump(mode="json", by_alias=True, exclude={"content_hash"})
    # Sections added after versions were stored are left out while unset, so that content (and its hash) of
    # every version written before them stays what it was.
    if data.get("shadow") is None:
        data.pop("shadow", None)
    if data.get("spill") == Spill().model_dump(mode="json"):
        data.pop("spill", None)
    for c in data.get("canaries", []):
        for key in ("min_live_agreement", "judge"):
            if c.get("guards", {}).get(key, 0) is None:
                del c["guards"][key]
    return data


def dump_policy(policy: Policy) -> str:
    data = policy_to_data(policy)
    data["content_hash"] = canonical_hash(data)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)
