"""A warm ClientApp worker: ``flower-superexec`` whose ClientApp processes fork from a warm one.

flwr 1.41's SuperExec starts a fresh ``flwr-clientapp`` process for every message a SuperNode
receives (``SubprocessExecutor``, ``subprocess.Popen``); each one imports flwr and then the
app's own modules (torch, ...), about 2-4 s on 2 busy cores, before it does milliseconds of
protocol work. This launcher starts the SuperExec with a *zygote*: a process forked at start
that imports flwr's ClientApp runner and :data:`WARM_IMPORTS` once, then forks one child per
ClientApp launch. The child runs Flower's own ``flwr-clientapp`` entry point with the same
arguments (token, runtime API address, parent pid), so the protocol between SuperExec, SuperNode
and ClientApp is Flower's; only the process start-up is skipped. Each message still runs in a
process of its own, which exits after it (nothing of one message survives into the next but
what the app keeps in ``context.state``, as with Flower's own executor).

It relies on two internals of flwr 1.41.0, checked before patching (:func:`check_flower_internals`,
tested): the executor module launches with ``subprocess.Popen`` and the ClientApp's command is
``flwr-clientapp``. Other task types keep Flower's ``Popen``.

Run as ``python -m fedprivacy.flower.deploy.warm_clientapp [flower-superexec arguments]``.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from types import ModuleType
from typing import Any

__all__ = [
    "WARM_IMPORTS",
    "ZYGOTE_ENV",
    "check_flower_internals",
    "main",
    "serve",
    "wait_for_zygote",
    "zygote_path",
]

#: Modules the zygote imports once (``$FEDPRIVACY_WARM_IMPORTS``, comma-separated); missing
#: ones are skipped. ``torch._dynamo``: the first ``torch.optim`` optimiser of a process imports
#: it (1.4 s of a node's first local training on this machine, in every ClientApp process);
#: ``fedprivacy.fl.training_config``: what a node builds its training with.
WARM_IMPORTS = tuple(
    m
    for m in os.environ.get(
        "FEDPRIVACY_WARM_IMPORTS",
        "numpy,torch,torch._dynamo,sklearn,fedprivacy.flower.dropin.mod,fedprivacy.flower.deploy.apps,"
        "fedprivacy.fl.training_config",
    ).split(",")
    if m
)
_CLIENTAPP = "flwr-clientapp"


def check_flower_internals(executor: ModuleType, commands: dict[Any, str]) -> None:
    """Refuse to patch a Flower whose executor is not the one this launcher knows.

    Raises
    ------
    RuntimeError
        If ``executor`` does not use the ``subprocess`` module or no task runs ``flwr-clientapp``.
    """
    if (
        getattr(executor, "subprocess", None) is not subprocess
        or _CLIENTAPP not in commands.values()
    ):
        raise RuntimeError(
            "flwr's SubprocessExecutor changed: fedprivacy.flower.deploy.warm_clientapp is pinned "
            "to flwr 1.41.0"
        )


def _run_clientapp(args: list[str]) -> int:
    """In a forked child: Flower's ``flwr-clientapp`` entry point with ``args``; its exit code."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    from flwr.supernode.cli import flwr_clientapp

    sys.argv = [_CLIENTAPP, *args[1:]]
    try:
        flwr_clientapp()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except BaseException:  # noqa: BLE001 (the child reports and exits, never returns)
        traceback.print_exc()
        return 1
    return 0


#: The shared zygote's socket (``$FEDPRIVACY_ZYGOTE``): set, a SuperExec asks that zygote
#: instead of forking its own.
ZYGOTE_ENV = "FEDPRIVACY_ZYGOTE"
_MAX_REQUEST = 1 << 20


def _request(sock: socket.socket, args: list[str], output: tuple[int, int] = (1, 2)) -> None:
    """Ask the zygote for a ClientApp with ``args``.

    The request carries this process's environment and working directory, and the descriptors
    the ClientApp's stdout and stderr go to (``output``).
    """
    body = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(sock, [body], list(output))


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer of a Unix socket runs as this process's user (``SO_PEERCRED``)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def _fork_clientapp(conn: socket.socket, inherited: list[socket.socket]) -> bool:
    """Serve one request from ``conn`` (False once its peer closed): fork, run the ClientApp.

    The child takes the requester's stdout/stderr, environment and working directory, closes
    the zygote's sockets (``inherited``), and runs Flower's ``flwr-clientapp`` entry point.
    """
    data, fds, _flags, _addr = socket.recv_fds(conn, _MAX_REQUEST, 2)
    if not data:
        for fd in fds:
            os.close(fd)
        return False
    request = json.loads(data)
    if os.fork() == 0:
        for sock in inherited:
            sock.close()
        for target, fd in zip((1, 2), fds, strict=False):
            os.dup2(fd, target)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os._exit(_run_clientapp(request["args"]))
    for fd in fds:
        os.close(fd)
    return True


