"""probes: what the sandbox sees of a test, and the verdict the grader computes from plain values."""

from quantroute.evals.probes import ChildReport, Opaque, decode, split, verdict


def test_expected_values_never_reach_the_child():
    p = split("c = LRUCache(2)\nc.put(1, 1)\nassert c.get(1) == 'secret-expected'\nassert not balanced('((')")
    assert "secret-expected" not in p.child_source
    assert "__probe__(0, c.get(1))" in p.child_source and "__probe__(1, balanced('(('))" in p.child_source
    assert [c.negate for c in p.checks] == [False, True]


def test_verdict_compares_plain_values_here():
    p = split("assert f(1) == (0, 1)\nassert g() is None")
    assert verdict(p, ChildReport(records=[(0, [{"tuple": [0, 1]}]), (1, [None])])) is None
    assert "got [0, 1]" in verdict(p, ChildReport(records=[(0, [{"list": [0, 1]}]), (1, [None])]))
    assert "got <Fake object>" in verdict(p, ChildReport(records=[(0, [{"opaque": "Fake"}]), (1, [None])]))


def test_a_top_level_assert_must_be_reported_exactly_once():
    p = split("assert f() == 1")
    assert "reported 0 times" in verdict(p, ChildReport(records=[]))
    assert "reported 2 times" in verdict(p, ChildReport(records=[(0, [1]), (0, [1])]))
    tried = split("try:\n    f(0)\n    raise AssertionError('no error')\nexcept ValueError:\n    pass")
    assert verdict(tried, ChildReport()) is None
    assert "AssertionError" in verdict(tried, ChildReport(error="AssertionError: no error"))


def test_decode_refuses_anything_but_plain_values():
    assert decode({"dict": [["a", {"set": [1, 2]}]]}) == {"a": {1, 2}}
    assert isinstance(decode({"weird": 1}), Opaque) and not decode({"opaque": "X"}) == decode({"opaque": "X"})
    assert isinstance(decode({"set": [{"opaque": "X"}]}), Opaque)
