"""The tests' fairwin commands: each a process of its own, forked from a server that imported fairwin's library once.

A fresh interpreter spends 0.4 to 0.9 s of CPU importing fairwin's library (numpy, scipy.special, aiohttp, the
validation schemas pydantic builds for every model) before a command's first step, and the unit and integration
tests run about 650 commands: on 2 cores that was 40 % of the part's CPU (benchmarks/README.md, `suite_cpu.py`).
Here one server per pytest process imports the library once and forks a child for each command. The child is a
process of its own, as `python -m fairwin` would be: its own pid, session, working directory, environment, stdin
(/dev/null), stdout and stderr, exit status, and a whole interpreter shutdown (atexit, flushed streams). It
imports the command line itself (`fairwin.cli`: its consoles read COLUMNS and the streams as they are built),
then runs ``fairwin.cli.main``. What it shares with its siblings is what importing the library built, nothing a
command made.

``FAIRWIN_TEST_EXEC=1`` runs every command as `python -m fairwin` instead. The tests that signal or kill a
window, the end-to-end windows, the Slurm jobs and `make demo` always start a fresh interpreter.

Written by hand because multiprocessing's forkserver runs a callable, not a process's life: its children end in
``os._exit`` (no atexit: fairwin's SSH sessions are closed there), and only the parent hears their exit status.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import pkgutil
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
EXEC_ENV = "FAIRWIN_TEST_EXEC"
#: Parts of fairwin the server does not import: the command line (each child builds its own consoles and
#: parser, as a fresh process does), the sim (a server of its own, always started fresh), the entry point, and
#: the exporter (pyarrow starts jemalloc's background thread, and a process with threads must not fork).
NOT_PRELOADED = ("fairwin.cli", "fairwin.sim", "fairwin.__main__", "fairwin.report.export")
#: What a request may hold: the command's arguments and environment, one datagram.
MAX_REQUEST = 1 << 20


def _not_preloaded(module: str) -> bool:
    return any(module == name or module.startswith(f"{name}.") for name in NOT_PRELOADED)


def _preload() -> None:
    """Every module of fairwin's library, and what its commands import only when they run."""
    packages = ["fairwin"]
    while packages:  # not pkgutil.walk_packages: it imports every package it walks, the command line's too
        package = importlib.import_module(packages.pop())
        for module in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            if _not_preloaded(module.name):
                continue
            if module.ispkg:
                packages.append(module.name)
            else:
                importlib.import_module(module.name)
    for name in ("scipy.special", "matplotlib.figure", "matplotlib.backends.backend_agg", "matplotlib.dates"):
        importlib.import_module(name)
    loaded = sorted(name for name in sys.modules if _not_preloaded(name))
    if loaded:  # a library module importing one of them (the command line: every child at the server's width)
        raise RuntimeError(f"the fork server imported {', '.join(loaded)}; only the children may")
    threads = [(task / "comm").read_text().strip() for task in Path("/proc/self/task").iterdir()]
    if len(threads) > 1:  # a fork copies only the forking thread: a lock another one held stays held
        raise RuntimeError(f"the fork server runs threads ({', '.join(threads)}) after its imports")


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: the process `python -m fairwin ARGS` would be."""
    stdin = os.open(os.devnull, os.O_RDONLY)
    for target, fd in enumerate((stdin, *fds)):
        os.dup2(fd, target)
        os.close(fd)
    if request["session"]:
        os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [str(Path(importlib.import_module("fairwin").__file__ or "").with_name("__main__.py")), *request["args"]]
    sys.path[0] = str(Path.cwd())  # what `python -m` puts first


def serve(path: str) -> list[str] | None:
    """Fork a child per request until the pytest process that started this one is gone; in the child, return
    the command's arguments (the caller runs it), in the server None at the end."""
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # numpy's BLAS starts no thread pool here; each child's env is its own
    _preload()
    parent = os.getppid()
    listener = _listen(path)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    gc.freeze()  # the modules' objects stay out of the children's collections and their pages stay shared
    while os.getppid() == parent:
        for key, _ in selector.select(timeout=1):
            if key.fileobj is not listener:
                _report_exit(selector, key)
                continue
            connection, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST, 2)
            if not message or len(fds) != 2:  # a client that went before it asked
                _close(fds, connection)
                continue
            pid = os.fork()
            if pid == 0:
                _leave_server(selector, listener, connection)
                request = json.loads(message)
                _become(request, fds)
                return list(request["args"])
            _close(fds)
            with contextlib.suppress(OSError):
                connection.send(str(pid).encode())
            selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, connection))
    return None


