"""Registrations of one's own in every process: the modules named in ``$FEDPRIVACY_PLUGINS``.

A new mechanism, aggregator or selector is one subclass and one registration in its registry
(:data:`~fedprivacy.fl.mechanism.MECHANISMS`, :data:`~fedprivacy.fl.aggregators.AGGREGATORS`,
...). In this process, importing the module that registers it is enough; a deployment runs
other processes (the ServerApp, every SuperNode's ClientApp, Ray's workers), each of which
imports the modules named in its own ``FEDPRIVACY_PLUGINS`` (comma-separated module names,
importable on that process's path) when :mod:`fedprivacy.flower.deploy.apps`, the drop-in's
:mod:`fedprivacy.flower.dropin.mod` or the ``fedprivacy`` command starts. Each party reads its
own environment: a node whose operator did not install a plugin does not know its mechanism
and refuses the rounds that name it (a typed error reply), so a server cannot bring code to
the nodes.

Examples
--------
>>> load_plugins({"FEDPRIVACY_PLUGINS": "json, fedprivacy.errors"})
('json', 'fedprivacy.errors')
>>> load_plugins({})
()
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping

from fedprivacy.errors import ParameterError

__all__ = ["PLUGINS_ENV", "load_plugins"]

PLUGINS_ENV = "FEDPRIVACY_PLUGINS"


def load_plugins(
    environ: Mapping[str, str] = os.environ, log: logging.Logger | None = None
) -> tuple[str, ...]:
    """Import every module ``environ[PLUGINS_ENV]`` names, in order; return their names.

    With ``log`` (a process that serves requests: a node, a ServerApp), a module that cannot be
    imported is a warning there and is skipped: what names its registrations is refused later.

    Raises
    ------
    ParameterError
        Naming ``FEDPRIVACY_PLUGINS``, if a module cannot be imported (its error in one line).
    """
    names = tuple(n.strip() for n in environ.get(PLUGINS_ENV, "").split(",") if n.strip())
    loaded = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a plugin's own error is the operator's to read, in one line
            error = ParameterError(
                PLUGINS_ENV, f"cannot import {name!r}: {type(exc).__name__}: {exc}"
            )
            if log is None:
                raise error from None
            log.warning("%s", error)
        else:
            loaded.append(name)
    return tuple(loaded)
