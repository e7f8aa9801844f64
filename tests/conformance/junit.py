"""Outcomes of another project's pytest suite, read from its JUnit XML report, against the list of tests seglog
is known not to pass (each with its reason): a failure not on the list is a regression, a listed test that
passes means the list is out of date."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping


@dataclass
class Outcome:
    test: str                    # as the runner's known-failures list spells it
    result: str                  # passed, failed, error, skipped
    message: str = ""


@dataclass
class Results:
    known: Mapping[str, str]     # test -> why seglog does not pass it yet
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, result: str) -> int:
        return sum(o.result == result for o in self.outcomes)

    @property
    def unexpected(self) -> list[Outcome]:
        """Failures and errors the known list does not name (regressions)."""
        return [o for o in self.outcomes if o.result in ("failed", "error") and o.test not in self.known]

    @property
    def fixed(self) -> list[Outcome]:
        """Known failures that passed (the list is out of date)."""
        return [o for o in self.outcomes if o.result == "passed" and o.test in self.known]

    def rows(self) -> list[str]:
        """Markdown rows (test, outcome, why) of every test that did not pass; a failure not in the known list
        is marked NEW."""
        out = ["| test | outcome | why |", "|---|---|---|"]
        for o in self.outcomes:
            if o.result == "passed":
                continue
            why = self.known.get(o.test) or o.message or "(no message)"
            if o.result in ("failed", "error") and o.test not in self.known:
                why = "NEW: " + why
            out.append(f"| `{o.test}` | {o.result} | {why.replace('|', '/')} |")
        return out


def file_and_name(classname: str, name: str) -> str:
    """file::[Class::]name from pytest's JUnit classname (dotted module path, then classes)."""
    parts = classname.split(".")
    file_at = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    return "::".join([parts[file_at] + ".py", *parts[file_at + 1:], name])


def parse_junit(path: Path, known: Mapping[str, str],
                test_id: Callable[[str, str], str] = file_and_name) -> Results:
    """Every test's outcome in pytest's JUnit XML at `path`, named by ``test_id(classname, name)``."""
    results = Results(known)
    for case in ET.parse(path).getroot().iter("testcase"):
        result, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                result = {"failure": "failed"}.get(tag, tag)
                message = (el.get("message") or "").strip().splitlines()[0][:200] if el.get("message") else ""
                break
        results.outcomes.append(Outcome(test_id(case.get("classname", ""), case.get("name", "")), result, message))
    return results
