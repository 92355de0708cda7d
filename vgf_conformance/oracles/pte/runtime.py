"""The parent side of the runtime child: everything that touches the native
runtime runs in a child process (``python -m vgf_conformance.oracles.pte serve``,
:class:`RuntimeChild`, one per process, kept between requests) with a timeout
per request, so a corrupt program that crashes the runtime becomes a
:class:`PteRuntimeError` naming the signal, not a dead caller, and the next
request gets a fresh child. The child writes each answer to a file (the
runtime logs to stdout).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vgf_conformance import process
from vgf_conformance.oracles.pte.meta import PteMeta
from vgf_conformance.text import tail

#: The module the child runs (``python -m``): :mod:`vgf_conformance.oracles.pte.__main__`.
CHILD_MODULE = "vgf_conformance.oracles.pte"
#: executorch::runtime::Error (runtime/core/error.h), for readable messages:
#: the pybindings report e.g. "Failed to load program, error: 0x:23".
RUNTIME_ERRORS = {
    0x01: "Internal", 0x02: "InvalidState", 0x03: "EndOfMethod", 0x04: "AlreadyLoaded",
    0x10: "NotSupported", 0x11: "NotImplemented", 0x12: "InvalidArgument",
    0x13: "InvalidType", 0x14: "OperatorMissing", 0x15: "RegistrationExceedingMaxKernels",
    0x16: "RegistrationAlreadyRegistered", 0x20: "NotFound", 0x21: "MemoryAllocationFailed",
    0x22: "AccessFailed", 0x23: "InvalidProgram", 0x24: "InvalidExternalData",
    0x25: "OutOfResources", 0x30: "DelegateInvalidCompatibility",
    0x31: "DelegateMemoryAllocationFailed", 0x32: "DelegateInvalidHandle",
}
#: The repository (vgf_conformance/oracles/pte/runtime.py is four levels down),
#: on the child's PYTHONPATH.
_REPO_ROOT = Path(__file__).resolve().parents[3]
#: Program verification on load: "internal" (InternalConsistency: the
#: flatbuffer is verified; a corrupt program is refused) or "minimal" (the
#: runtime's default for ``_load_program``: a corrupt program can crash it).
VERIFICATIONS = {"internal": "InternalConsistency", "minimal": "Minimal"}


class PteRuntimeError(RuntimeError):
    """The runtime refused the program, crashed on it or timed out.

    ``returncode`` is the child's exit status (negative: killed by that
    signal; None: it timed out, or refused the program and lives on), ``log``
    the tail of its output for the request."""

    def __init__(self, message: str, *, returncode: int | None = None, log: str = "") -> None:
        self.returncode = returncode
        self.log = log
        super().__init__(message + (f"\n--- runtime log tail ---\n{log}" if log else ""))


def _name_error_codes(message: str) -> str:
    """Append the runtime's name for an "error: 0x:23"-style code."""

    def named(match: "re.Match[str]") -> str:
        name = RUNTIME_ERRORS.get(int(match.group(1), 16))
        return f"{match.group(0)} ({name})" if name else match.group(0)

    return re.sub(r"error: 0x:?([0-9a-fA-F]+)", named, message)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(_REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    # One program at a time, on a machine whose cores are shared.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


class RuntimeChild:
    """One long-lived runtime child (``python -m vgf_conformance.oracles.pte
    serve``, a :class:`vgf_conformance.process.ServedChild`) answering
    requests one at a time: the imports (torch, the pybindings,
    ``executorch.exir``: seconds) are paid once per process (one child per
    xdist worker), not once per program.

    A request that crashes the child or outlives its timeout fails alone: the
    child's process group is killed or found dead, the request raises
    :class:`PteRuntimeError` with the tail of the child's log of that request,
    and the next request starts a fresh child."""

    #: Seconds the child may take to start (imports), besides a request's timeout.
    START_TIMEOUT = 180.0

    def __init__(self) -> None:
        self.child: process.ServedChild | None = None
        self.starts = 0  # children started (a restart after a crash or timeout counts)

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child is not None else None

    def peak_rss_mib(self) -> float | None:
        """The live child's resident-set high-water mark (VmHWM), in MiB: a
        child not yet waited for is not in this process's RUSAGE_CHILDREN."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text() if self.pid else ""
        except OSError:
            return None
        kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)
        return None if kib is None else round(kib / 1024, 1)

    def _served(self, what: str, call):
        try:
            return call()
        except process.ChildFailed as lost:
            self.close()
            raise PteRuntimeError(f"{what}: the runtime child {lost.reason}", returncode=lost.returncode,
                                  log=lost.log) from None

    def request(self, request: dict[str, Any], *, timeout: float, what: str) -> str:
        """Send ``request`` (its answer goes to ``request["out"]``); returns the
        child's log of it. Raises PteRuntimeError on a crash or a timeout."""
        if self.pid is None:
            self.close()
            self.child = process.ServedChild([sys.executable, "-m", CHILD_MODULE, "serve"], env=_child_env())
            self.starts += 1
            self._served(f"{what}: starting the runtime child", lambda: self.child.wait_ready(self.START_TIMEOUT))
        offset = self.child.log_size()
        self._served(what, lambda: self.child.request(request, timeout))
        return self.child.log_since(offset)

    def close(self, graceful: bool = True) -> None:
        """Stop the child: end of its input, then a kill after 10 s; or, not
        ``graceful`` (at exit: an idle child holds nothing to save), a kill
        at once, instead of waiting seconds for its interpreter to unload
        torch at the end of every worker."""
        if self.child is not None:
            self.child.close(graceful, wait=10.0)
            self.child = None


#: This process's runtime child (one per xdist worker), started on first use.
CHILD = RuntimeChild()
atexit.register(CHILD.close, graceful=False)


def _call(command: str, pte_path: Path, workdir: Path, extra: dict[str, Any], *,
          timeout: float, what: str) -> dict[str, Any]:
    answer = workdir / "answer.json"
    log = CHILD.request({"command": command, "pte": str(pte_path), "out": str(answer), **extra},
                        timeout=timeout, what=what)
    if not answer.exists():
        raise PteRuntimeError(f"{what}: the runtime child gave no answer", log=log)
    data = json.loads(answer.read_text())
    error = data.get("error")
    if error:
        message = f"{what}: {error['type']}: {_name_error_codes(error['message'])}"
        if error.get("kind") == "input":
            raise ValueError(message)
        if not error["type"] == "RuntimeError":  # a bug here rather than a refusal
            log = "\n".join(filter(None, [log, tail(error.get("traceback", ""), lines=process.LOG_TAIL_LINES)]))
        raise PteRuntimeError(message, log=log)
    return data


def _program_path(pte_path: str | Path, verification: str) -> Path:
    """``pte_path`` as a Path, once the arguments are known to be good."""
    if verification not in VERIFICATIONS:
        raise ValueError(f"verification must be one of {sorted(VERIFICATIONS)}, got {verification!r}")
    path = Path(pte_path)
    if not path.is_file():
        raise FileNotFoundError(f"no program at {path}")
    return path


def load_pte_meta(pte_path: str | Path, timeout: float = 60, *,
                  verification: str = "internal") -> PteMeta:
    """Load ``pte_path`` with the ExecuTorch runtime in a child process and
    describe its ``forward`` method (see :class:`PteMeta`). Raises
    :class:`PteRuntimeError` when the runtime refuses the program, crashes on
    it, or takes longer than ``timeout`` seconds."""
    path = _program_path(pte_path, verification)
    with tempfile.TemporaryDirectory(prefix="pte-meta-") as tmp:
        data = _call("meta", path, Path(tmp), {"verification": verification},
                     timeout=timeout, what=f"loading {path}")
    return PteMeta.from_dict(data["meta"])


def run_cpu_program(
    pte_path: str | Path, inputs: Sequence[np.ndarray], timeout: float = 60, *,
    verification: str = "internal",
) -> list[np.ndarray]:
    """Execute ``forward`` of ``pte_path`` on ``inputs`` in a child process.

    ``inputs`` are logical arrays (indexed as in PyTorch, e.g. NCHW) of the
    program's dtypes and sizes; each is laid out in memory per the program's
    dim order before it is handed to the runtime. Returns the outputs as
    logical, C-contiguous arrays. For programs without delegates, or whose
    delegates' backends the installed runtime registers; anything else raises
    :class:`PteRuntimeError` before executing. Inputs of the wrong count,
    dtype or sizes raise ``ValueError``.
    """
    path = _program_path(pte_path, verification)
    with tempfile.TemporaryDirectory(prefix="pte-run-") as tmp:
        workdir = Path(tmp)
        names = []
        for i, array in enumerate(inputs):
            name = workdir / f"input{i}.npy"
            np.save(name, np.asarray(array), allow_pickle=False)
            names.append(str(name))
        data = _call("run", path, workdir, {"verification": verification, "inputs": names},
                     timeout=timeout, what=f"running {path}")
        return [np.load(p, allow_pickle=False) for p in data["outputs"]]


def execute_program(
    pte_path: str | Path, inputs: Sequence[np.ndarray], artifacts_root: str | Path,
    timeout: float = 300,
) -> list[np.ndarray]:
    """Execute ``forward`` of ``pte_path`` from its serialized plan, delegates
    included (:mod:`vgf_conformance.oracles.pte.execute`), in the runtime child.

    ``inputs`` and the outputs are logical arrays, as for
    :func:`run_cpu_program`; ``artifacts_root`` is the export's folder (its
    ``delegates/NN_vgf.tosa`` run the VGF payloads). Raises
    :class:`PteRuntimeError` when the plan cannot be executed (naming the
    instruction), the child crashes or the run takes longer than ``timeout``."""
    path = _program_path(pte_path, "internal")
    with tempfile.TemporaryDirectory(prefix="pte-execute-") as tmp:
        workdir = Path(tmp)
        names = []
        for i, array in enumerate(inputs):
            name = workdir / f"input{i}.npy"
            np.save(name, np.asarray(array), allow_pickle=False)
            names.append(str(name))
        data = _call("execute", path, workdir, {"inputs": names, "artifacts": str(artifacts_root)},
                     timeout=timeout, what=f"executing {path}")
        return [np.load(p, allow_pickle=False) for p in data["outputs"]]
