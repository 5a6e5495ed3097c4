"""MkDocs hooks: the reference pages are filled from the code at build time, so they cannot drift from it.

A page asks for a generated part with an HTML comment on a line of its own:

    <!-- reference:settings -->   every pydantic-settings class: flag, environment variable, default, meaning
    <!-- reference:policy -->     the policy file's schema, from the pydantic model `quantroute.policy.model.Policy`
    <!-- reference:metrics -->    the Prometheus series of the router's and the controller's registries

The CLI reference needs no hook: the `mkdocs-click` extension walks `quantroute.cli.main:cli`.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Document this checkout's code, whichever checkout the venv's editable install points at.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"^<!-- reference:([a-z-]+) -->$", re.MULTILINE)


def _cell(text: object) -> str:
    """One Markdown table cell: no pipes, no line breaks."""
    return " ".join(str(text).replace("|", "/").split())


# ---- settings -----------------------------------------------------------------------------------------------

def _click_flags(command: Any) -> dict[str, list[str]]:
    """Option destination -> its flags (`--db`, `--policies`, ...), for the options a command shows."""
    flags: dict[str, list[str]] = {}
    for param in getattr(command, "params", []):
        if getattr(param, "hidden", False) or not getattr(param, "opts", None):
            continue
        flags[param.name] = [o for o in param.opts if o.startswith("--")]
    return flags


def _default_text(info: Any) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
    else:
        value = info.default
    if value is None or value == []:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Path):
        # packaged files (the eval suite) are shown relative to the package, not to this machine's install
        parts = value.parts
        if "quantroute" in parts and value.is_absolute():
            return str(Path(*parts[parts.index("quantroute"):]))
        return str(value)
    return str(value)


def settings_table(cls: Any, command: Any | None = None) -> str:
    """A settings class as a table: flag (when a command takes it), environment variable, default, meaning."""
    prefix = cls.model_config.get("env_prefix", "")
    flags = _click_flags(command) if command is not None else {}
    rows = ["| setting | flag | environment variable | default | what it sets |", "| --- | --- | --- | --- | --- |"]
    for name, info in cls.model_fields.items():
        shown = " ".join(f"`{f}`" for f in flags.get(name, [])) or "-"
        rows.append(f"| `{name}` | {shown} | `{prefix}{name.upper()}` | `{_cell(_default_text(info))}` | "
                    f"{_cell(info.description or '')} |")
    return "\n".join(rows)


def settings_reference() -> str:
    from dashboard.settings import DashboardSettings
    from quantroute.cli.controller import controller
    from quantroute.cli.router import router
    from quantroute.controller.settings import ControllerSettings
    from quantroute.router.settings import RouterSettings

    parts = [
        ("Router", "`quantroute router`", RouterSettings, router),
        ("Controller", "`quantroute controller`", ControllerSettings, controller),
        ("Dashboard", "`quantroute dashboard` (environment only)", DashboardSettings, None),
    ]
    out = []
    for title, process, cls, command in parts:
        out += [f"## {title}", "", f"Read by {process} from `{cls.model_config.get('env_prefix')}*` variables"
                + ("; its flags win over them." if command is not None else "."), "", settings_table(cls, command), ""]
    return "\n".join(out)


# ---- policy schema ------------------------------------------------------------------------------------------

def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(name: str) -> str:
    return name.lower()


def _type_text(schema: dict[str, Any]) -> str:
    """A JSON-schema node as a short type: `list of Rule`, `fp16 / fp8`, `number or null`."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{_anchor(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_type_text(s) for s in schema[key]]
            if key == "oneOf" and len(options) > 3:
                return "one condition (below)"
            return " or ".join(options)
    if "enum" in schema:
        return " / ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type_text(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of name to {_type_text(schema['additionalProperties'])}"
    if schema.get("format") == "date-time":
        return "date-time"
    return str(kind)


CONSTRAINTS = [("minimum", ">= {}"), ("exclusiveMinimum", "> {}"), ("maximum", "<= {}"),
               ("exclusiveMaximum", "< {}"), ("minLength", "at least {} characters"), ("minItems", "at least {}"),
               ("pattern", "matches `{}`")]


def _constraints(schema: dict[str, Any]) -> str:
    found = [text.format(schema[key]) for key, text in CONSTRAINTS if key in schema]
    for option in schema.get("anyOf", []):
        found += [text.format(option[key]) for key, text in CONSTRAINTS if key in option]
    return ", ".join(found)


def _yaml_value(value: object) -> str:
    """A default as it would be written in the YAML file."""
    return json.dumps(value) if not isinstance(value, str) or value == "" else value


def field_comments(*modules: Any) -> dict[tuple[str, str], str]:
    """(class, field) -> the comment written beside a field (same line) or right above it, for fields whose model
    gives no description: the code's own words, read from the source so they cannot drift either."""
    found: dict[tuple[str, str], str] = {}
    for module in modules:
        source = inspect.getsource(module)
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                    continue
                line = lines[item.lineno - 1]
                comment = line.split("  # ", 1)[1] if "  # " in line else ""
                above, n = [], item.lineno - 2
                while n >= 0 and lines[n].strip().startswith("#"):
                    above.insert(0, lines[n].strip().lstrip("#").strip())
                    n -= 1
                text = comment or " ".join(above)
                if text:
                    found[(node.name, item.target.id)] = text
    return found


