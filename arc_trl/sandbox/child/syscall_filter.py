"""Layer 3 of the confinement (see `guard`): a seccomp-bpf syscall filter, x86-64 only.

The kernel refuses socket creation, fork/exec (threads only when allowed), signals to other processes,
ptrace/process_vm_*, raising resource limits, io_uring, bpf, mount and friends, scheduling/priority changes of other
processes, setting the clock, SysV IPC / POSIX message queues and the immutable-file ioctls.
"""

from __future__ import annotations

import ctypes
import errno
import os

from guard import PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, libc, prctl

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
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
    result = libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                        ctypes.c_ulong(0), ctypes.c_ulong(0))
    return result == 0
