"""Layer 4 of the confinement (see `guard`): a Python audit hook (PEP 578).

It refuses imports outside the standard library and the allowed packages, file access outside the allowed
directories, network, processes, ctypes and a few more, with clear error messages (`SandboxRefused`,
`SandboxImportRefused`). Determined code can bypass audit hooks; the kernel layers do not depend on it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any


class SandboxRefused(PermissionError):
    """Raised inside model code when the sandbox refuses an operation (file, network, process, ...)."""


SandboxRefused.__module__ = "builtins"  # tracebacks show `SandboxRefused: ...`


class SandboxImportRefused(ModuleNotFoundError):
    """Raised inside model code when an import is not allowed (an ImportError, so `except ImportError` works)."""


SandboxImportRefused.__module__ = "builtins"  # tracebacks show `SandboxImportRefused: ...`


# stdlib modules that give network, process, native-memory or sub-interpreter access
DENIED_MODULES = frozenset({
    "ctypes", "_ctypes", "socket", "_socket", "ssl", "_ssl", "subprocess", "_posixsubprocess", "multiprocessing",
    "_multiprocessing", "_posixshmem", "pty", "_xxsubinterpreters", "_xxinterpchannels", "_testcapi",
    "_testinternalcapi", "_testbuffer", "_testmultiphase", "_ctypes_test", "_testimportmultiple", "_testclinic",
    "faulthandler", "resource", "readline", "_tkinter", "tkinter",
    "idlelib", "ensurepip", "venv", "webbrowser", "_sqlite3", "sqlite3", "dbm", "_dbm", "_gdbm", "_curses",
    "curses",
})

_REFUSED_EVENT_PREFIXES = ("socket.", "ssl.", "ctypes.", "subprocess.", "sqlite3.", "ftplib.", "http.client.",
                           "smtplib.", "imaplib.", "poplib.", "nntplib.", "telnetlib.", "urllib.", "webbrowser.",
                           "winreg.", "_winapi.", "msvcrt.")
_REFUSED_EVENTS = {
    "os.system": "running shell commands", "os.exec": "starting programs", "os.posix_spawn": "starting programs",
    "os.spawn": "starting programs", "os.fork": "creating processes", "os.forkpty": "creating processes",
    "os.killpg": "signalling other processes", "os.startfile": "starting programs", "pty.spawn": "starting programs",
    "resource.setrlimit": "changing resource limits", "resource.prlimit": "changing resource limits",
    "os.symlink": "creating links", "os.link": "creating links", "code.__new__": "building code objects",
    "os.chroot": "changing the root directory", "os.mknod": "creating device files", "os.chown": "changing owners",
    "os.setxattr": "changing file attributes", "os.removexattr": "changing file attributes",
    "sys._current_frames": "inspecting other threads",
}
# events whose first argument is a path that must lie inside the working directory (write-like)
_PATH_WRITE_EVENTS = frozenset({"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.utime", "os.truncate",
                                "os.chflags", "os.lchflags", "os.lchmod", "shutil.rmtree", "os.mkfifo"})
# events whose first argument is a path that may lie in a readable directory, with what they do
_PATH_READ_EVENTS = {"os.listdir": "listing directories", "os.scandir": "listing directories",
                     "glob.glob": "listing directories", "glob.glob/2": "listing directories",
                     "os.chdir": "changing directory", "os.getxattr": "reading file attributes",
                     "os.listxattr": "reading file attributes"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def install_audit_hook(work_dir: str, read_roots: Iterable[str], read_excluded: Iterable[str],
                       allowed_packages: Iterable[str], device_files: Iterable[str]) -> None:
    """Install the policy hook. Everything it uses is bound now, so rebinding module attributes cannot change it."""
    work = work_dir.rstrip("/")
    roots = tuple(r.rstrip("/") for r in read_roots)
    excluded = tuple(r.rstrip("/") for r in read_excluded)
    devices = frozenset(device_files)
    allowed_top = frozenset(allowed_packages) | frozenset(sys.stdlib_module_names)
    loaded = frozenset(sys.modules)
    denied = DENIED_MODULES
    getcwd, getpid, fspath, fsdecode = os.getcwd, os.getpid, os.fspath, os.fsdecode
    join = "".join
    _str, _bytes, _int, _isinstance, _type = str, bytes, int, isinstance, type
    refused_events, refused_prefixes = dict(_REFUSED_EVENTS), _REFUSED_EVENT_PREFIXES
    write_events, read_events = _PATH_WRITE_EVENTS, dict(_PATH_READ_EVENTS)
    write_flags = _WRITE_FLAGS
    Refused, ImportRefused = SandboxRefused, SandboxImportRefused

    def absolute(path: Any) -> str | None:
        """Absolute normalised form of a path argument (None when it is not a path: file descriptors)."""
        if path is None:
            path = "."
        if _isinstance(path, _int):
            return None
        if _type(path) is not _str and _type(path) is not _bytes:
            path = fspath(path)
        if _isinstance(path, _bytes):
            path = fsdecode(path)
        path = join([path])  # an exact str even for str subclasses
        if "\x00" in path:
            raise Refused("sandbox: invalid path")
        if not path.startswith("/"):
            path = getcwd() + "/" + path
        parts: list[str] = []
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(part)
        return "/" + "/".join(parts)

    def inside(path: str, root: str) -> bool:
        return path == root or path.startswith(root + "/")

    def readable(path: str) -> bool:
        if inside(path, work) or path in devices:
            return True
        for root in roots:
            if inside(path, root):
                for ex in excluded:
                    if inside(path, ex):
                        return False
                return True
        return False

    def refuse_path(path: str, what: str) -> None:
        raise Refused(f"sandbox: {what} outside the working directory is not allowed: {path}")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path = absolute(args[0])
            if path is None:
                return
            mode, flags = args[1], args[2]
            writing = (_isinstance(flags, _int) and flags & write_flags) or (
                _isinstance(mode, _str) and ("w" in mode or "a" in mode or "+" in mode or "x" in mode))
            if writing:
                if not (inside(path, work) or path in devices):
                    refuse_path(path, "writing files")
            elif not readable(path):
                refuse_path(path, "reading files")
            return
        if event == "import":
            name = args[0]
            if not _isinstance(name, _str):
                return
            top = name.partition(".")[0]
            if name in denied or top in denied:
                raise ImportRefused(f"sandbox: import of {name!r} is not allowed", name=name)
            if top not in allowed_top and top not in loaded:
                raise ImportRefused(
                    f"sandbox: module {name!r} is not available (only numpy and the standard library are)", name=name)
            return
        if event in refused_events:
            raise Refused(f"sandbox: {refused_events[event]} is not allowed ({event})")
        if event == "os.kill":
            if args[0] != getpid():
                raise Refused("sandbox: signalling other processes is not allowed (os.kill)")
            return
        if event.startswith(refused_prefixes):
            kind = "network access" if event.startswith(("socket.", "ssl.", "http.", "urllib.")) else "this operation"
            raise Refused(f"sandbox: {kind} is not allowed ({event})")
        if event in write_events:
            path = absolute(args[0])
            if path is not None and not inside(path, work):
                refuse_path(path, "modifying files")
            return
        if event == "os.rename":
            for p in args[:2]:
                path = absolute(p)
                if path is not None and not inside(path, work):
                    refuse_path(path, "moving files")
            return
        if event in read_events:
            path = absolute(args[0]) if args else None
            if path is not None and not readable(path):
                refuse_path(path, read_events[event])
            return

    sys.addaudithook(hook)
