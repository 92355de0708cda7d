"""``python -m vgf_conformance.oracles.pte meta|run PTE --out ANSWER.json ...``:
the runtime child (:mod:`vgf_conformance.oracles.pte.child`)."""

from vgf_conformance.oracles.pte.child import main

raise SystemExit(main())
