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

Run as ``python -m fedprivacy.flower.warm_clientapp [flower-superexec arguments]``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import traceback
from types import ModuleType
from typing import IO, Any

__all__ = ["WARM_IMPORTS", "check_flower_internals", "main"]

#: Modules the zygote imports once (``$FEDPRIVACY_WARM_IMPORTS``, comma-separated); missing
#: ones are skipped.
WARM_IMPORTS = tuple(
    m
    for m in os.environ.get(
        "FEDPRIVACY_WARM_IMPORTS", "numpy,torch,sklearn,fedprivacy.flower.mod"
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
            "flwr's SubprocessExecutor changed: fedprivacy.flower.warm_clientapp is pinned to "
            "flwr 1.41.0"
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


def _zygote(requests: IO[str]) -> None:
    """Import once, then fork a ClientApp per request line (JSON argument list) until EOF."""
    import flwr.supernode.cli  # noqa: F401 (the ClientApp runner, warm)

    for name in WARM_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for line in requests:
        if os.fork() == 0:
            os._exit(_run_clientapp(json.loads(line)))


class _Subprocess:
    """The ``subprocess`` module, but ``Popen(["flwr-clientapp", ...])`` asks the zygote."""

    def __init__(self, pipe: IO[str]) -> None:
        self._pipe = pipe

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    def Popen(self, args: list[str], **kwargs: Any) -> Any:  # noqa: N802 (subprocess's name)
        if not args or args[0] != _CLIENTAPP:
            return subprocess.Popen(args, **kwargs)
        self._pipe.write(json.dumps(list(args)) + "\n")
        self._pipe.flush()
        return None  # the executor ignores the handle


def main() -> None:
    """Fork the zygote, patch the executor, then run ``flower-superexec`` with these arguments."""
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(write)
        with os.fdopen(read) as requests:
            _zygote(requests)
        os._exit(0)
    os.close(read)
    from flwr.supercore.cli import flower_superexec
    from flwr.supercore.constant import TASK_TYPE_TO_COMMAND
    from flwr.supercore.superexec.executor import subprocess_executor

    check_flower_internals(subprocess_executor, TASK_TYPE_TO_COMMAND)
    pipe = os.fdopen(write, "w")
    setattr(subprocess_executor, "subprocess", _Subprocess(pipe))  # noqa: B010 (flwr internal)
    sys.argv[0] = "flower-superexec"
    flower_superexec()


if __name__ == "__main__":
    main()
