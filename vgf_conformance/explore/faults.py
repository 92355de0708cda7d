"""Planted faults, for testing the explorer itself (``VGF_EXPLORE_FAULT``).

The draw child reads the environment variable ``VGF_EXPLORE_FAULT``: a
comma-separated list of ``name[:value]``. Each fault acts only on the draws
its condition selects; the rest of the flow is the real one.

``shift-bilinear-wide[:W]`` (W=5)
    every bilinear resize (either align_corners) whose output width is more
    than W: each VGF delegate's outputs, as the TOSA reference model returns
    them, are shifted by +3 int8 steps (+3*258 int16 steps, +3/127 in float),
    as ``tests/test_faults.py`` shifts a delegate. The suite's numerics checks
    then fail (``vs_fake_quant`` first: 3 LSB > its 1 LSB bound).
``hang-channels[:C]`` (C=3)
    a draw whose image has C channels sleeps forever before its export (the
    explorer's draw timeout kills it). It first prints :data:`HANG_LINE` to the
    child's log, so a test can tell this hang from a draw that was merely slow.
``crash-channels[:C]`` (C=2)
    a draw whose image has C channels aborts (SIGABRT) before its export.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time

ENV = "VGF_EXPLORE_FAULT"

#: name -> default value.
FAULTS = {"shift-bilinear-wide": 5, "hang-channels": 3, "crash-channels": 2}

#: The shift of ``shift-bilinear-wide``, in int8 steps.
SHIFT_STEPS = 3

#: What a draw that ``hang-channels`` hangs prints (to the draw child's log) before it hangs.
HANG_LINE = f"{ENV}: hang-channels: this draw hangs"


def parse(text: str | None) -> dict[str, int]:
    """``"shift-bilinear-wide:5,hang-channels"`` -> {name: value}."""
    faults = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        name, _, value = item.partition(":")
        if name not in FAULTS:
            raise ValueError(f"{ENV}: unknown fault {name!r}; known: {sorted(FAULTS)}")
        try:
            faults[name] = int(value) if value else FAULTS[name]
        except ValueError:
            raise ValueError(f"{ENV}: {name} takes an integer, got {value!r}") from None
    return faults


def active() -> dict[str, int]:
    return parse(os.environ.get(ENV))


def _channels(family: str, params: dict) -> int:
    return params["channels"]


def before_export(family: str, params: dict) -> None:
    """Hang or crash, if a fault says so for this draw."""
    faults = active()
    if faults.get("crash-channels") == _channels(family, params):
        os.abort()
    if faults.get("hang-channels") == _channels(family, params):
        print(HANG_LINE, flush=True)
        while True:
            time.sleep(3600)


def _shifted_wide(family: str, params: dict) -> bool:
    from vgf_conformance.explore.space import output_hw

    width = active().get("shift-bilinear-wide")
    return (width is not None and family == "resize" and params["mode"].startswith("bilinear")
            and output_hw(params)[1] > width)


@contextlib.contextmanager
def during_run(family: str, params: dict):
    """While the case runs: shift the delegates' outputs if a fault says so."""
    if not _shifted_wide(family, params):
        yield
        return
    import numpy as np

    from vgf_conformance.oracles import delegates

    real = delegates.run_tosa_in_child_ex

    def shifted(flatbuffer, inputs, timeout, **options):
        result = real(flatbuffer, inputs, timeout, **options)
        outputs = []
        for o in result.outputs:
            if np.issubdtype(o.dtype, np.integer):
                info = np.iinfo(o.dtype)
                step = SHIFT_STEPS * (1 if info.bits <= 8 else 258)
                o = np.clip(o.astype(np.int64) + step, info.min, info.max).astype(o.dtype)
            else:
                o = o + np.asarray(SHIFT_STEPS / 127.0, dtype=o.dtype)
            outputs.append(o)
        return dataclasses.replace(result, outputs=outputs)

    delegates.run_tosa_in_child_ex = shifted
    try:
        yield
    finally:
        delegates.run_tosa_in_child_ex = real
