"""The processes of a local Flower deployment: a SuperLink and SuperNodes on 127.0.0.1.

:class:`LocalDeployment` starts real processes (``flower-superlink``, ``flower-supernode``; each
SuperNode starts its SuperExec and a ClientApp process per message, forked from the
deployment's one warm zygote, :mod:`fedprivacy.flower.deploy.warm_clientapp`; its idle pull is
shortened, :mod:`fedprivacy.flower.deploy.supernode_launch`) in their own process groups, and stops
every one of them when it leaves its ``with`` block: after the run, on an error, on Ctrl-C or
SIGTERM; if the command is SIGKILLed, its :class:`~fedprivacy.flower.deploy.watchdog.Watchdog` stops
them. :func:`fedprivacy.flower.deploy.deploy.deploy` runs fedprivacy's own jobs on it; the
benchmarks and the example app's tests run any Flower app on it (:meth:`LocalDeployment.flwr_run`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import tomli_w

from fedprivacy.errors import FedPrivacyError
from fedprivacy.files import atomic_write_text
from fedprivacy.flower.deploy.runtime_auth import supernode_command, write_runtime_secret
from fedprivacy.flower.deploy.stragglers import Stragglers
from fedprivacy.flower.deploy.tls import TlsMaterials, generate_tls_materials
from fedprivacy.flower.deploy.warm_clientapp import ZYGOTE_ENV, wait_for_zygote, zygote_path
from fedprivacy.flower.deploy.watchdog import Watchdog
from fedprivacy.flower.nodes.node_auth import NodeKeys

__all__ = ["POLLING_NODES", "DeploymentError", "LocalDeployment", "free_port", "polling"]


class DeploymentError(FedPrivacyError):
    """A process of the deployment failed to start, or the run did not finish in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bin(name: str) -> str:
    """The Flower executable next to this interpreter (its ``bin`` must be on ``PATH`` too)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise DeploymentError(
            f"{name} not found next to {sys.executable}: pip install fedprivacy[flower]"
        )
    return str(path)


#: Nodes up to which the shortest polling is kept (:func:`polling`).
POLLING_NODES = 10


def polling(nodes: int) -> dict[str, str]:
    """The polling intervals of ``nodes`` SuperNodes on one machine, as environment variables.

    Each idle SuperNode pulls the SuperLink every ``FEDPRIVACY_SUPERNODE_IDLE_PULL`` seconds
    (:mod:`fedprivacy.flower.deploy.supernode_launch`; Flower's is 3 s) and its SuperExec polls it
    every ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` seconds (Flower's default 1 s). Up to
    :data:`POLLING_NODES` nodes they are 0.5 s and 0.25 s; above, both grow in proportion to
    the nodes (up to 3 s), so the machine's idle requests a second stay about what 10 nodes
    make (60). At 50 nodes the short intervals would keep 1.6 of this VM's 2 cores busy while
    idle, and Flower's own about one (``benchmarks/supernode_idle.py``).

    Examples
    --------
    >>> polling(6)
    {'FEDPRIVACY_SUPERNODE_IDLE_PULL': '0.5', 'FLWR_SUPEREXEC_TASK_POLL_INTERVAL': '0.25'}
    >>> polling(50)
    {'FEDPRIVACY_SUPERNODE_IDLE_PULL': '2.5', 'FLWR_SUPEREXEC_TASK_POLL_INTERVAL': '1.25'}
    """
    scale = max(1.0, nodes / POLLING_NODES)
    return {
        "FEDPRIVACY_SUPERNODE_IDLE_PULL": f"{min(3.0, 0.5 * scale):g}",
        "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": f"{min(3.0, 0.25 * scale):g}",
    }


class LocalDeployment:
    """Processes of a local deployment, all stopped on exit (see the module docstring).

    Parameters
    ----------
    run_dir : pathlib.Path
        Logs (``logs/``), Flower's home (``flwr-home/``) and TLS material (``tls/``) go here.
    tls : bool
        Serve the SuperLink over TLS (a fresh CA); ``False`` runs ``--insecure``.
    nodes : int
        How many SuperNodes will run: their polling is tuned to it (:func:`polling`); a
        variable already in the environment is kept.
    """

    def __init__(self, run_dir: Path, *, tls: bool = True, nodes: int = POLLING_NODES) -> None:
        self.run_dir = run_dir
        self.tls: TlsMaterials | None = None
        if tls:
            self.tls = generate_tls_materials(run_dir / "tls")
        self.port = free_port()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._watchdog = Watchdog()
        self._logs: list[IO[bytes]] = []
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["FLWR_HOME"] = str(run_dir / "flwr-home")
        for name, value in polling(nodes).items():
            self.env.setdefault(name, value)
        self.env["FLWR_DISABLE_UPDATE_CHECK"] = "1"
        self.env["FLWR_TELEMETRY_ENABLED"] = "0"  # no event at start and exit of every ClientApp
        self.env.pop(ZYGOTE_ENV, None)
        self._zygote: str | None = None  # the socket of the nodes' one warm ClientApp zygote
        self._stragglers = Stragglers(f"FLWR_HOME={self.env['FLWR_HOME']}".encode(), str(run_dir))
        self.runtime_ports: dict[int, int] = {}
        """User -> the port of its SuperNode's runtime API on 127.0.0.1."""
        self.runtime_secrets: dict[int, Path] = {}
        """User -> its SuperNode's runtime-API auth secret (32 random bytes, 0600)."""

    @property
    def address(self) -> str:
        """The SuperLink's ``host:port``."""
        return f"127.0.0.1:{self.port}"

    def log_path(self, name: str) -> Path:
        """Where process ``name`` writes its output."""
        return self.run_dir / "logs" / f"{name}.log"

    def _start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        out = self.log_path(name).open("wb")
        self._logs.append(out)
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        self.processes[name] = proc
        self._watchdog.watch(proc.pid)  # its group: a SIGKILLed command leaves nothing behind
        return proc

    def start_superlink(
        self, timeout: float = 60.0, *, simulation: bool = False, node_auth: bool = False
    ) -> None:
        """Start the SuperLink and wait until it accepts connections.

        ``simulation`` starts it with Flower's simulation runtime (Ray): ``flwr run`` then runs
        the app on virtual SuperNodes inside it (:meth:`write_flower_config` sets how many).
        ``node_auth`` admits only the SuperNodes registered with :meth:`register_supernodes`.
        """
        args = [_bin("flower-superlink"), "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--disable-runtime-dependency-installation"]
        if simulation:
            args += ["--simulation"]
        if node_auth:
            args += ["--enable-supernode-auth"]
        if self.tls is None:
            args += ["--insecure"]
        else:
            t = self.tls
            args += ["--ssl-ca-certfile", str(t.ca_cert), "--ssl-certfile", str(t.server_cert)]
            args += ["--ssl-keyfile", str(t.server_key)]
        proc = self._start("superlink", args)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DeploymentError(f"the SuperLink exited: see {self.log_path('superlink')}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.5),
            ):
                return
            time.sleep(0.2)
        raise DeploymentError(f"the SuperLink did not listen within {timeout:.0f} s")

    def register_supernodes(self, keys: Iterable[NodeKeys], timeout: float = 60.0) -> None:
        """Register SuperNodes' public keys with the SuperLink (``flwr supernode register``).

        One ``flwr`` process a key, all at once (each spends about a second importing flwr).
        Needs :meth:`write_flower_config` first (the Control API connection).

        Raises
        ------
        DeploymentError
            If a registration fails or takes more than ``timeout`` seconds (all are stopped).
        """
        procs = [
            subprocess.Popen(
                [_bin("flwr"), "supernode", "register", str(k.public), "fedprivacy"],
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for k in keys
        ]
        deadline = time.monotonic() + timeout
        try:
            for proc in procs:
                out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
                if proc.returncode != 0:
                    raise DeploymentError(
                        f"flwr supernode register failed: {out.decode(errors='replace')[-500:]}"
                    )
        except subprocess.TimeoutExpired:
            raise DeploymentError(f"flwr supernode register took over {timeout:.0f} s") from None
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

    def start_supernode(
        self,
        user: int,
        *,
        root_certificates: Path | None = None,
        fault: str = "",
        keys: NodeKeys | None = None,
        node_config: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start the SuperNode of ``user`` (``partition-id``), trusting ``root_certificates``.

        ``keys``: the node authenticates with this key pair (SuperNode authentication);
        ``node_config``: its ``--node-config`` (default ``partition-id=USER``).
        Its runtime API on 127.0.0.1 answers only its own SuperExec, which holds a fresh secret
        (:attr:`runtime_secrets`, ``RUN/runtime-secrets/supernode-U.secret``, 0600;
        :mod:`fedprivacy.flower.deploy.runtime_auth`), in the SuperNode's process group.
        """
        node_config = node_config or f"partition-id={user}"
        if fault:
            node_config += f' fedprivacy-fault="{fault}"'
        port = free_port()
        secret = write_runtime_secret(self.run_dir / "runtime-secrets" / f"supernode-{user}.secret")
        self.runtime_ports[user], self.runtime_secrets[user] = port, secret
        # flower-supernode, its 3 s idle pull shortened (fedprivacy.flower.deploy.supernode_launch)
        launch = [sys.executable, "-m", "fedprivacy.flower.deploy.supernode_launch"]
        args = [*launch, "--superlink", self.address]
        args += ["--node-config", node_config]
        if self.tls is None:
            args += ["--insecure"]
        else:
            args += ["--root-certificates", str(root_certificates or self.tls.ca_cert)]
        if keys is not None:
            args += ["--auth-supernode-private-key", str(keys.private)]
            args += ["--auth-supernode-public-key", str(keys.public)]
        # flower-superexec whose ClientApps fork from the deployment's warm zygote
        superexec = [sys.executable, "-m", "fedprivacy.flower.deploy.warm_clientapp"]
        self._start_zygote()
        command = supernode_command(args, superexec, port, secret)
        return self._start(f"supernode-{user}", command)

    def _start_zygote(self) -> None:
        """Start the zygote every SuperNode's ClientApps fork from (once, before the first)."""
        if self._zygote is None:
            path = zygote_path()
            zygote = [
                sys.executable,
                "-m",
                "fedprivacy.flower.deploy.warm_clientapp",
                "--serve",
                path,
            ]
            wait_for_zygote(path, self._start("zygote", zygote))
            self._zygote = self.env[ZYGOTE_ENV] = path

    def kill(self, name: str) -> None:
        """SIGKILL process ``name`` and everything in its process group (a crash)."""
        proc = self.processes[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        """Stop every process started (SIGTERM, then SIGKILL after 5 s), close the logs.

        Then the stragglers (:meth:`stragglers`) until none has been seen for a while.
        """
        self.track()
        for proc in self.processes.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group's stragglers too
            proc.wait()
        self._stragglers.stop()
        self._watchdog.close()
        if self._zygote is not None:
            shutil.rmtree(Path(self._zygote).parent, ignore_errors=True)
        for f in self._logs:
            f.close()

    def track(self, every: float = 0.0) -> None:
        """Note the sessions of this deployment's processes (at most once in ``every`` s).

        Call it while the run is going: Ray's agents lose ``FLWR_HOME`` from their environ a
        moment after they start, and are then found by their session
        (:mod:`fedprivacy.flower.deploy.stragglers`).
        """
        self._stragglers.track(every)

    def stragglers(self) -> list[int]:
        """Live processes of this deployment that left its process groups (Linux only).

        Those carrying this run directory's ``FLWR_HOME`` and any process in a session where
        one of those was seen (see :meth:`track`).
        """
        return self._stragglers.find()

    def __enter__(self) -> LocalDeployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def write_flower_config(self, simulated_supernodes: int | None = None) -> None:
        """Flower's ``config.toml``: the SuperLink connection ``fedprivacy``.

        ``simulated_supernodes``: the number of virtual SuperNodes of a simulation SuperLink
        (one CPU each, Ray sized to this machine's cores).
        """
        conn: dict[str, Any] = {"address": self.address}
        if simulated_supernodes is not None:
            conn["options"] = {
                "num-supernodes": simulated_supernodes,
                "backend": {
                    "client-resources": {"num-cpus": 1},
                    "init-args": {"num-cpus": os.cpu_count() or 1},
                },
            }
        if self.tls is None:
            conn["insecure"] = True
        else:
            conn["root-certificates"] = str(self.tls.ca_cert.resolve())
        home = self.run_dir / "flwr-home"
        home.mkdir(parents=True, exist_ok=True)
        atomic_write_text(
            home / "config.toml",
            tomli_w.dumps({"superlink": {"default": "fedprivacy", "fedprivacy": conn}}),
        )

    def flwr_run(
        self, app_dir: Path, run_config: Path, name: str = "flwr-run"
    ) -> subprocess.Popen[bytes]:
        """``flwr run APP fedprivacy --run-config FILE --stream``: process ``name``, logged."""
        args = [_bin("flwr"), "run", str(app_dir), "fedprivacy", "--run-config", str(run_config)]
        return self._start(name, [*args, "--stream"])
