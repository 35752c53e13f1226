"""Idle CPU of a local deployment's SuperNodes: Flower's polling, short polling, tuned polling.

Starts a SuperLink and K SuperNodes (``LocalDeployment``, TLS, no run), waits for them to
settle, and measures the CPU seconds that every process of the deployment uses in a window of
idle time (``/proc/PID/stat``: user + system, children of the process groups included). The
baseline in the same run is Flower's own polling (a 3 s idle pull, the SuperExec's 1 s task
poll); then the short intervals at any size (0.5 s, 0.25 s), and ``polling(K)``, what
``LocalDeployment`` uses (short up to 10 nodes, longer above).

Run::

    .venv/bin/python benchmarks/supernode_idle.py --k 6,10,50 --window 20 --settle 60
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from fedprivacy.flower.deploy.deploy import terminate_as_interrupt
from fedprivacy.flower.deploy.local_deployment import LocalDeployment, polling

_TICK = os.sysconf("SC_CLK_TCK")


def _groups_cpu(groups: set[int]) -> float:
    """CPU seconds so far of every live process in the process groups ``groups``."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) in groups:  # pgrp
            total += (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
    return total


#: The arms: Flower's own intervals, the short ones at any size, and ``polling(K)``.
SETTINGS = {
    "Flower's": {"FEDPRIVACY_SUPERNODE_IDLE_PULL": "3", "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "1"},
    "short": {"FEDPRIVACY_SUPERNODE_IDLE_PULL": "0.5", "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.25"},
    "tuned": {},
}


def idle_cpu(k: int, setting: str, window: float, settle: float, work: Path) -> float:
    """CPU seconds a second of the whole deployment while idle."""
    for name in SETTINGS["short"]:
        os.environ.pop(name, None)
    os.environ.update(SETTINGS[setting])  # LocalDeployment keeps these; "tuned": polling(k)
    with LocalDeployment(work, nodes=k) as dep:
        dep.start_superlink()
        for u in range(k):
            dep.start_supernode(u)
        time.sleep(settle)
        groups = {p.pid for p in dep.processes.values()}
        before = _groups_cpu(groups)
        time.sleep(window)
        return (_groups_cpu(groups) - before) / window


def main() -> None:
    """Measure each K with each setting; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", default="6,10", help="SuperNodes, comma-separated (6,10)")
    parser.add_argument("--window", type=float, default=20.0, help="idle seconds measured (20)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to start up (15)")
    args = parser.parse_args()
    print(f"SuperNode idle CPU, {platform.node()}, {time.strftime('%Y-%m-%d %H:%M')}\n")
    print(
        "| K | polling | idle pull / SuperExec poll (s) | CPU % of one core (whole deployment) "
        "| per SuperNode | vs Flower's |"
    )
    print("|---|---|---|---|---|---|")
    with terminate_as_interrupt(), tempfile.TemporaryDirectory(prefix="idle-") as tmp:
        for k in [int(x) for x in args.k.split(",")]:
            base = None
            for setting in SETTINGS:
                cpu = idle_cpu(k, setting, args.window, args.settle, Path(tmp) / f"{k}-{setting}")
                base = cpu if base is None else base
                pulls = SETTINGS[setting] or polling(k)
                intervals = " / ".join(pulls.values())
                print(
                    f"| {k} | {setting} | {intervals} | {100 * cpu:.1f} | {100 * cpu / k:.2f} | "
                    f"{cpu / base:.2f}x |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
