"""Where a run ran: the CPU, the instruction set oneDNN used, the threads.

Calibrated values move slightly with oneDNN's ISA and torch's thread count
(vgf_conformance/goldens/compliance.py compares them within measured bands), so a
report says where it ran, and a diff of two reports says when they ran on
different machines. Standard library only: the xdist controller and the
report tools import this without torch.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

#: oneDNN's CPU ISA levels, lowest first (the names DNNL_MAX_CPU_ISA takes),
#: each with the /proc/cpuinfo flags a CPU needs for it.
ONEDNN_ISAS: list[tuple[str, tuple[str, ...]]] = [
    ("SSE41", ("sse4_1",)),
    ("AVX", ("avx",)),
    ("AVX2", ("avx2", "fma")),
    ("AVX2_VNNI", ("avx2", "avx_vnni")),
    ("AVX512_CORE", ("avx512f", "avx512bw", "avx512vl", "avx512dq")),
    ("AVX512_CORE_VNNI", ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni")),
    ("AVX512_CORE_BF16", ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16")),
    ("AVX512_CORE_AMX", ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16",
                         "amx_tile", "amx_int8", "amx_bf16")),
]


def _cpuinfo() -> tuple[str, set[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), set()
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model or platform.machine(), flags


def onednn_isa(flags: set[str], cap: str | None) -> str:
    """The highest oneDNN ISA level the CPU's flags allow, capped by
    ``DNNL_MAX_CPU_ISA`` (which can only lower it)."""
    names = [name for name, _ in ONEDNN_ISAS]
    best = "unknown"
    for name, needs in ONEDNN_ISAS:
        if all(flag in flags for flag in needs):
            best = name
    if cap and cap.upper() in names and best in names and names.index(cap.upper()) < names.index(best):
        return cap.upper()
    return best


def describe(threads: dict[str, int] | None = None, workers: int | None = None) -> dict:
    """This machine as a report records it: CPU model and cores, oneDNN's ISA
    (and the cap set in the environment), torch threads per worker, and the
    number of xdist workers."""
    model, flags = _cpuinfo()
    cap = os.environ.get("DNNL_MAX_CPU_ISA") or None
    entry = {
        "cpu": model,
        "cores": os.cpu_count(),
        "onednn_isa": onednn_isa(flags, cap),
        "dnnl_max_cpu_isa": cap,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS") or None,
    }
    if threads:
        entry["torch_threads"] = dict(sorted(threads.items()))
    if workers is not None:
        entry["workers"] = workers
    return entry


def line(machine: dict | None) -> str:
    """One line for a report: ``AMD EPYC, 2 cores, oneDNN AVX2 (capped), 1 thread x 2 workers``."""
    if not machine:
        return "unknown machine"
    threads = sorted(set((machine.get("torch_threads") or {}).values()))
    text = (f"{machine.get('cpu')}, {machine.get('cores')} cores, oneDNN {machine.get('onednn_isa')}"
            + (f" (DNNL_MAX_CPU_ISA={machine['dnnl_max_cpu_isa']})" if machine.get("dnnl_max_cpu_isa") else ""))
    if threads:
        text += f", {'/'.join(map(str, threads))} torch thread(s) per worker"
    if machine.get("workers") is not None:
        text += f", {machine['workers']} worker(s)"
    return text


def same_computation(a: dict | None, b: dict | None) -> bool:
    """Whether two runs computed with the same ISA and thread counts (two
    reports that do not say where they ran are taken to be alike, as before
    reports said it; one that does not say is unlike one that does)."""
    if not a and not b:
        return True
    def threads(m: dict) -> list[int]:
        return sorted(set((m.get("torch_threads") or {}).values()))

    return bool(a and b) and a.get("onednn_isa") == b.get("onednn_isa") and threads(a) == threads(b)
