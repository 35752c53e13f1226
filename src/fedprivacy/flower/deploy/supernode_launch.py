"""``flower-supernode`` with a shorter idle pull: what ``LocalDeployment`` starts for each node.

A SuperNode of flwr 1.41 sleeps a fixed 3 s after every pull that brought no message
(``flwr.supernode.start_client_internal``: ``time.sleep(3)`` in its main loop), so each
exchange of a round waits up to 3 s before a node even sees its request; Flower offers no
setting for it. This launcher replaces that one pause by :data:`IDLE_PULL` seconds
(``$FEDPRIVACY_SUPERNODE_IDLE_PULL``, default 0.5) and then runs Flower's own
``flower-supernode`` entry point with the same arguments; every other sleep is untouched.

It relies on one internal of flwr 1.41.0 (the module's ``time`` and the literal 3):
:func:`check_flower_internals` fails loudly if either changes, and
``tests/flower/deploy/test_supernode_launch.py`` runs it, so an upgrade cannot silently undo it.

Run as ``python -m fedprivacy.flower.deploy.supernode_launch [flower-supernode arguments]``.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from types import ModuleType
from typing import Any

__all__ = ["IDLE_PULL", "check_flower_internals", "main"]

IDLE_PULL = float(os.environ.get("FEDPRIVACY_SUPERNODE_IDLE_PULL", "0.5"))
_FLOWER_PAUSE = 3  # the idle pause of flwr 1.41.0's SuperNode loop


class _ShorterIdlePull:
    """The ``time`` module, but ``sleep(3)`` sleeps :data:`IDLE_PULL` seconds."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(IDLE_PULL if seconds == _FLOWER_PAUSE else seconds)


def check_flower_internals(module: ModuleType) -> None:
    """Refuse to patch a Flower whose SuperNode loop is not the one this launcher knows.

    Raises
    ------
    RuntimeError
        If ``module`` has no ``time`` module attribute or no ``time.sleep(3)`` in its source.
    """
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):  # no source to read: not the module this launcher knows
        source = ""
    if getattr(module, "time", None) is not time or f"time.sleep({_FLOWER_PAUSE})" not in source:
        raise RuntimeError(
            "flwr's SuperNode loop changed (no time.sleep(3) in start_client_internal): "
            "fedprivacy.flower.deploy.supernode_launch is pinned to flwr 1.41.0"
        )


def main() -> None:
    """Patch the idle pause, then run ``flower-supernode`` with this process's arguments."""
    from flwr.supernode import start_client_internal
    from flwr.supernode.cli import flower_supernode

    check_flower_internals(start_client_internal)
    setattr(start_client_internal, "time", _ShorterIdlePull())  # noqa: B010 (flwr internal)
    sys.argv[0] = "flower-supernode"
    flower_supernode()


if __name__ == "__main__":
    main()
