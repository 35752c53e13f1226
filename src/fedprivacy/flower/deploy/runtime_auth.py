"""A SuperNode's local runtime API, closed to every process without the node's secret.

Between stages a node's state (its X25519 private keys, its self-mask seed, the shares it holds,
its update) travels between the SuperNode and the ClientApp process over the SuperNode's runtime
API on 127.0.0.1. That API hands out each task (the message and the ``context.state`` of a
ClientApp run, with the token to read them) to whoever asks for it with ``AcquireTask``; with an
auth secret (``--superexec-auth-secret-file``, raw bytes) it answers only requests signed with an
HMAC of that secret, so no other local process can claim the task.

Flower 1.41 uses the secret only in ``--isolation process``, where the SuperNode does not start
its SuperExec itself: :func:`supernode_command` starts it, as the SuperNode would, from a shell
that then becomes the SuperNode (``exec`` keeps its pid), so the SuperExec is the SuperNode's
child, in its process group (one signal to the group stops both), and exits when the SuperNode
does (``--parent-pid``). Each SuperNode gets a fresh secret (:func:`write_runtime_secret`).

Not closed by this: the SuperExec hands the task's token to the ClientApp process on its command
line (Flower's subprocess executor), readable in ``/proc`` by processes of the same user while
that ClientApp runs.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from fedprivacy.files import atomic_write_bytes

__all__ = ["SECRET_BYTES", "supernode_command", "write_runtime_secret"]

SECRET_BYTES = 32
"""Length of a runtime-API secret (OS randomness)."""


def write_runtime_secret(path: Path) -> Path:
    """Write a fresh secret to ``path`` (0600, its folder 0700 when created); ``path``.

    Examples
    --------
    >>> import stat, tempfile
    >>> path = write_runtime_secret(Path(tempfile.mkdtemp()) / "secrets" / "node-0.secret")
    >>> oct(stat.S_IMODE(path.stat().st_mode)), len(path.read_bytes())
    ('0o600', 32)
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write_bytes(path, os.urandom(SECRET_BYTES), private=True)
    return path


def supernode_command(
    supernode: list[str], superexec: str | list[str], port: int, secret: Path
) -> list[str]:
    """The command that runs ``supernode`` with its SuperExec, both holding ``secret``.

    Parameters
    ----------
    supernode : list of str
        ``flower-supernode`` and its arguments, without ``--port``, ``--isolation`` or a secret.
    superexec : str or list of str
        The ``flower-superexec`` executable (or a command that runs it).
    port : int
        The runtime API's port on 127.0.0.1.
    secret : pathlib.Path
        The node's secret (:func:`write_runtime_secret`).

    Returns
    -------
    list of str
        ``/bin/sh -c`` with a script that starts the SuperExec in the background and then
        becomes the SuperNode.

    Examples
    --------
    >>> cmd = supernode_command(["flower-supernode"], "flower-superexec", 9099, Path("/s"))
    >>> print(cmd[2])  # doctest: +NORMALIZE_WHITESPACE
    flower-superexec --runtime-api-address 127.0.0.1:9099 --insecure
    --superexec-auth-secret-file /s --parent-pid $$ & exec flower-supernode --port 9099
    --isolation process --superexec-auth-secret-file /s
    """
    auth = ["--superexec-auth-secret-file", str(secret)]
    node = [*supernode, "--port", str(port), "--isolation", "process", *auth]
    launcher = [superexec] if isinstance(superexec, str) else list(superexec)
    executor = [*launcher, "--runtime-api-address", f"127.0.0.1:{port}", "--insecure", *auth]
    script = f"{shlex.join(executor)} --parent-pid $$ & exec {shlex.join(node)}"
    return ["/bin/sh", "-c", script]
