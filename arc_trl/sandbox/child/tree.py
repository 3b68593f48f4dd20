"""Delete a directory tree of any depth: no recursion, no symlink following, bounded file descriptors, never raises.

`shutil.rmtree` of Python 3.11 recurses once per level, so a tree 1000+ levels deep (two lines of model code) makes
it raise `RecursionError`, which `ignore_errors=True` does not cover. Here the walk keeps one directory descriptor
open at a time and climbs back with `..` (safe: nothing else writes to the tree when it is deleted; its session
processes are dead), and a path longer than PATH_MAX is never built.

Imported both by the zygote (as a top-level module) and by the trainer (`arc_trl.sandbox.child.tree`): standard
library only.
"""

from __future__ import annotations

import os

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str) -> bool:
    """Delete `path` (a directory or a file) and everything beneath it. True when nothing is left at `path`."""
    try:
        parent, name = os.path.split(os.path.abspath(path))
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return not os.path.lexists(path)
    try:
        _remove_in(parent_fd, name)
    except Exception:  # noqa: BLE001, S110  best effort: whatever is left is reported by the return value
        pass
    finally:
        os.close(parent_fd)
    return not os.path.lexists(path)


def _remove_in(parent_fd: int, name: str) -> None:
    """Delete entry `name` of the directory open as `parent_fd` (which stays open and is not closed here)."""
    try:
        os.unlink(name, dir_fd=parent_fd)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass  # a directory (EISDIR), or not removable; try it as a directory
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError:
        return
    names = [name]  # the path from parent_fd down to fd
    pending: list[list[str] | None] = [None]  # per level: subdirectories still to visit (None: not listed yet)
    try:
        while names:
            if pending[-1] is None:
                subdirs = []
                with os.scandir(fd) as entries:
                    for entry in entries:
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                subdirs.append(entry.name)
                            else:
                                os.unlink(entry.name, dir_fd=fd)
                        except OSError:
                            pass
                pending[-1] = subdirs
            subdirs = pending[-1]
            if subdirs:
                child = subdirs.pop()
                try:
                    child_fd = os.open(child, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = child_fd
                names.append(child)
                pending.append(None)
                continue
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = up
            done = names.pop()
            pending.pop()
            try:
                os.rmdir(done, dir_fd=fd)
            except OSError:
                pass
    finally:
        os.close(fd)
