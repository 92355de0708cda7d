"""The case child: ``python -m vgf_conformance.native.worker`` evaluates one case at
a time for :mod:`vgf_conformance.native`, answering on the explorer's protocol
(:class:`vgf_conformance.explore.worker.DrawChild` drives it: a JSON line in on
stdin, a JSON line back on a private pipe, its own process group, a timeout per
case; a case that hangs or crashes the child costs that case only)."""

from __future__ import annotations

import json
import os
import sys
import traceback

from vgf_conformance.explore.worker import _ANSWER_FD_ENV


def main() -> int:
    answers = os.fdopen(int(os.environ[_ANSWER_FD_ENV]), "w", buffering=1)
    import logging

    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from vgf_conformance.native.evaluate import evaluate, warm_up

    warm_up()
    answers.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        print(f"--- case {request.get('case')}", flush=True)
        try:
            outcome = evaluate(request)
        except Exception as error:  # noqa: BLE001 - this module's own evaluation broke: one case
            outcome = {"case": request.get("case"), "status": "error", "error_type": type(error).__name__,
                       "message": traceback.format_exc()[-4000:]}
        answers.write(json.dumps(outcome, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
