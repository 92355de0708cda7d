"""Small text helpers every part of the suite uses, defined once: the tail of
an error message, floats rounded for goldens and reports, dtype names."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

#: What a case id may look like: it names the case's golden file.
CASE_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]*")
#: The flow a case runs in unless a run asks for others (vgf_conformance.cases.flows).
DEFAULT_FLOW = "vgf"
#: A run key: a case id, or ``<flow>/<case id>`` for a run of another flow than the default.
RUN_KEY_PATTERN = re.compile(r"(?:[a-z0-9][a-z0-9_.-]*/)?[a-z0-9][a-z0-9_.-]*")

#: Lines of an error message (or a tool's output) kept in failures and reports.
TAIL_LINES = 25
#: Significant digits of every float in goldens and reports.
SIGNIFICANT_DIGITS = 6

#: ExecuTorch ScalarType names (``torch._C`` enum ``.name``) as dtype names.
SCALAR_TYPE_NAMES = {"CHAR": "int8", "SHORT": "int16", "BYTE": "uint8", "INT": "int32"}


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``, saying how many were cut."""
    rows = text.strip().splitlines()
    if len(rows) <= lines:
        return "\n".join(rows)
    return "\n".join([f"... ({len(rows) - lines} lines above)"] + rows[-lines:])


def round_floats(value: Any, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """Round every float to ``digits`` significant digits, recursively
    (non-finite floats become strings: JSON has no inf)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {str(k): round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v, digits) for v in value]
    return value


def dtype_name(dtype) -> str:
    """``int8``, ``int16``, ... for a torch dtype, an ExecuTorch ScalarType or a name."""
    if isinstance(dtype, str):
        return dtype
    text = str(dtype)
    if text.startswith("torch."):
        return text.removeprefix("torch.")
    return SCALAR_TYPE_NAMES.get(getattr(dtype, "name", ""), text)


def forward_to_cli(verb: str, old: str) -> None:
    """Run ``python -m OLD`` (a command's name before the one entry point) as
    ``python -m vgf_conformance VERB``, saying so: kept for one release."""
    import runpy
    import sys

    print(f"python -m {old} is deprecated (kept for one release): use python -m vgf_conformance {verb}",
          file=sys.stderr)
    sys.argv = ["vgf_conformance", verb, *sys.argv[1:]]
    runpy.run_module("vgf_conformance", run_name="__main__", alter_sys=True)


def atomic_write(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file
    beside it, then renamed over it, so a run killed mid-write leaves the
    previous file (a golden, a report) as it was, never half of it."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)

