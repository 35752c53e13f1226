"""The keys of a Flower app's run config that ``PrivateFedAvg`` reads, checked as written.

A run config (``[tool.flwr.app.config]`` of the app's ``pyproject.toml``, or ``flwr run
--run-config``) holds the app's own keys beside fedprivacy's, so a key fedprivacy does not know is
left to the app. :func:`configuration_values` refuses, before any round, what would silently run
otherwise:

* a key that looks like one of fedprivacy's (``per-rond``: "did you mean per-round?");
* fedprivacy's key with underscores (``noise_multiplier``: it is spelled ``noise-multiplier``);
* two keys for one setting (``rounds`` beside Flower's ``num-server-rounds``);
* a key of a node's own policy (``allow-plaintext``, ``min-threshold``, ...): it belongs in each
  node's policy file (the SuperNode's ``--node-config 'fedprivacy-policy=...'``), which the
  server never sets.

:func:`as_written` turns an error about a field back into the key the user wrote.

Examples
--------
>>> names = {"per-round": "per_round", "users": "users"}
>>> configuration_values({"per-round": 4, "lr": 0.1}, names)
{'per_round': 4}
>>> configuration_values({"per-rond": 6}, names)
Traceback (most recent call last):
...
fedprivacy.errors.ParameterError: per-rond: is not a key of PrivateFedAvg; did you mean \
per-round? (the app's own keys are left to the app)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from fedprivacy.errors import ParameterError
from fedprivacy.policy import POLICY_KEY, PartyPolicy

__all__ = ["FLOWER_ROUNDS", "as_written", "configuration_values"]

#: Flower's name of the number of rounds, read as ``rounds``.
FLOWER_ROUNDS = "num-server-rounds"
#: How close an unknown key must be to one of fedprivacy's to be taken for a typo of it.
_TYPO_CUTOFF = 0.8


def _policy_keys(names: Mapping[str, str]) -> set[str]:
    """A node's policy keys (hyphenated) that are not also the run's own."""
    policy = {f.name.replace("_", "-") for f in fields(PartyPolicy)}
    return policy - set(names)


def configuration_values(run_config: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """Fedprivacy's values of ``run_config`` by field name (``names``: key -> field).

    Raises
    ------
    ParameterError
        Named as the user wrote the key (see the module docstring).
    """
    policy = _policy_keys(names)
    for key in run_config:
        hyphenated = key.replace("_", "-")
        if key not in names and hyphenated in names:
            raise ParameterError(key, f"is spelled {hyphenated} in a run config")
        if hyphenated in policy:
            raise ParameterError(
                key,
                "is a key of a node's own policy: it belongs in each node's policy file (the "
                f"SuperNode's --node-config '{POLICY_KEY}=FILE'), which the server never sets",
            )
        if key not in names:
            near = difflib.get_close_matches(key, list(names), n=1, cutoff=_TYPO_CUTOFF)
            if near:
                raise ParameterError(
                    key,
                    f"is not a key of PrivateFedAvg; did you mean {near[0]}? (the app's own "
                    "keys are left to the app)",
                )
    given = [k for k in run_config if k in names]
    fields_given = [names[k] for k in given]
    for field in set(fields_given):
        both = [k for k in given if names[k] == field]
        if len(both) > 1:
            raise ParameterError(both[1], f"sets the same as {both[0]}: give one of them")
    return {names[k]: v for k, v in run_config.items() if k in names}


def as_written(error: ParameterError, names: Mapping[str, str]) -> ParameterError:
    """``error`` about a field, named and worded with the run config's keys.

    Examples
    --------
    >>> names = {"noise-multiplier": "noise_multiplier", "dp": "dp"}
    >>> str(as_written(ParameterError("noise_multiplier", "is required with --dp distributed"),
    ...                names))
    'noise-multiplier: is required with dp = "distributed"'
    """
    key = {field: k for k, field in names.items()}
    name = key.get(error.name, error.name)
    message = str(error)[len(error.name) + 2 :]
    message = re.sub(r"--([a-z][a-z-]*) ([a-z][\w-]*)", r'\1 = "\2"', message)
    message = re.sub(r"--([a-z][a-z-]*)", r"\1", message)
    for field, k in key.items():
        message = re.sub(rf"\b{field}\b", k, message)
    return ParameterError(name, message)
