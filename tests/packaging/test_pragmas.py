"""Every linter or type-checker silencer in the repository names what it silences and says why, on its own line:
`# noqa: CODE - reason` and `# type: ignore[code]  # reason`. A bare one hides every later error on that line,
and one without a reason cannot be judged (is the fix still pending, or is the checker wrong?). ruff (RUF100) and
mypy (warn_unused_ignores) remove the ones nothing needs; this test keeps the rest explained."""

from __future__ import annotations

import io
import re
import tokenize

import pytest

from tests.conftest import REPO
from tests.packaging.conftest import python_files

NOQA = re.compile(r"#\s*noqa\b(?P<codes>:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?(?P<rest>.*)", re.IGNORECASE)
IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<codes>\[\s*[a-z][a-z0-9-]*(?:\s*,\s*[a-z][a-z0-9-]*)*\s*\])?(?P<rest>.*)")
# what may stand between the codes and the reason: " - why", "  # why", "  (why)"
SEPARATORS = " \t-–—#:;,("


def unexplained(source: str) -> list[tuple[int, str]]:
    """(line, comment) of each noqa / type: ignore comment that names no code or gives no reason."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        for pattern in (NOQA, IGNORE):
            m = pattern.search(tok.string)
            if m is None:
                continue
            reason = m["rest"].lstrip(SEPARATORS).rstrip(" )")
            if not m["codes"] or not re.search(r"[A-Za-z]{2}", reason):
                found.append((tok.start[0], tok.string))
    return found


@pytest.mark.parametrize("comment", [
    "# noqa", "# noqa: E501", "# NOQA:BLE001", "# type: ignore", "# type: ignore[attr-defined]",
    "# type: ignore  # SQLModel", "# noqa - no code given", "# type: ignore[arg-type]  #",
])
def test_a_silencer_without_a_code_or_a_reason_is_refused(comment):
    assert unexplained(f"x = f(1)  {comment}\n") == [(1, comment)]


@pytest.mark.parametrize("comment", [
    "# noqa: BLE001 - the DB being down never fails a request", "# noqa: F401  (fixtures)",
    "# noqa: E711, E712 - SQL: IS NULL", "# type: ignore[union-attr]  # connected: the transport exists",
    "# type: ignore[arg-type, misc]  # a stored row has its id", "# why a # noqa: F401 - would be read here",
])
def test_a_silencer_with_codes_and_a_reason_passes(comment):
    assert unexplained(f"x = f(1)  {comment}\n") == []


def test_pragmas_in_strings_are_not_comments():
    assert unexplained('DOC = "# noqa"\nHELP = """x  # type: ignore\n"""\n') == []


def test_every_silencer_in_the_repository_names_its_codes_and_a_reason():
    files = python_files(REPO)
    assert len(files) > 100 and REPO / "quantroute" / "router" / "app.py" in files
    bad = [f"{path.relative_to(REPO)}:{line}: {comment}"
           for path in files for line, comment in unexplained(path.read_text())]
    assert not bad, "silencers without a code or a reason:\n" + "\n".join(bad)
