"""Directories that appear whole or not at all, and locks that die with their process.

A writer builds a directory beside its destination, under a name that marks it as staging for
that destination, holds an ``flock`` on it while it works, and renames it into place when it
is complete. The kernel releases the lock when its process dies, even by SIGKILL, so a staging
directory that no process holds is a killed writer's, and the next writer removes it.

The export (tf_stopgrad/export.py) and the build backend (its TensorFlow releases and build
directories) use it; standard library only, as the backend loads it before anything is
installed (build_backend/staging.py).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
from pathlib import Path


def lock(path: Path, *, wait: bool) -> int | None:
    """An open descriptor holding an exclusive ``flock`` on ``path`` (a file or directory), or
    None: another process holds it (when not waiting), it is gone or a symbolic link, or the
    file system has no ``flock``. Close the descriptor to release it."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        # Another process may have removed or replaced it while this one waited for the lock.
        if os.path.samestat(os.fstat(descriptor), os.stat(path, follow_symlinks=False)):
            return descriptor
    except OSError:
        pass
    os.close(descriptor)
    return None


def remove_unless_locked(path: Path) -> None:
    """Removes the directory ``path`` unless a live process holds its lock."""
    descriptor = lock(path, wait=False)
    if descriptor is None:
        return
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(descriptor)


def new_staging_directory(destination: Path, purpose: str) -> tuple[Path, int | None]:
    """A new staging directory beside ``destination``, ``.<name>.tf_stopgrad-<purpose>-XXXXXXXX``,
    locked, and the descriptor holding its lock (None where the file system has no ``flock``:
    then no writer ever removes it). Killed writers' staging directories for ``destination``
    are removed first."""
    prefix = f".{destination.name}.tf_stopgrad-{purpose}-"
    staging_name = re.compile(re.escape(prefix) + r"[a-z0-9_]{8}")
    with os.scandir(destination.parent) as entries:
        leftovers = [
            Path(entry.path)
            for entry in entries
            if staging_name.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
        ]
    for leftover in leftovers:
        remove_unless_locked(leftover)
    while True:
        staging = Path(tempfile.mkdtemp(prefix=prefix, dir=destination.parent))
        descriptor = lock(staging, wait=True)
        if descriptor is not None or staging.is_dir():
            return staging, descriptor
        # Another writer took it, not yet locked, for a killed one's and removed it.
