"""Splits an eval item's unit tests into what the sandbox may see and what only the grader knows.

Every `assert` in a test becomes a probe: the child process evaluates only the operands that need the answer
(`fizzbuzz(5)`, `c.get(1)`) and sends their values back as plain data; the literal operands (the expected
values) never enter the sandbox, and the comparison runs here, in the parent, on decoded plain values. So an
answer cannot see what it is compared against, cannot fake equality with `__eq__` (an object of its own type
decodes to an opaque value that equals nothing), and cannot decide its own verdict.

Pure: no I/O. The sandbox (`sandbox.py`) runs the probe programs; `verdict` scores what came back."""

from __future__ import annotations

import ast
import operator
import threading
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel

PROBE = "__probe__"
_OPS: dict[type, Any] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: operator.contains(b, a), ast.NotIn: lambda a, b: not operator.contains(b, a),
}
_OP_NAMES = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Is: "is",
             ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
MAX_DEPTH = 64


class Operand(BaseModel):
    """One side of a check: a literal kept by the grader, or the index of a value the sandbox reports."""
    literal: Any = None
    probe: int | None = None


class Check(BaseModel):
    """One `assert` of a test, as the parent evaluates it."""
    index: int
    source: str
    operands: list[Operand]
    ops: list[str]  # comparison operators between consecutive operands; empty for a truth test
    negate: bool = False
    # how often the assert must run: once at top level, at most once under try/if, any number in a loop
    count: Literal["once", "at_most_once", "any"] = "once"


class ProbeProgram(BaseModel):
    """A test as sent to the sandbox (`child_source`, expected values removed) and kept by the grader (`checks`)."""
    original: str
    child_source: str
    checks: list[Check]


