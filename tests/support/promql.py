"""The metric names a PromQL expression selects, and the names a Prometheus scrape exposes.

PromQL here is what dashboards and alert rules use: selectors, functions, aggregations with by/without, binary
operators with on/ignoring/group_*, ranges and subqueries. Names are what is left once strings, label matchers,
ranges and grouping label lists are taken out, and function and keyword names are skipped."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
            "inf", "nan", "atan2"}
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
# the series each metric type exposes, as suffixes of its family name
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "summary": ("", "_count", "_sum"),
            "gaugehistogram": ("_bucket", "_gcount", "_gsum"), "info": ("_info",)}


def metric_names(expr: str) -> set[str]:
    text = _STRING.sub('""', expr)
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries, $__rate_interval included
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = _GROUPING.sub("", text)
    names = set()
    for m in _NAME.finditer(text):
        word = m.group()
        if word in KEYWORDS or text[m.end():].lstrip().startswith("("):  # a function or an aggregation
            continue
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] in "$."):
            continue  # the exponent or unit of a number (1e3, 0.5), or a template variable
        names.add(word)
    return names


def exposed_names(exposition: str) -> set[str]:
    """Every series name a /metrics page exposes: the samples it has, and those its families declare (a labelled
    counter with no child yet still declares its `_total`)."""
    names = set()
    for family in text_string_to_metric_families(exposition):
        names.update(family.name + s for s in SUFFIXES.get(family.type, ("",)))
        names.update(s.name for s in family.samples)
    return names
