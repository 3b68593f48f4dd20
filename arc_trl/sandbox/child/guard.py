"""Confinement of a sandbox child, installed once after fork and before any model code runs.

Layers, strongest first (docs/sandbox.md says exactly what each one guarantees):

1. `set_limits`: setrlimit caps on address space, CPU seconds of the whole session, file size, open files, core dumps,
   nice / real-time priority and (for non-root users) processes. `isolate_work_dir`: the working directory is a
   private tmpfs limited in bytes and files, in a mount + SysV IPC namespace of the session alone.
   `drop_capabilities`: a root trainer's child keeps uid 0 but no capability.
2. `install_landlock` (Linux >= 5.13 with Landlock enabled): the kernel refuses file access outside the session's
   working directory and the read-only Python/numpy code directories, TCP bind/connect (ABI >= 4), and signals to
   processes outside the sandbox (ABI >= 6).
3. `install_seccomp` (x86-64 only): the kernel refuses socket creation, fork/exec (threads only when allowed),
   signals to other processes, ptrace/process_vm_*, raising resource limits, io_uring, bpf, mount and friends,
   scheduling/priority changes of other processes, setting the clock, SysV IPC / POSIX message queues and the
   immutable-file ioctls.
4. `install_audit_hook`: a Python audit hook (PEP 578) that refuses imports outside the standard library and the
   allowed packages, file access outside the allowed directories, network, processes, ctypes and a few more.
   It gives clear error messages, but determined code can bypass audit hooks; layers 1-3 do not depend on it.

Every installer returns what it achieved so the trainer can report it; none raises when a layer is unavailable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import sys
from collections.abc import Iterable
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def prctl(option: int, arg: int = 0) -> int:
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                       ctypes.c_ulong(0))


class SandboxRefused(PermissionError):
    """Raised inside model code when the sandbox refuses an operation (file, network, process, ...)."""


SandboxRefused.__module__ = "builtins"  # tracebacks show `SandboxRefused: ...`


class SandboxImportRefused(ModuleNotFoundError):
    """Raised inside model code when an import is not allowed (an ImportError, so `except ImportError` works)."""


SandboxImportRefused.__module__ = "builtins"  # tracebacks show `SandboxImportRefused: ...`


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
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _unshare(flags: int) -> bool:
    return _libc.unshare(ctypes.c_int(flags)) == 0


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
    if _libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:  # nothing propagates to the host
        return done
    options = f"size={int(disk_mb)}m,nr_inodes={int(max_files) + 1},mode=0700".encode()  # + 1: the root folder
    if _libc.mount(b"tmpfs", os.fsencode(work_dir), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options) != 0:
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
        _libc.prctl(ctypes.c_int(_PR_CAPBSET_DROP), ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0),
                    ctypes.c_ulong(0))  # EINVAL past the last capability, EPERM without CAP_SETPCAP: both fine
    _libc.prctl(ctypes.c_int(_PR_CAP_AMBIENT), ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0),
                ctypes.c_ulong(0), ctypes.c_ulong(0))
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), ctypes.byref(data)) != 0:
        return "failed"
    had_any = any(d.effective or d.permitted for d in data)
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
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
    version = _libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
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
    ruleset = _libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
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
                _libc.syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                              ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        if _libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return 0
        return abi
    finally:
        os.close(ruleset)


# --------------------------------------------------------------------------------------------------------------------
# 3. seccomp-bpf (x86-64)

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_CLONE_THREAD = 0x00010000
_RET_KILL_PROCESS = 0x80000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_ABS_W, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_OFF_NR, _OFF_ARCH = 0, 4


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


def _arg_hi(i: int) -> int:
    return 20 + 8 * i


# x86-64 syscall numbers refused outright (EPERM).
_X86_64_DENY = {
    "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "socket": 41, "socketpair": 53, "ptrace": 101,
    "setrlimit": 160, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_open": 434, "pidfd_getfd": 438,
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "mount": 165, "umount2": 166, "unshare": 272, "setns": 308,
    "chroot": 161, "pivot_root": 155, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "process_madvise": 440, "kcmp": 312, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "swapon": 167, "swapoff": 168,
    "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173, "acct": 163,
    "quotactl": 179, "syslog": 103, "mknod": 133, "mknodat": 259, "setuid": 105, "setgid": 106, "setreuid": 113,
    "setregid": 114, "setresuid": 117, "setresgid": 119, "setgroups": 116, "setfsuid": 122, "setfsgid": 123,
    "capset": 126,
    # the clock of the host
    "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305,
    # SysV IPC and POSIX message queues: channels between sessions that outlive them
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
    "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240, "mq_unlink": 241,
    "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
    # memory placement of other processes
    "migrate_pages": 256, "move_pages": 279,
}
_X86_64_CLONE, _X86_64_CLONE3, _X86_64_PRLIMIT64, _X86_64_PRCTL = 56, 435, 302, 157
# signal senders whose first argument is a pid / tgid: allowed only towards this process itself
_X86_64_SELF_ONLY = {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297}
# scheduling setters whose first argument is a pid: allowed for 0 (the caller) and this process only
_X86_64_SCHED_SELF = {"sched_setparam": 142, "sched_setscheduler": 144, "sched_setaffinity": 203,
                      "sched_setattr": 314}
# setpriority(which, who, prio) / ioprio_set(which, who, ioprio): only which == "a process", who == 0 or ourselves
_X86_64_SETPRIORITY, _PRIO_PROCESS = 141, 0
_X86_64_IOPRIO_SET, _IOPRIO_WHO_PROCESS = 251, 1
_X86_64_IOCTL = 16
# ioctl requests refused: FS_IOC_SETFLAGS (64- and 32-bit), FS_IOC_FSSETXATTR (immutable / append-only flags)
_REFUSED_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)


def _build_filter(self_pid: int, allow_threads: bool) -> list[tuple[int, int, int, int]]:
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        (_LD_ABS_W, 0, 0, _OFF_ARCH),
        (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_ABS_W, 0, 0, _OFF_NR),
        (_JGE_K, 0, 1, _X32_SYSCALL_BIT),
        (_RET_K, 0, 0, eperm),
    ]

    def block(nr: int, body: list[tuple[int, int, int, int]]) -> None:
        # body must end with RET on every path; a non-matching syscall skips it
        prog.append((_LD_ABS_W, 0, 0, _OFF_NR))
        prog.append((_JEQ_K, 0, len(body), nr))
        prog.extend(body)

    for nr in sorted(_X86_64_DENY.values()):
        block(nr, [(_RET_K, 0, 0, eperm)])
    for nr in _X86_64_SELF_ONLY.values():
        block(nr, [(_LD_ABS_W, 0, 0, _arg_lo(0)), (_JEQ_K, 0, 1, self_pid), (_RET_K, 0, 0, _RET_ALLOW),
                   (_RET_K, 0, 0, eperm)])
    def self_or_zero(arg: int) -> list[tuple[int, int, int, int]]:
        # pid_t / id_t arguments are 32-bit: the kernel ignores the upper half, so only the lower one is compared
        return [(_LD_ABS_W, 0, 0, _arg_lo(arg)), (_JEQ_K, 2, 0, 0), (_JEQ_K, 1, 0, self_pid), (_RET_K, 0, 0, eperm),
                (_RET_K, 0, 0, _RET_ALLOW)]

    for nr in _X86_64_SCHED_SELF.values():
        block(nr, self_or_zero(0))
    for nr, which in ((_X86_64_SETPRIORITY, _PRIO_PROCESS), (_X86_64_IOPRIO_SET, _IOPRIO_WHO_PROCESS)):
        block(nr, [(_LD_ABS_W, 0, 0, _arg_lo(0)), (_JEQ_K, 1, 0, which), (_RET_K, 0, 0, eperm), *self_or_zero(1)])
    refuse_ioctl = [(_LD_ABS_W, 0, 0, _arg_lo(1))]
    for i, request in enumerate(_REFUSED_IOCTLS):
        refuse_ioctl.append((_JEQ_K, len(_REFUSED_IOCTLS) - i, 0, request))
    block(_X86_64_IOCTL, [*refuse_ioctl, (_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, eperm)])
    thread_verdict = _RET_ALLOW if allow_threads else (_RET_ERRNO | errno.EAGAIN)
    block(_X86_64_CLONE, [(_LD_ABS_W, 0, 0, _arg_lo(0)), (_JSET_K, 0, 1, _CLONE_THREAD),
                          (_RET_K, 0, 0, thread_verdict), (_RET_K, 0, 0, eperm)])
    block(_X86_64_CLONE3, [(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)])  # libc falls back to clone()
    # prlimit64(pid, resource, new_limit, old_limit): reading is fine, setting is refused
    block(_X86_64_PRLIMIT64, [(_LD_ABS_W, 0, 0, _arg_lo(2)), (_JEQ_K, 0, 3, 0), (_LD_ABS_W, 0, 0, _arg_hi(2)),
                              (_JEQ_K, 0, 1, 0), (_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, eperm)])
    # prctl: refuse clearing the parent-death signal
    block(_X86_64_PRCTL, [(_LD_ABS_W, 0, 0, _arg_lo(0)), (_JEQ_K, 0, 1, PR_SET_PDEATHSIG), (_RET_K, 0, 0, eperm),
                          (_RET_K, 0, 0, _RET_ALLOW)])
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def install_seccomp(allow_threads: bool) -> bool:
    """Install the syscall filter on this (single-threaded) process. False when not supported here."""
    if os.uname().machine != "x86_64":
        return False
    prog = _build_filter(os.getpid(), allow_threads)
    array = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), array)
    if prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        return False
    result = _libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                         ctypes.c_ulong(0), ctypes.c_ulong(0))
    return result == 0


# --------------------------------------------------------------------------------------------------------------------
# 4. audit hook

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