class Opaque:
    """A value of a type the answer defined (or any non-plain type): equal to nothing, not even itself, and
    false, so no method of the answer's object ever runs in the grader."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]  # unhashable: never a dict key or set member

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def decode(value: Any, depth: int = 0) -> Any:
    """The plain value the child encoded (see the harness's `_encode`): JSON scalars, and tagged containers."""
    if depth > MAX_DEPTH:
        return Opaque("too deep")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is dict and len(value) == 1:
        (tag, body), = value.items()
        if tag == "opaque":
            return Opaque(str(body))
        if tag == "bytes" and type(body) is str:
            return bytes.fromhex(body)
        if tag == "dict" and type(body) is list:
            try:
                return {decode(k, depth + 1): decode(v, depth + 1) for k, v in (_pair(p) for p in body)}
            except TypeError:  # an unhashable (opaque) key, or not a pair
                return Opaque("dict")
        if type(body) is list:
            items = [decode(v, depth + 1) for v in body]
            try:
                if tag == "list":
                    return items
                if tag == "tuple":
                    return tuple(items)
                if tag == "set":
                    return set(items)
                if tag == "frozenset":
                    return frozenset(items)
            except TypeError:  # an unhashable (opaque) element in a set or as a key
                return Opaque(tag)
    return Opaque("malformed")


def _pair(p: Any) -> tuple[Any, Any]:
    if type(p) is not list or len(p) != 2:
        raise TypeError("dict item")
    return p[0], p[1]


class _Splitter(ast.NodeTransformer):
    def __init__(self, source: str) -> None:
        self.source = source
        self.checks: list[Check] = []
        self.probes = 0
        self.context: list[str] = []

    def _count(self) -> Literal["once", "at_most_once", "any"]:
        if any(c == "loop" for c in self.context):
            return "any"
        return "at_most_once" if self.context else "once"

    def _nested(self, node: ast.AST, kind: str) -> ast.AST:
        self.context.append(kind)
        try:
            return self.generic_visit(node)
        finally:
            self.context.pop()

    def visit_Try(self, node: ast.Try) -> ast.AST:
        return self._nested(node, "branch")

    def visit_If(self, node: ast.If) -> ast.AST:
        return self._nested(node, "branch")

    def visit_With(self, node: ast.With) -> ast.AST:
        return self._nested(node, "branch")

    def visit_For(self, node: ast.For) -> ast.AST:
        return self._nested(node, "loop")

    def visit_While(self, node: ast.While) -> ast.AST:
        return self._nested(node, "loop")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._nested(node, "loop")

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        test, negate = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negate = test.operand, True
        if isinstance(test, ast.Compare) and all(type(op) in _OPS for op in test.ops):
            exprs, ops = [test.left, *test.comparators], [_OP_NAMES[type(op)] for op in test.ops]
        else:
            exprs, ops = [test], []
        operands: list[Operand] = []
        sent: list[ast.expr] = []
        for e in exprs:
            try:
                operands.append(Operand(literal=ast.literal_eval(e)))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                operands.append(Operand(probe=len(sent)))
                sent.append(e)
        check = Check(index=len(self.checks), source=ast.get_source_segment(self.source, node) or "assert",
                      operands=operands, ops=ops, negate=negate, count=self._count())
        self.checks.append(check)
        call = ast.Call(func=ast.Name(PROBE, ast.Load()), args=[ast.Constant(check.index), *sent], keywords=[])
        return ast.copy_location(ast.Expr(call), node)


# CPython 3.11 keeps the recursion depth of its C-to-Python AST conversion in interpreter-wide state: a thread that
# parses while another one's parse is suspended (a garbage collection running a finalizer switches threads
# mid-conversion) makes one of them fail with "SystemError: AST constructor recursion depth mismatch". Graders run in
# worker threads, 16 at once in an eval run; parses take turns (re-entrant: a finalizer on the same thread may parse).
_PARSING = threading.RLock()


def split(test: str) -> ProbeProgram:
    """The child's program for one test and the grader's checks. Raises SyntaxError for a test that does not parse."""
    with _PARSING:
        tree = ast.parse(test)
    splitter = _Splitter(test)
    tree = ast.fix_missing_locations(splitter.visit(tree))
    return ProbeProgram(original=test, child_source=ast.unparse(tree), checks=splitter.checks)


class ChildReport(BaseModel):
    """What the child reported for one test: the probed values of each assert it ran, and how the test ended."""
    records: list[tuple[int, list[Any]]] = []
    error: str | None = None  # "TypeError: ..." when the test raised; None when it ran to its end


def _holds(check: Check, values: list[Any]) -> bool:
    seen = [decode(v) for v in values]
    plain = [o.literal if o.probe is None else (seen[o.probe] if o.probe < len(seen) else Opaque("missing"))
             for o in check.operands]
    try:
        if not check.ops:
            ok = bool(plain[0])
        else:
            ok = all(bool(_OPS[_OP_TYPES[op]](a, b)) for op, a, b in zip(check.ops, plain, plain[1:]))
    except TypeError:  # e.g. "<" between a number and an opaque value
        ok = False
    return ok != check.negate


_OP_TYPES = {name: t for t, name in _OP_NAMES.items()}


def verdict(program: ProbeProgram, outcome: ChildReport) -> str | None:
    """None when the test passed; otherwise why not, in one line. Decided here from plain values only."""
    if outcome.error is not None:
        return f"{program.original[:120]} -> {outcome.error}"
    runs = Counter(k for k, _ in outcome.records)
    for check in program.checks:
        n = runs.get(check.index, 0)
        if (check.count == "once" and n != 1) or (check.count == "at_most_once" and n > 1):
            return f"{check.source[:120]} -> reported {n} times (expected {check.count.replace('_', ' ')})"
    by_index = {c.index: c for c in program.checks}
    for k, values in outcome.records:
        asserted = by_index.get(k)
        if asserted is None:
            return f"a result for an assert the test does not have (#{k})"
        if not _holds(asserted, values):
            got = ", ".join(repr(decode(v))[:80] for v in values)
            return f"{asserted.source[:120]} -> got {got}"
    return None
