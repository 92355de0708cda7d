"""``python -m conformance.oracles.pte meta|run PTE --out ANSWER.json ...``:
the runtime child (:mod:`conformance.oracles.pte.child`)."""

from conformance.oracles.pte.child import main

raise SystemExit(main())
