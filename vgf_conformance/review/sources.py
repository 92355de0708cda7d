"""Where the goldens of a review come from: a git revision, read with git
itself (``ls-tree`` for the blob ids, one ``cat-file --batch`` for the
texts; nothing is checked out), a golden directory, or the working tree
(untracked goldens included).

Every golden is known by its git blob id, computed the way git does for a
file on disk, so two sides compare by id and only the goldens that differ are
read. Standard library only: the review runs without torch or ExecuTorch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
from pathlib import Path

from vgf_conformance.text import CASE_ID_PATTERN

#: The built-in golden directory, relative to the repository's root.
GOLDEN_SUBDIR = "golden/cases"
#: The pinned stack, relative to the repository's root: the review's stack delta.
LOCK_FILE = "requirements.lock"
SUFFIX = ".json"
#: A git command that takes longer than this is not one the review can wait for.
GIT_TIMEOUT = 120


class ReviewError(ValueError):
    """An argument of the review names nothing it can read."""


def blob_id(data: bytes) -> str:
    """The id git gives a file with this content (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, timeout=GIT_TIMEOUT)
    if done.returncode != 0:
        raise ReviewError(f"git {' '.join(args[:3])} failed in {repo}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def read_blobs(repo: Path, ids: list[str]) -> dict[str, bytes]:
    """The content of each blob id, through one ``git cat-file --batch``."""
    if not ids:
        return {}
    out = _git(repo, "cat-file", "--batch", data="".join(f"{i}\n" for i in ids).encode())
    blobs, at = {}, 0
    for wanted in ids:
        end = out.index(b"\n", at)
        header = out[at:end].decode().split()
        if len(header) != 3 or header[1] != "blob":
            raise ReviewError(f"git cat-file: {wanted} is not a blob ({' '.join(header)})")
        size = int(header[2])
        blobs[wanted] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return blobs


def is_case_file(name: str) -> bool:
    """Whether a file name at the top of a golden directory names a golden
    (``<case id>.json``; the content's ``case`` section is checked on reading)."""
    return name.endswith(SUFFIX) and bool(CASE_ID_PATTERN.fullmatch(name[: -len(SUFFIX)]))


def run_key_of(relative: str) -> str | None:
    """The run key a path in a golden directory names: ``<case id>.json`` at
    its top, or ``<flow>/<case id>.json`` in a flow's folder; None otherwise."""
    parts = relative.split("/")
    if len(parts) > 2 or not is_case_file(parts[-1]) or (len(parts) == 2 and not CASE_ID_PATTERN.fullmatch(parts[0])):
        return None
    return relative[: -len(SUFFIX)]


@dataclasses.dataclass
class Side:
    """One side of a review: its goldens by case id (their blob ids), how
    to read them, and the pinned stack at that side (None: not known)."""

    label: str
    ids: dict[str, str]
    lock: str | None
    repo: Path | None = None
    files: dict[str, Path] = dataclasses.field(default_factory=dict)

    def read(self, case_ids) -> dict[str, str]:
        """The text of each of these goldens."""
        case_ids = list(case_ids)
        if self.files:
            return {c: self.files[c].read_text(encoding="utf-8") for c in case_ids}
        blobs = read_blobs(self.repo, sorted({self.ids[c] for c in case_ids}))
        return {c: blobs[self.ids[c]].decode("utf-8") for c in case_ids}


def repository(start: Path) -> Path:
    """The root of the git repository holding ``start``."""
    try:
        return Path(_git(Path(start), "rev-parse", "--show-toplevel").decode().strip())
    except (ReviewError, FileNotFoundError, NotADirectoryError) as error:
        raise ReviewError(f"--repo: {start} is not inside a git repository ({error}); a revision needs "
                          "one (pass golden directories to compare without git)") from None


def _directory_side(directory: Path, label: str, lock_file: Path | None) -> Side:
    paths = [*directory.glob("*.json"), *directory.glob("*/*.json")]
    files = {key: path for path in sorted(paths)
             if path.is_file() and (key := run_key_of(path.relative_to(directory).as_posix())) is not None}
    lock = lock_file.read_text() if lock_file is not None and lock_file.is_file() else None
    return Side(label, {c: blob_id(p.read_bytes()) for c, p in files.items()}, lock, files=files)


def _revision_side(repo: Path, revision: str, golden_subdir: str, what: str) -> Side:
    done = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
                          capture_output=True, text=True, timeout=GIT_TIMEOUT)
    if done.returncode != 0 or not done.stdout.strip():
        raise ReviewError(f"{what}: {revision!r} is neither a directory nor a revision of the repository at "
                          f"{repo} (expected a git revision such as main, HEAD~1 or a commit id, or a golden "
                          "directory)")
    commit = done.stdout.strip()
    top = f"{golden_subdir.rstrip('/')}/"
    listing = _git(repo, "ls-tree", "-r", commit, "--", top).decode()
    ids = {}
    for line in listing.splitlines():
        meta, name = line.split("\t", 1)
        kind, blob = meta.split()[1:3]
        key = run_key_of(name[len(top):]) if name.startswith(top) else None
        if kind == "blob" and key is not None:
            ids[key] = blob
    lock = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{LOCK_FILE}"], capture_output=True,
                          text=True, timeout=GIT_TIMEOUT)
    return Side(f"{revision} ({commit[:10]})", ids, lock.stdout if lock.returncode == 0 else None, repo=repo)


def resolve(argument: str | None, what: str, repo: Path | None, golden_subdir: str = GOLDEN_SUBDIR) -> Side:
    """The goldens that ``argument`` names. ``what`` names the argument in
    errors (``BASE``, ``HEAD``). A directory holding ``golden_subdir`` is a
    checkout; another directory holds the goldens themselves; anything else
    is a revision of ``repo``. None is the working tree of ``repo``."""
    if argument is None:
        if repo is None:
            raise ReviewError(f"{what}: the working tree needs a git repository (--repo)")
        return _directory_side(repo / golden_subdir, "working tree", repo / LOCK_FILE)
    path = Path(argument)
    if path.is_dir():
        if (path / golden_subdir).is_dir():
            return _directory_side(path / golden_subdir, str(argument), path / LOCK_FILE)
        side = _directory_side(path, str(argument), None)
        if not side.ids:
            raise ReviewError(f"{what}: the directory {argument} holds no goldens (<case id>.json) and no "
                              f"{golden_subdir}/ (expected a golden directory, a checkout, or a revision)")
        return side
    if path.exists():
        raise ReviewError(f"{what}: {argument} is a file; expected a git revision or a golden directory")
    if repo is None:
        raise ReviewError(f"{what}: {argument!r} is not a directory, and there is no git repository to read "
                          "it as a revision in (--repo)")
    return _revision_side(repo, argument, golden_subdir, what)
