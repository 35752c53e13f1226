"""A party's state that outlives every run: a 0600 file beside its policy.

Flower gives each run of a ClientApp a fresh ``context.state``: what a node kept there (the
rounds it answered, the budget it spent, its key epoch) would start again empty with the next
``flwr run`` on the same SuperNode, and a server that starts a new run could ask round 0 again
(the node trains deterministically, so the replay masks the same update with fresh noise: the
averaging :func:`~fedprivacy.flower.nodes.node_policy.answer_once` exists to stop) or spend the
budget once per run. So the entries of
:data:`PERSISTENT` live in a file of the party's own, ``party-ID.state`` in its policy's
``state_dir`` (by default the policy file's folder, :meth:`~fedprivacy.policy.PartyPolicy.
from_policy_file`; one file per party even where several share a policy file):

- :func:`load_party_state` lays the file's entries over the request's state before anything is
  computed (the file wins); a file that exists but cannot be read, does not parse, or is
  readable by other users is refused with a typed error, so the party answers nothing;
- :func:`save_party_state` writes them back, atomically, 0600 and flushed to the disk, before
  the reply leaves, whenever a request changed them; never keyed by run.

The budget is counted in rounds at the policy's noise floor; a file written under another floor
is converted to rounds at the present one, rounded up (a Gaussian round at ``z`` costs
``z**-2``, so ``n`` rounds at ``z_old`` cost what ``n * z_new**2 / z_old**2`` rounds at
``z_new`` cost, for RDP and GDP alike).

Adversary: a server that starts new runs against the same nodes (replays, budget resets).
Not covered: a local process running as the party's user (it can edit the file).

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from fedprivacy.policy import PartyPolicy
>>> folder = tempfile.mkdtemp()
>>> policy = PartyPolicy(noise_multiplier=1.0, clip=1.0, state_dir=folder)
>>> save_party_state(policy, 7, {}, {"answered": b"4", "spent": b"5", "keys": b"run only"})
>>> oct(state_path(policy, 7).stat().st_mode & 0o777), state_path(policy, 7).name
('0o600', 'party-7.state')
>>> state = {"answered": b"1"}
>>> load_party_state(policy, 7, state); state
{'answered': b'4', 'spent': b'5'}
>>> stricter = PartyPolicy(noise_multiplier=2.0, clip=1.0, state_dir=folder)
>>> state = {}
>>> load_party_state(stricter, 7, state); state["spent"]
b'20'
"""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_bytes
from fedprivacy.policy import PartyPolicy

__all__ = ["PERSISTENT", "load_party_state", "save_party_state", "state_path"]

PERSISTENT = ("answered", "spent", "epoch", "trained", "joint")
"""The node's state entries that outlive a round and every run: the last round index it
answered in each session, how many secure rounds it contributed to (its budget), its reused
keys, if its policy reuses them (:mod:`fedprivacy.flower.nodes.node_keys`), the (round, model)
pairs it trained on (:func:`~fedprivacy.flower.nodes.node_policy.train_once`), and its draw of the
SecAgg+ graph's seed (:mod:`fedprivacy.flower.messaging.joint_draw`)."""

_FORMAT = "fedprivacy party state"
_VERSION = 1


def state_path(policy: PartyPolicy, party: int) -> Path:
    """The state file of ``party`` (a user's or a silo's id) under ``policy.state_dir``."""
    return Path(policy.state_dir) / f"party-{int(party)}.state"


def _refuse(path: Path, why: str) -> ParameterError:
    return ParameterError(
        "state_dir", f"{path}: {why}; this party answers nothing until it is mended or removed"
    )


def _read(path: Path) -> dict[str, object]:
    """The file's JSON object (``{}`` when the file does not exist yet)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise _refuse(path, f"cannot be read ({exc})") from None
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise _refuse(path, f"is open to other users (mode {stat.S_IMODE(info.st_mode):o})")
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise _refuse(path, f"is not a party state file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise _refuse(path, "is not a party state file")
    if data.get("version") != _VERSION:
        raise _refuse(path, f"has version {data.get('version')!r}, not {_VERSION}")
    return data


def _entries(path: Path, data: Mapping[str, object]) -> dict[str, bytes]:
    """The persistent entries of a parsed file."""
    entries = data.get("entries", {})
    if not isinstance(entries, dict):
        raise _refuse(path, "has no entries")
    try:
        return {k: bytes.fromhex(v) for k, v in entries.items() if k in PERSISTENT}
    except (TypeError, ValueError) as exc:
        raise _refuse(path, f"has a malformed entry ({exc})") from None


def _rescale_spent(path: Path, entries: dict[str, bytes], old: object, new: float | None) -> None:
    """Convert the rounds spent at the file's noise floor ``old`` into rounds at ``new``."""
    if "spent" not in entries or old == new or new is None:
        return
    spent = int(entries["spent"])
    if spent and not isinstance(old, int | float):
        raise _refuse(path, f"counts {spent} rounds without a noise floor; the budget is spent")
    if isinstance(old, int | float):
        entries["spent"] = str(math.ceil(spent * new**2 / float(old) ** 2)).encode()


def load_party_state(policy: PartyPolicy, party: int, state: MutableMapping[str, bytes]) -> None:
    """Lay the persistent entries of ``party``'s state file over ``state``.

    Raises
    ------
    ParameterError
        Named ``state_dir``: the file exists but is unreadable, malformed, of another version,
        open to other users, or counts rounds without noise against a budget.
    """
    if not policy.state_dir:
        return
    path = state_path(policy, party)
    data = _read(path)
    entries = _entries(path, data)
    _rescale_spent(path, entries, data.get("noise_multiplier"), policy.noise_multiplier)
    state.update(entries)


def save_party_state(
    policy: PartyPolicy, party: int, before: Mapping[str, bytes], after: Mapping[str, bytes]
) -> None:
    """Write the persistent entries of ``after`` (0600, flushed) if they differ from ``before``.

    Raises
    ------
    ParameterError
        Named ``state_dir``, if the file cannot be written (the reply is then not sent: the
        caller refuses).
    """
    kept = {k: after[k] for k in PERSISTENT if k in after}
    if not policy.state_dir or kept == {k: before[k] for k in PERSISTENT if k in before}:
        return
    path = state_path(policy, party)
    data = {
        "format": _FORMAT,
        "version": _VERSION,
        "noise_multiplier": policy.noise_multiplier,
        "entries": {k: v.hex() for k, v in sorted(kept.items())},
    }
    text = json.dumps(data, indent=1) + "\n"
    try:
        atomic_write_bytes(path, text.encode(), private=True, durable=True)
    except OSError as exc:
        raise _refuse(path, f"cannot be written ({exc})") from None
