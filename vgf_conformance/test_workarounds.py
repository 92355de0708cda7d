"""The workaround ledger, checked on the installed ExecuTorch.

For each workaround of :mod:`vgf_export.names` (and each Arm backend
patch of :mod:`vgf_export.patches`), export its probe cases with and without
it: it is still needed when a probe fails or changes without it. A
workaround that makes no difference fails here and is listed in the report
as unnecessary on this version.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vgf_conformance.cases import CASES
from vgf_conformance.goldens import golden_tosa, pte_section
from vgf_conformance.tosa.reader import summarize_tosa
from vgf_conformance.harness.plugin.recording import record_workaround
from vgf_export import ExportStageError, export_model
from vgf_export.patches import installed_executorch_version, registered_patches
from vgf_export.names import WORKAROUNDS

REPO = Path(__file__).resolve().parent.parent
#: Hash seeds for the partition-order probe, tried in this order until two
#: export differently (0 and 3 do on 1.5.1: two exports; all four when none do).
HASH_SEEDS = (0, 3, 1, 2)


def _outcome(case_id: str, root: Path, disabled: tuple[str, ...]) -> str:
    """What the export of a case amounts to: its failure stage, or its
    delegates and CPU ops (Q/DQ left out) and which IO it quantized."""
    case = CASES[case_id]
    try:
        result = export_model(case.model(), case.make_inputs(), artifacts_root=root,
                              disable_workarounds=disabled, **case.export_kwargs())
    except ExportStageError as error:
        return f"fails at {error.stage}: {type(error.cause).__name__}"
    compute = lambda ops: [op for op in ops if "quantized_decomposed" not in op]  # noqa: E731
    delegates = [f"{d.backend}{compute(d.ops)}" for d in result.report.delegates]
    io = {side: len(v) for side, v in result.io_quant_params.items()}
    layouts = pte_section(result.artifacts.program.read_bytes(), result.edge_program)
    tosa = [golden_tosa(summarize_tosa(f.path.read_bytes()))["ops"]
            for f in result.artifacts.delegate_files("tosa")]
    return (f"delegates {delegates}, cpu {compute(result.report.cpu_ops)}, quantized io {io}, "
            f"pte layout mismatches {layouts['output_layout_mismatches']}, tosa {tosa}")


#: Workarounds with a test of their own below.
_OWN_TEST = ("partition-order", "grid-sampler-routing")


@pytest.mark.parametrize("name", sorted(n for n in WORKAROUNDS if n not in _OWN_TEST))
def test_workaround_still_needed(name, tmp_path, request):
    workaround = WORKAROUNDS[name]
    evidence = []
    for probe in workaround.probes:
        with_it = _outcome(probe, tmp_path / f"{probe}-with", ())
        without = _outcome(probe, tmp_path / f"{probe}-without", (name,))
        if with_it != without:
            evidence.append(f"{probe}: with it {with_it}; without it {without}")
    record_workaround(request, name, bool(evidence), evidence, workaround.upstream)
    assert evidence, (
        f"workaround {name!r} is no longer needed on executorch {installed_executorch_version()}: "
        f"its probes {list(workaround.probes)} export the same without it. "
        f"Consider removing it ({workaround.upstream})."
    )


def test_grid_sampler_routing_still_needed(tmp_path, request):
    """Does ExecuTorch's own grid-sampler lowering still fail, or do worse, on
    the ledger's probes? (``python -m vgf_conformance native``: each probe exported
    the upstream way in a worker child, run on Vulkan, compared with the
    project's path on the same references.)"""
    from vgf_conformance.native.__main__ import main
    from vgf_conformance.native.report import routing_evidence

    workaround = WORKAROUNDS["grid-sampler-routing"]
    out = tmp_path / "native"
    assert main(["--cases", *workaround.probes, "--out", str(out), "--glslc", "with"]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    shown = set(routing_evidence(rows))
    evidence = [f"{r['case']}: upstream path {r['outcome']}"
                + (f" at {r['stage']}: {r['error']}" if r.get("error") else "")
                + (f", {r['upstream_vs_float']} LSB vs float (project {r['project_vs_float']})"
                   if r["upstream_vs_float"] is not None else "")
                for r in rows if r["case"] in shown]
    record_workaround(request, "grid-sampler-routing", bool(evidence), evidence, workaround.upstream)
    assert evidence, (
        f"workaround 'grid-sampler-routing' may no longer be needed on executorch "
        f"{installed_executorch_version()}: ExecuTorch's own lowering runs {list(workaround.probes)} "
        f"on Vulkan repeatably and no worse than the project's path; run python -m vgf_conformance native "
        f"over every grid_sample case before removing it ({workaround.upstream})."
    )


_EXPORT_GOLDEN = textwrap.dedent("""
    import sys, tempfile
    from pathlib import Path
    from vgf_conformance.cases import CASES
    from vgf_conformance.goldens import serialize
    from vgf_conformance.harness.execution.runner import run_case
    run = run_case(CASES[sys.argv[1]], Path(tempfile.mkdtemp()), disable_workarounds=sys.argv[2:])
    # A failed export is an outcome too (it differs from one that succeeds).
    print(serialize(run.golden) if run.golden is not None else run.failure.describe())
""")


def test_partition_order_still_needed(tmp_path, request):
    """Without sorted tags, does the export follow PYTHONHASHSEED?"""
    workaround = WORKAROUNDS["partition-order"]
    evidence = []
    for probe in workaround.probes:
        goldens: dict[int, str] = {}
        for seed in HASH_SEEDS:
            if len(set(goldens.values())) > 1:
                break  # it follows the hash seed: the other seeds cannot change that
            env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(REPO)}
            proc = subprocess.run(
                [sys.executable, "-c", _EXPORT_GOLDEN, probe, "partition-order"],
                capture_output=True, text=True, env=env, timeout=600,
            )
            assert proc.returncode == 0, (
                f"the partition-order probe {probe} crashed under PYTHONHASHSEED={seed} "
                f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}")
            goldens[seed] = proc.stdout
        if len(set(goldens.values())) > 1:
            evidence.append(f"{probe}: {len(set(goldens.values()))} different goldens over "
                            f"PYTHONHASHSEED {list(goldens)}")
    record_workaround(request, "partition-order", bool(evidence), evidence, workaround.upstream)
    assert evidence, (
        f"workaround 'partition-order' is no longer needed on executorch "
        f"{installed_executorch_version()}: {list(workaround.probes)} export identically "
        f"under PYTHONHASHSEED {list(HASH_SEEDS)}"
    )


