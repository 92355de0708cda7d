"""Failure signatures: how the explorer groups failing draws.

One signature per failing draw, from the first of (in this order):

* ``hang`` (no result within the draw timeout), ``crash:<signal or exit code>``
  (the draw child died), ``harness:<error class>`` (the explorer's child broke);
* ``stage:<stage>:<error class>`` (the export failed, or the run stage: the
  reference model rejected a delegate; ``<error class><-<root cause class>``
  when the error was raised from another, e.g. ExecuTorch's pass manager
  wrapping a ``TosaValueError``), with ``[case]`` / ``[harness]`` when
  the suite blames the case or itself rather than the toolchain;
* ``delegation:<what>`` (``test_delegation`` fails: an unexpected CPU
  fallback, an unexpected delegation, other CPU ops than declared);
* ``numerics:<comparison>:<size>`` (the worst failing comparison: a max
  error before a bias alone, then the larger size; the first in oracle order
  of equals; size: ``<=2LSB``, ``2-10LSB``, ``>10LSB`` in int8 steps (int16
  outputs of int8 programs divided by 258), or ``bias`` / ``outliers`` when
  only those bounds break);
* ``pte``, ``vulkan:<mismatch|error>``, ``xpass:<test>`` (a table case's
  expected failure did not happen).

Failures the table expects (a draw equal to a table case with an
Expectation) are no signature.

Each signature is also an exception class (:func:`failure_type`, a subclass of
:class:`ExploreFailure`): the explorer's Hypothesis test raises it for a
failing draw, and Hypothesis tells failures apart by their class.
"""

from __future__ import annotations

import re

BUCKETS = ((2.0, "<=2LSB"), (10.0, "2-10LSB"), (float("inf"), ">10LSB"))


def size_bucket(row: dict) -> str:
    """The coarse size of a failed comparison (a row of ``outcome["comparisons"]``)."""
    problems = " ".join(row["problems"])
    if "max error" not in problems and "outlier cap" not in problems:
        return "bias" if "bias" in problems else "outliers"
    if "outlier cap" not in problems and " on " in problems and "allowed" in problems:
        return "outliers"
    size = row["max_lsb"] / row.get("int8_lsb_scale", 1.0)
    return next(label for limit, label in BUCKETS if size <= limit)


def severity(row: dict) -> tuple:
    """How bad a failed comparison is, coarsely (so that close values do not
    split a group): a max error beyond the bound before a bias or outlier
    share alone, then its size bucket."""
    problems = " ".join(row["problems"])
    size = size_bucket(row)
    labels = [label for _, label in BUCKETS]
    return ("max error" in problems or "outlier cap" in problems,
            labels.index(size) if size in labels else -1)


def _failed(outcome: dict, test: str) -> dict | None:
    return next((t for t in outcome.get("tests", ()) if t["test"] == test and t["result"] == "failed"), None)


def _delegation_kind(message: str) -> str:
    if "declared to stay on the CPU" in message:
        return "unexpected-delegation"
    if "declared partly delegated" in message:
        return "cpu-ops-changed"
    if "nothing was delegated" in message:
        return "unexpected-cpu-fallback"
    return "ops-left-on-cpu"


def signature(outcome: dict) -> str | None:
    """The failure signature of a draw's outcome, or None (it passes, or fails as the table expects)."""
    status = outcome.get("status")
    if status == "timeout":
        return "hang"
    if status == "crash":
        return f"crash:{outcome.get('exit', '?')}"
    if status == "error":
        return f"harness:{outcome.get('error_type', 'Exception')}"
    failure = outcome.get("failure")
    if failure and any(t["result"] == "failed" and (t["test"] == "test_export" or t["test"].startswith("test_numerics"))
                       for t in outcome.get("tests", ())):
        origin = "" if failure.get("origin", "toolchain") == "toolchain" else f"[{failure['origin']}]"
        error = failure["error_type"]
        root = (failure.get("root_cause") or {}).get("type")
        if root and root != error:
            error = f"{error}<-{root}"  # e.g. Exception<-TosaValueError: a failing pass, and why
        return f"stage:{failure['stage']}:{error}{origin}"
    delegation = _failed(outcome, "test_delegation")
    if delegation:
        return f"delegation:{_delegation_kind(delegation['message'])}"
    rows = [row for row in outcome.get("comparisons", ())
            if not row["ok"] and _failed(outcome, f"test_numerics_{row['check']}")]
    if rows:
        row = max(rows, key=severity)  # max() keeps the first (oracle order) of equals
        return f"numerics:{row['check']}:{size_bucket(row)}"
    if _failed(outcome, "test_pte"):
        return "pte"
    vulkan = _failed(outcome, "test_vulkan")
    if vulkan:
        return f"vulkan:{vulkan.get('kind', 'error')}"
    for test in outcome.get("tests", ()):
        if test["result"] == "xpassed":
            return f"xpass:{test['test']}"
    return None


def failing_checks(outcome: dict) -> list[str]:
    """The comparisons (oracle names, and ``pte``) whose tests fail."""
    checks = [row["check"] for row in outcome.get("comparisons", ())
              if not row["ok"] and _failed(outcome, f"test_numerics_{row['check']}")]
    if _failed(outcome, "test_pte"):
        checks.append("pte")
    return list(dict.fromkeys(checks))


# ---------------------------------------------------------------------------
# A signature as an exception class
# ---------------------------------------------------------------------------
class ExploreFailure(Exception):
    """A failing draw. Subclassed once per signature (see :func:`failure_type`)."""

    signature = ""

    def __init__(self, outcome: dict) -> None:
        super().__init__(f"{self.signature}: {outcome.get('id')}")
        self.outcome = outcome


_FAILURE_TYPES: dict[str, type] = {}


def slug(sig: str) -> str:
    """A signature as a name (of its exception class, of its example database)."""
    return re.sub(r"\W+", "_", sig).strip("_")


def failure_type(sig: str) -> type:
    """The exception class of a signature (one per signature and process:
    Hypothesis tells failures apart by their class)."""
    if sig not in _FAILURE_TYPES:
        name = "Failure_" + slug(sig)
        _FAILURE_TYPES[sig] = type(name, (ExploreFailure,), {"signature": sig})
    return _FAILURE_TYPES[sig]