def _listen(path: str) -> socket.socket:
    """The server's socket, at ``path`` only once it accepts (a client waits for the path to appear)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(f"{path}.binding")
    listener.listen(64)
    Path(f"{path}.binding").rename(path)
    return listener


def _close(fds: list[int], *sockets: socket.socket) -> None:
    for fd in fds:
        os.close(fd)
    for each in sockets:
        each.close()


def _leave_server(selector: selectors.BaseSelector, listener: socket.socket, connection: socket.socket) -> None:
    """In a forked child: none of the server's descriptors (its socket, its epoll, the pidfds of the commands
    still running and their clients' connections) is left open in the command."""
    for key in list(selector.get_map().values()):
        if key.fileobj is not listener:
            _close([key.fd], key.data[1])
    selector.close()
    _close([], listener, connection)


def _report_exit(selector: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
    """A child ended (its pidfd is readable): its exit status to its client, as subprocess gives it."""
    pid, connection = key.data
    selector.unregister(key.fileobj)
    os.close(key.fd)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError), connection:  # a client that timed out has gone
        connection.send(str(os.waitstatus_to_exitcode(status)).encode())


class _Server:
    """This pytest process's fork server: started on the first command, stopped at its exit."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.scratch = Path(tempfile.mkdtemp(prefix="fairwin-forks-"))
        self.path = str(self.scratch / "socket")
        self.log = self.scratch / "server.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.forked", self.path],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        atexit.register(self.stop)
        deadline = time.monotonic() + 120
        while not Path(self.path).exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                said = self.log.read_text()[-2000:]
                self.stop()
                raise RuntimeError(f"the tests' fork server did not start: {said}")
            time.sleep(0.02)

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)


_server: _Server | None = None


def _read(stream: IO[bytes]) -> str:
    """What a text-mode pipe would have given: decoded, universal newlines."""
    stream.seek(0)
    return stream.read().decode().replace("\r\n", "\n").replace("\r", "\n")


def run(
    args: list[str], *, env: dict[str, str], cwd: Path | None, timeout: float, new_session: bool
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, fairwin, *args], capture_output=True, text=True)`` in a forked child:
    the same exit status (negative: the signal that ended it), output and ``TimeoutExpired`` (the child killed)."""
    command = [sys.executable, "-m", "fairwin", *args]
    if env.get(EXEC_ENV) == "1":
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env, start_new_session=new_session
        )
    global _server
    if _server is None or not _server.alive():
        _server = _Server()
    request = {"args": args, "env": env, "cwd": str(cwd or Path.cwd()), "session": new_session}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
            connection.connect(_server.path)
            socket.send_fds(connection, [json.dumps(request).encode()], [out.fileno(), err.fileno()])
            connection.settimeout(60)
            pid = int(connection.recv(64))
            connection.settimeout(timeout)
            try:
                code = int(connection.recv(64))
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                connection.settimeout(60)
                connection.recv(64)
                raise subprocess.TimeoutExpired(command, timeout, _read(out), _read(err)) from None
        return subprocess.CompletedProcess(command, code, _read(out), _read(err))


if __name__ == "__main__":
    ARGS = serve(sys.argv[1])
    if ARGS is not None:  # the forked child: the command, then the interpreter's own shutdown
        from fairwin.cli import main

        sys.exit(main(ARGS))
