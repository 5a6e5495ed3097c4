"""storable: the encoded fast path keeps exactly the values the walk would keep, and cuts nothing it would cut."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from quantroute.router.requestlog import storable
from quantroute.router.requestlog.storable import MAX_DEPTH, MAX_STRING, MAX_TEXT, _as_is, bound_json, storable_row

TEXT = st.text(max_size=30) | st.sampled_from(["", "\x00", "a\x00b", "\ud800", "x" * (MAX_STRING + 5), "é✓中文",
                                               "k" * (MAX_TEXT + 1), "\\u0000"])
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | st.integers(-2**70, 2**70) | FLOATS | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=30)


def nested(depth: int):
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


def walked(value):
    budget = storable._Budget(storable.MAX_JSON_CHARS)  # the walk itself (not storable._walk, under test)
    return storable._bound(value, 0, budget), budget.cut


@settings(max_examples=300, deadline=None, database=None)
@given(value=JSON | st.builds(nested, st.integers(MAX_DEPTH - 3, MAX_DEPTH + 3)))
def test_the_fast_path_keeps_what_the_walk_keeps(value):
    assert bound_json(value) == walked(value)
    if not isinstance(value, (dict, list)):  # what the router logs: a replay object, a rules list
        return
    row = storable_row({"replay": value}, encode=True)
    want, cut = walked(value)
    if cut and isinstance(want, dict):
        want["truncated"] = True
    assert json.loads(row["replay"]) == want


def test_values_the_walk_must_clean_never_take_the_fast_path():
    for value in ({"s": "a\x00b"}, {"s": "\ud800"}, {"k" * (MAX_TEXT + 1): 1}, nested(MAX_DEPTH),
                  {"s": "x" * (MAX_STRING + 1)}, {"n": 2**70}, {1: "non-str key"}):
        assert _as_is(value, storable.MAX_JSON_CHARS) is None, value
    assert _as_is({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, storable.MAX_JSON_CHARS)

