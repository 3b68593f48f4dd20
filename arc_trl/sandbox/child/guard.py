"""Confinement of a sandbox child, installed once after fork and before any model code runs.

Layers, strongest first (docs/sandbox.md says exactly what each one guarantees):

1. `set_limits`: setrlimit caps on address space, CPU seconds of the whole session, file size, open files, core dumps,
   nice / real-time priority and (for non-root users) processes. `isolate_work_dir`: the working directory is a
   private tmpfs limited in bytes and files, in a mount + SysV IPC namespace of the session alone.
   `drop_capabilities`: a root trainer's child keeps uid 0 but no capability.
2. `install_landlock` (Linux >= 5.13 with Landlock enabled): the kernel refuses file access outside the session's
   working directory and the read-only Python/numpy code directories, TCP bind/connect (ABI >= 4), and signals to
   processes outside the sandbox (ABI >= 6).
3. `syscall_filter.install_seccomp` (x86-64 only): the kernel refuses socket creation, fork/exec (threads only when
   allowed), signals to other processes, ptrace/process_vm_*, raising resource limits, io_uring, bpf, mount and
   friends, scheduling/priority changes of other processes, setting the clock, SysV IPC / POSIX message queues and the
   immutable-file ioctls.
4. `audit_hook.install_audit_hook`: a Python audit hook (PEP 578) that refuses imports outside the standard library
   and the allowed packages, file access outside the allowed directories, network, processes, ctypes and a few more.
   It gives clear error messages, but determined code can bypass audit hooks; layers 1-3 do not depend on it.

Layers 1 and 2 are here, with `prctl` and the `libc` handle the others share. Every installer returns what it achieved
so the trainer can report it; none raises when a layer is unavailable.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Iterable
from typing import Any

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.restype = ctypes.c_int

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38


def prctl(option: int, arg: int = 0) -> int:
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0))


# --------------------------------------------------------------------------------------------------------------------
# 1. resource limits


def set_limits(memory_mb: int, session_cpu_s: int, max_file_mb: int, max_open_files: int, no_new_tasks: bool) -> dict:
    """Apply hard setrlimit caps (soft == hard, so they cannot be raised again without privileges)."""
    applied = {}

    def cap(name: str, value: int) -> None:
        limit = getattr(resource, name)
        try:
            resource.setrlimit(limit, (value, value))
            applied[name] = value
        except (ValueError, OSError):
            pass

    cap("RLIMIT_AS", memory_mb * 1024 * 1024)
    cap("RLIMIT_CPU", session_cpu_s)
    cap("RLIMIT_FSIZE", max_file_mb * 1024 * 1024)
    cap("RLIMIT_NOFILE", max_open_files)
    cap("RLIMIT_CORE", 0)
    cap("RLIMIT_NICE", 0)  # no lower nice value (raising one's own nice value stays allowed)
    cap("RLIMIT_RTPRIO", 0)  # no real-time scheduling
    if no_new_tasks:
        cap("RLIMIT_NPROC", 0)  # no fork and no thread for non-root users (root ignores RLIMIT_NPROC)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past RLIMIT_FSIZE fail with EFBIG instead of killing
    return applied


# --------------------------------------------------------------------------------------------------------------------
# 1b. private namespaces: a size- and inode-limited tmpfs as working directory, a private SysV IPC namespace

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _unshare(flags: int) -> bool:
    return libc.unshare(ctypes.c_int(flags)) == 0


def _enter_user_namespace(flags: int) -> bool:
    """Non-root: a user namespace (mapping our own uid/gid only) gives the right to mount in the new mount namespace."""
    uid, gid = os.geteuid(), os.getegid()
    if not _unshare(CLONE_NEWUSER | flags):
        return False
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError:
        return False
    return True


def isolate_work_dir(work_dir: str, disk_mb: int, max_files: int) -> dict[str, Any]:
    """Mount a private tmpfs (`disk_mb` MB, `max_files` files and folders) over `work_dir`, in a mount and IPC
    namespace of this process alone.

    Its content is memory, freed by the kernel when the session's last process ends, so no file tree is ever
    deleted by hand. Root unshares directly; other users through a user namespace where the kernel allows it.
    Returns {"disk_quota": bool, "ipc_namespace": bool}; both False when the kernel refused (nothing changed then,
    or only private namespaces without a mount: harmless).
    """
    flags = CLONE_NEWNS | CLONE_NEWIPC
    done = {"disk_quota": False, "ipc_namespace": False}
    if not ((os.geteuid() == 0 and _unshare(flags)) or _enter_user_namespace(flags)):
        return done
    done["ipc_namespace"] = True
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:  # nothing propagates to the host
        return done
    options = f"size={int(disk_mb)}m,nr_inodes={int(max_files) + 1},mode=0700".encode()  # + 1: the root folder
    if libc.mount(b"tmpfs", os.fsencode(work_dir), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options) != 0:
        return done
    done["disk_quota"] = True
    return done


# --------------------------------------------------------------------------------------------------------------------
# 1c. capabilities (the trainer often runs as root in containers)

_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> str:
    """Drop every capability (bounding, ambient, effective, permitted, inheritable).

    Root keeps its uid (the venv often lives under /root) but loses what makes it root: setting the clock,
    real-time scheduling or lower nice values, immutable files, reading files it does not own without permission.
    Returns "dropped", or "none" when there was nothing to drop (non-root), or "failed".
    """
    for cap in range(64):
        libc.prctl(ctypes.c_int(_PR_CAPBSET_DROP), ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0))  # EINVAL past the last capability, EPERM without CAP_SETPCAP: both fine
    libc.prctl(ctypes.c_int(_PR_CAP_AMBIENT), ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0),
               ctypes.c_ulong(0), ctypes.c_ulong(0))
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), ctypes.byref(data)) != 0:
        return "failed"
    had_any = any(d.effective or d.permitted for d in data)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        return "failed"
    return "dropped" if had_any else "none"


# --------------------------------------------------------------------------------------------------------------------
# 2. Landlock

_SYS_LANDLOCK_CREATE_RULESET = 444  # same number on every architecture
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 14, 1 << 15
_FILE_ONLY_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel (0 when unavailable)."""
    version = libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def install_landlock(read_paths: Iterable[str], write_dirs: Iterable[str], device_files: Iterable[str]) -> int:
    """Restrict this process to reading `read_paths`, full access beneath `write_dirs`, read/write of `device_files`.

    Returns the ABI version enforced, or 0 when Landlock is unavailable (nothing is enforced then).
    """
    abi = landlock_abi()
    if abi < 1:
        return 0
    fs_all = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        fs_all |= 1 << 13  # REFER
    if abi >= 3:
        fs_all |= _FS_TRUNCATE
    if abi >= 5:
        fs_all |= _FS_IOCTL_DEV
    attr = _RulesetAttr(fs_all, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)  # net: bind+connect TCP; scope
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    try:
        read_rights = _FS_READ_FILE | _FS_READ_DIR | _FS_EXECUTE
        rules = [(p, read_rights) for p in read_paths] + [(p, fs_all) for p in write_dirs]
        rules += [(p, _FS_READ_FILE | _FS_WRITE_FILE) for p in device_files]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_ONLY_RIGHTS
                rule = _PathBeneathAttr(rights & fs_all, fd)
                libc.syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                             ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        if libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return 0
        return abi
    finally:
        os.close(ruleset)