#: The converter's bound under the patch in the probe (seconds), and how long
#: after the converter started an export still running is taken for a hang.
CONVERTER_BOUND, HANG_EVIDENCE = 2, 6

_HANGING_EXPORT = textwrap.dedent("""
    import sys, tempfile
    from pathlib import Path
    import torch
    from vgf_conformance.cases.op_models import Resize
    from vgf_export import export_model, patches
    patches.disable_patch(sys.argv[1])
    export_model(Resize(scale_factor=0.5, align_corners=False), (torch.rand(1, 4, 8, 8),),
                 artifacts_root=Path(tempfile.mkdtemp()) / "a", enable_pt2e_quantization=False)
""")


@pytest.mark.parametrize("patch", [p for p in registered_patches() if p.name == "model-converter-timeout"],
                         ids=lambda p: p.name)
def test_converter_timeout_patch_still_needed(patch, tmp_path, request):
    """Without the patch, a hanging model-converter hangs the export."""
    if not patch.is_needed(installed_executorch_version()):
        record_workaround(request, patch.name, False, ["not applied on this version"], patch.upstream)
        pytest.fail(f"patch {patch.name} does not apply to executorch {installed_executorch_version()}")
    fake = tmp_path / "model-converter"
    started = tmp_path / "converter-started"
    fake.write_text(f"#!/bin/sh\ntouch '{started}'\nsleep 600\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "MODEL_CONVERTER_PATH": str(fake), "PYTHONPATH": str(REPO),
           "VGF_EXPORT_CONVERTER_TIMEOUT": str(CONVERTER_BOUND)}
    # Its own process group, so the hanging converter dies with it.
    child = subprocess.Popen([sys.executable, "-c", _HANGING_EXPORT, patch.name], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        # The export reaches the converter after its imports and lowering (about
        # 10 s); from then on the patch's bound is 2 s: 3x that more is a hang.
        deadline = time.monotonic() + 180
        while not started.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started.exists(), "the export never started model-converter: the test's export broke"
        child.wait(timeout=HANG_EVIDENCE)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    evidence = ([f"without it, an export with a hanging model-converter had not ended {HANG_EVIDENCE:g} s "
                 f"after the converter started (the patch's bound: {CONVERTER_BOUND:g} s)"] if hung else [])
    record_workaround(request, patch.name, hung, evidence, patch.upstream)
    assert hung, (f"patch {patch.name}: executorch {installed_executorch_version()} bounds "
                  "model-converter itself now; the patch may be unnecessary")
