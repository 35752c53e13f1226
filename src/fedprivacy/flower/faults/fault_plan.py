"""Faults a local deployment injects: a SuperNode killed, nodes that replay or send wrong shares.

:class:`FaultPlan` is what ``fedprivacy flower deploy`` (``--kill``, ``--replay``,
``--bad-share``, ``--forge``, ``--rerun``) and ``flower cross-silo`` (``--kill``, ``--replay``,
``--forge``) ask of :func:`fedprivacy.flower.deploy.deploy.deploy`; :func:`node_fault` is the
``fedprivacy-fault`` node configuration it gives each node.

Examples
--------
>>> node_fault(FaultPlan(replay={2: 1}, badshare={3: 0}), 3)
'badshare@0'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedprivacy.errors import ParameterError
from fedprivacy.flower.messaging.stages import Stage

__all__ = ["FaultPlan", "node_fault"]


@dataclass
class FaultPlan:
    """Faults to inject: a SuperNode killed before a stage, nodes that replay a message.

    Attributes
    ----------
    kill : tuple of (int or None, int, Stage), optional
        ``(user, round, stage)``: the ServerApp pauses before ``stage`` of ``round``, the
        deployment kills the SuperNode of ``user`` (``None``: the last user asked in that stage)
        with SIGKILL to its process group, and the run goes on.
    replay : dict of (int or None) to int
        User -> round in which that node replays its previous message at the masked-input stage
        (``None``: the first user asked in that round, whoever it is).
    badshare : dict of (int or None) to int
        User -> round in which that node (a malicious node) sends wrong unmasking shares
        (``None``: the first user asked).
    forge : str
        A lying server: ``"NAME=VALUE,..."`` parameters the ServerApp proposes instead of the
        configuration's (see :func:`fedprivacy.flower.faults.forge.parse_forge`); every party must
        refuse them under its own policy.
    rerun : bool
        A server that starts a new run against nodes that answered the first: once the first
        run ends, the same app and run configuration run again with ``flwr run`` on the same
        SuperNodes (run directory ``RUN/rerun``); every node refuses what its state file says
        it answered (:mod:`fedprivacy.flower.nodes.party_state`).
    """

    kill: tuple[int | None, int, Stage] | None = None
    replay: dict[int | None, int] = field(default_factory=dict)
    badshare: dict[int | None, int] = field(default_factory=dict)
    forge: str = ""
    rerun: bool = False

    def check(self, users: int, rounds: range) -> None:
        """Refuse a fault for a user or a kill in a round the run does not have.

        Called before any process starts. ``rounds`` are the run's round numbers as the
        exchanges count them (a FedAvg deployment from 0; Protocol 1's setup is 0, its rounds
        from 1).

        Raises
        ------
        ParameterError
            Naming the option of the first fault outside the run.

        Examples
        --------
        >>> FaultPlan(kill=(9, 0, Stage.MASK)).check(6, range(3))
        Traceback (most recent call last):
        ...
        fedprivacy.errors.ParameterError: --kill: user 9 is not one of the run's 0..5
        """
        faulty: list[tuple[str, int | None]] = [("--replay", u) for u in self.replay]
        faulty += [("--bad-share", u) for u in self.badshare]
        if self.kill is not None:
            faulty.append(("--kill", self.kill[0]))
            if self.kill[1] not in rounds:
                raise ParameterError(
                    "--kill",
                    f"round {self.kill[1]} is not one of the run's "
                    f"{rounds.start}..{rounds.stop - 1}",
                )
        for option, user in faulty:
            if user is not None and not 0 <= user < users:
                raise ParameterError(option, f"user {user} is not one of the run's 0..{users - 1}")

    @classmethod
    def parse_kill(cls, text: str) -> tuple[int | None, int, Stage]:
        """``--kill``'s ``"U@R:STAGE"`` -> ``(U, R, Stage)`` (``U`` may be ``*``).

        A malformed text raises :class:`ParameterError` naming ``--kill``.

        Examples
        --------
        >>> FaultPlan.parse_kill("*@1:mask")
        (None, 1, <Stage.MASK: 'mask'>)
        """
        try:
            user, _, rest = text.partition("@")
            r, _, stage = rest.partition(":")
            return None if user == "*" else int(user), int(r), Stage(stage)
        except ValueError:
            raise ParameterError(
                "--kill", f"must be USER@ROUND:STAGE (e.g. 3@1:mask), got {text!r}"
            ) from None


def node_fault(faults: FaultPlan, user: int) -> str:
    """The ``fedprivacy-fault`` of ``user``'s node (:mod:`fedprivacy.flower.faults.node_faults`).

    >>> node_fault(FaultPlan(replay={None: 2}, badshare={3: 0}), 3)
    'replay@2:first,badshare@0'
    """
    items = []
    for kind, plan in (("replay", faults.replay), ("badshare", faults.badshare)):
        if user in plan:
            items.append(f"{kind}@{plan[user]}")
        if None in plan:
            items.append(f"{kind}@{plan[None]}:first")
    return ",".join(items)
