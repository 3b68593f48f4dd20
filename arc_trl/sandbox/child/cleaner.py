"""Deletes dead sessions' working directories off the zygote's request path.

The zygote serves every request on one thread; deleting a folder of a million files there stalled it past the
trainer's request timeout (then the zygote is killed and every live session loses its state). Instead the zygote
renames a dead session's folder into `<work_root>/arc-sandbox-trash/` (one `rename`, instant whatever the folder
holds) and pokes this helper process through a pipe; the helper deletes everything in the trash folder with
`tree.remove_tree` (iterative: no depth limit).

The helper is forked from the zygote (single-threaded, so forking stays safe); it exits after a last sweep when the
pipe closes (the zygote exited or died). An empty folder (the usual case: with a private tmpfs the session's files
lived in memory and are gone with its process) is removed at once, without the helper.
"""

from __future__ import annotations

import os
import time

import tree

TRASH_NAME = "arc-sandbox-trash"


class Cleaner:
    def __init__(self, work_root: str) -> None:
        self.trash = os.path.join(work_root, TRASH_NAME)
        self.pid: int | None = None
        self._poke: int | None = None  # write end of the helper's pipe (non-blocking)

    def discard(self, work_dir: str) -> None:
        """Make `work_dir` disappear now; its content is deleted in the background. Never raises."""
        try:
            os.rmdir(work_dir)
            return
        except FileNotFoundError:
            return
        except OSError:
            pass
        try:
            os.makedirs(self.trash, mode=0o700, exist_ok=True)
            os.rename(work_dir, os.path.join(self.trash, os.path.basename(work_dir)))
            self._wake()
        except Exception:  # noqa: BLE001  no trash folder possible here: delete in place (slow but bounded)
            tree.remove_tree(work_dir)

    def _wake(self) -> None:
        if self.pid is None:
            self._start()
        try:
            os.write(self._poke, b".")
        except BlockingIOError:
            pass  # the pipe is full of pokes already: a sweep is due anyway
        except OSError:
            self.forget_helper()
            tree.remove_tree(self.trash)  # the helper is gone: sweep now (rare)

    def _start(self) -> None:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(write_end)
                _serve(read_end, self.trash)
            finally:
                os._exit(0)
        os.close(read_end)
        os.set_blocking(write_end, False)
        os.set_inheritable(write_end, False)
        self.pid, self._poke = pid, write_end

    def forget_helper(self) -> None:
        """The helper exited (reaped by the zygote): start a new one on the next discard."""
        if self._poke is not None:
            os.close(self._poke)
        self.pid, self._poke = None, None

    def close(self, wait_s: float) -> None:
        """Let the helper finish the trash (it exits when it is empty) and wait for it up to `wait_s` seconds."""
        pid = self.pid
        if self._poke is not None:
            os.close(self._poke)
        self.pid, self._poke = None, None
        if pid is None:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return
            if done:
                return
            time.sleep(0.01)


def _serve(poke_fd: int, trash: str) -> None:
    """The helper's loop: on each poke, empty the trash folder; on EOF, a last sweep and exit."""
    os.closerange(3, poke_fd)
    os.closerange(poke_fd + 1, 1 << 16)
    while True:
        data = os.read(poke_fd, 4096)
        _sweep(trash)
        if not data:
            break
    try:
        os.rmdir(trash)
    except OSError:
        pass


def _sweep(trash: str) -> None:
    try:
        names = os.listdir(trash)
    except OSError:
        return
    for name in names:
        tree.remove_tree(os.path.join(trash, name))
