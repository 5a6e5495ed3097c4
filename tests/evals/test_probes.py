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


class _Finalized:
    """Garbage whose finalizer runs Python code: a collection inside a parse then lets another thread run."""

    def __init__(self) -> None:
        self.me = self  # a cycle: freed by the collector, not by reference counting

    def __del__(self) -> None:
        sum(range(50))


def test_graders_in_many_threads_split_tests_without_corrupting_each_others_parse():
    """An eval run grades 16 answers at once in worker threads. On CPython 3.11 a parse suspended by a finalizer
    while another thread parses failed with "AST constructor recursion depth mismatch" (an eval run failed so in
    `make test`); 8 threads x 1000 splits with collections forced often reproduce it (~0.2 % of splits before)."""
    import gc
    import sys
    import threading

    src = "assert is_palindrome('A man, a plan, a canal: Panama') == (f(g(h([1, 2, {3: (4, 5)}]))) and True)"
    errors: list[BaseException] = []

    def grade() -> None:
        for _ in range(1000):
            _Finalized(), _Finalized()
            try:
                split(src)
            except SystemError as e:
                errors.append(e)

    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50, 5, 5)
    try:
        threads = [threading.Thread(target=grade) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
    assert errors == []