def _import_warm() -> None:
    import flwr.supernode.cli  # noqa: F401 (the ClientApp runner, warm)

    for name in WARM_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel


def _zygote(listener: socket.socket | None, conns: list[socket.socket]) -> None:
    """Import once, then fork a ClientApp per request until every requester has gone.

    ``listener``: the shared zygote's socket, accepting SuperExecs of this user (it then serves
    until killed); ``conns``: requesters already connected (a SuperExec's own zygote).
    """
    _import_warm()
    socks = {s.fileno(): s for s in (listener, *conns) if s is not None}
    poller = select.poll()  # no FD_SETSIZE limit, unlike select.select
    for fd in socks:
        poller.register(fd, select.POLLIN)
    while socks:
        for fd, _ in poller.poll():
            sock = socks[fd]
            if sock is listener:
                conn, _ = sock.accept()
                if _same_user(conn):
                    socks[conn.fileno()] = conn
                    poller.register(conn, select.POLLIN)
                else:
                    conn.close()
            elif not _fork_clientapp(sock, list(socks.values())):
                poller.unregister(fd)
                del socks[fd]
                sock.close()


def serve(path: str) -> None:
    """Run the shared zygote on a Unix socket at ``path`` (0600): one for every SuperExec here.

    On one machine hosting many SuperNodes (``LocalDeployment``) it holds the imports once for
    all of them. A request carries the SuperExec's arguments for ``flwr-clientapp``, its
    environment, working directory and output, so the child runs as a ClientApp of that node;
    it holds no key (each message's secrets live in the child and in ``context.state``), and
    only processes of the same user may connect (``SO_PEERCRED``).
    """
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    _zygote(listener, [])


def zygote_path() -> str:
    """A fresh path for a shared zygote's socket, in a private (0700) directory of its own.

    Short on purpose: a Unix socket's path holds at most 107 bytes.
    """
    return os.path.join(tempfile.mkdtemp(prefix="fpz-"), "zygote")


def wait_for_zygote(path: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Wait until the zygote started as ``proc`` listens at ``path``.

    Raises
    ------
    RuntimeError
        If it exits or does not listen within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the shared ClientApp zygote did not start (socket {path})")
        time.sleep(0.02)


class _Subprocess:
    """The ``subprocess`` module, but ``Popen(["flwr-clientapp", ...])`` asks the zygote."""

    def __init__(self, zygote: socket.socket) -> None:
        self._zygote = zygote

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    def Popen(self, args: list[str], **kwargs: Any) -> Any:  # noqa: N802 (subprocess's name)
        if not args or args[0] != _CLIENTAPP:
            return subprocess.Popen(args, **kwargs)
        _request(self._zygote, list(args))
        return None  # the executor ignores the handle


def _connect_zygote() -> socket.socket:
    """The shared zygote of ``$FEDPRIVACY_ZYGOTE``, or a zygote of this SuperExec's own."""
    shared = os.environ.get(ZYGOTE_ENV)
    if shared:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(shared)
        return sock
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        ours.close()
        _zygote(None, [theirs])
        os._exit(0)
    theirs.close()
    return ours


def main() -> None:
    """``--serve PATH``: the shared zygote; else patch the executor and run ``flower-superexec``."""
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
        return
    zygote = _connect_zygote()
    from flwr.supercore.cli import flower_superexec
    from flwr.supercore.constant import TASK_TYPE_TO_COMMAND
    from flwr.supercore.superexec.executor import subprocess_executor

    check_flower_internals(subprocess_executor, TASK_TYPE_TO_COMMAND)
    setattr(subprocess_executor, "subprocess", _Subprocess(zygote))  # noqa: B010 (flwr internal)
    sys.argv[0] = "flower-superexec"
    flower_superexec()


if __name__ == "__main__":
    main()
