"""The case child: ``python -m vgf_conformance.native.worker`` evaluates one case at
a time for :mod:`vgf_conformance.native`, answering on the served-child
protocol (:class:`vgf_conformance.explore.worker.DrawChild` drives it over
:class:`vgf_conformance.process.ServedChild`: a JSON line in on stdin, a JSON
line back on a private pipe, its own process group, a timeout per case; a case
that hangs or crashes the child costs that case only)."""

from __future__ import annotations

from vgf_conformance.explore.worker import serve_evaluations


def main() -> int:
    return serve_evaluations("vgf_conformance.native.evaluate", lambda request: f"--- case {request.get('case')}")


if __name__ == "__main__":
    raise SystemExit(main())