def default_factories(*modules: Any) -> dict[tuple[str, str], Callable[[], Any]]:
    """(class, field) -> the factory of a default the JSON schema leaves out (lists, maps, nested models)."""
    found: dict[tuple[str, str], Callable[[], Any]] = {}
    for module in modules:
        for cls in vars(module).values():
            for field, info in getattr(cls, "model_fields", {}).items() if isinstance(cls, type) else ():
                if info.default_factory is not None:
                    found[(cls.__name__, field)] = info.default_factory
    return found


def _default_cell(prop: dict[str, Any], factory: Callable[[], Any] | None) -> str:
    if "default" in prop:
        return f"`{_cell(_yaml_value(prop['default']))}`"
    if factory is None:
        return ""
    value = factory()
    if hasattr(value, "model_dump"):
        return "its own defaults"
    value = [v.model_dump(mode="json", exclude_defaults=True) if hasattr(v, "model_dump") else v for v in value] \
        if isinstance(value, list) else value
    return f"`{_cell(json.dumps(value, default=str))}`"


def _model_section(name: str, schema: dict[str, Any], comments: dict[tuple[str, str], str],
                   factories: dict[tuple[str, str], Callable[[], Any]]) -> list[str]:
    lines = [f"### {name} {{#{_anchor(name)}}}", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    if "enum" in schema:
        return lines + ["One of " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".", ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | default | valid values | meaning |", "| --- | --- | --- | --- | --- | --- |"]
    for field, prop in schema.get("properties", {}).items():
        default = "" if field in required else _default_cell(prop, factories.get((name, field)))
        meaning = prop.get("description") or comments.get((name, field), "")
        lines.append(f"| `{field}` | {_type_text(prop)} | {'yes' if field in required else ''} | {default} | "
                     f"{_cell(_constraints(prop))} | {_cell(meaning)} |")
    return lines + [""]


def policy_reference() -> str:
    from quantroute.policy import condition, model

    comments = field_comments(model, condition)
    factories = default_factories(model, condition)
    schema = model.Policy.model_json_schema()
    defs: dict[str, Any] = schema.pop("$defs", {})
    conditions = sorted(n for n in defs if n.endswith("Cond"))
    others = [n for n in sorted(defs) if n not in conditions]
    out = ["## Policy {#policy}", "", "The top level of a `policy-NNNN.yaml` file.", ""]
    out += _model_section("Policy", schema, comments, factories)[2:]
    out += ["## Parts", ""]
    for name in others:
        out += _model_section(name, defs[name], comments, factories)
    out += ["## Conditions", "", "A rule's `when` is exactly one of these (one key each); `all`, `any` and `not` "
            "combine them.", ""]
    for name in conditions:
        out += _model_section(name, defs[name], comments, factories)
    return "\n".join(out)


# ---- metrics ------------------------------------------------------------------------------------------------

def _families(registry: Any) -> Iterator[tuple[str, str, str, list[str]]]:
    """Every family of a registry with its label names. A series with no sample yet shows its labels only on the
    metric object (`_labelnames`: prometheus_client keeps them there, for metrics and metric families alike)."""
    for collector in list(registry._collector_to_names):
        declared = getattr(collector, "_labelnames", None)
        for fam in collector.collect():
            names = declared if declared is not None else getattr(fam, "_labelnames", None)
            if names is None:
                names = {k for s in fam.samples for k in s.labels if k not in ("le", "quantile")}
            yield fam.name, fam.type, fam.documentation, sorted(names)


def _metrics_table(rows: list[tuple[str, str, str, list[str]]]) -> str:
    suffix = {"counter": "_total"}
    lines = ["| series | type | labels | what it counts |", "| --- | --- | --- | --- |"]
    for name, kind, doc, labels in sorted(rows):
        shown = name + suffix.get(kind, "") if not name.endswith(suffix.get(kind, "\0")) else name
        lines.append(f"| `{shown}` | {kind} | {', '.join(f'`{x}`' for x in labels) or '-'} | {_cell(doc)} |")
    return "\n".join(lines)


def metrics_reference() -> str:
    from quantroute.controller.metrics import ControllerMetrics
    from quantroute.router.app import create_app
    from quantroute.router.metrics.registry import merge_worker_metrics
    from quantroute.router.settings import RouterSettings

    with tempfile.TemporaryDirectory() as policies:
        app = create_app(RouterSettings(policies_dir=Path(policies)), use_db=False)
        router_rows = list(_families(app.metrics.registry))
    # a router of several workers adds one series of its own when it merges the workers' scrapes
    merged = merge_worker_metrics([("0", b"")], silent=["1"]).decode()
    from prometheus_client.parser import text_string_to_metric_families

    router_rows += [(f.name, f.type, f.documentation, ["worker"]) for f in text_string_to_metric_families(merged)]
    controller_rows = list(_families(ControllerMetrics().registry))
    return "\n".join([
        "## Router", "", "Served at the router's `/metrics`. With `--workers N` every series also carries a `worker` "
        "label.", "", _metrics_table(router_rows), "",
        "## Controller", "", "Served at `quantroute controller --metrics-port P`.", "",
        _metrics_table(controller_rows), ""])


GENERATORS: dict[str, Callable[[], str]] = {
    "settings": settings_reference,
    "policy": policy_reference,
    "metrics": metrics_reference,
}


def render(markdown: str) -> str:
    """Replace every reference marker; an unknown name fails the build (it would otherwise show nothing)."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown reference marker {name!r}; known: {', '.join(sorted(GENERATORS))}")
        return GENERATORS[name]()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)
