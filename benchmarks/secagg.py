"""Secure aggregation cost: ours (SecAgg / SecAgg+) against a plaintext sum and Flower's SecAgg+.

What it measures, for one in-process round per configuration (``fedprivacy.secagg.run_round``,
every message through its byte encoding):

* **ours, SecAgg+** (``degree=default_degree(K)``, default threshold ``k // 2 + 1``): the mean
  total seconds of a client that completes the round (sum of its four stages), the server's total
  seconds, the server's *unmask* seconds (``result.seconds["reconstruct"]`` (Shamir
  reconstruction + key checks) ``+ result.seconds["unmask"]`` (mask regeneration + removal +
  decoding)), the max absolute error against the float64 sum of the aggregated users' vectors,
  and the megabytes on the wire;
* **plaintext baseline**, same run, same vectors: the time a server needs to sum the float64
  vectors of the users it receives (the aggregated ones) with numpy, the faster of ``np.sum`` of
  a freshly stacked array and a loop of ``np.add`` into an accumulator (best of N; the table says
  which), and the ratio ``ours server total / plaintext``;
* **ours, complete graph** (``degree=None``, the original SecAgg) in its own table, for K <= 200
  (and K = 500 with ``--grid all`` only if its predicted time, extrapolated quadratically in K
  from the largest K measured, is under ``--cap`` seconds, else "skipped");
* **Flower** ``flwr==1.42.0`` SecAgg+ through ``benchmarks/flower_secaggplus.py`` (only when
  ``import flwr`` works): the client total per client (sum of its four stage means), the server's
  unmask-stage seconds and the speed-up ``Flower server unmask / ours server unmask``. Flower
  runs with the same neighbourhood (``num_shares = k + 1`` counting the node itself, threshold
  ``k // 2 + 1``).

Inputs are synthetic vectors uniform in [-1, 1]. Ours quantises with
``FixedPointCodec.for_sum(clip=1.0, K, bits=32)``; Flower quantises differently (its defaults:
clipping range 8, quantisation range 2**22, modulus 2**32, stochastic rounding; float32 inputs),
so the error columns are not the same quantity. ``round(rate * K)`` users, chosen with the seed,
drop after sharing their keys and before sending their masked input (``Stage.MASKED_INPUT``), so
the server must regenerate their pairwise masks; the Flower driver drops the same number at the
same point. If the dropouts leave some secret with fewer than ``t`` shares the round aborts; the
next seed is then tried (the table notes it).

Grids (``--grid``): ``K`` (K in 10..500 at d = 1e4, 10 % dropout), ``d`` (d in 1e4..1e7 at
K = 20, 10 % dropout; Flower at 1e7 only if it fits in memory), ``dropout`` (0, 10 %, 30 % at
K = 100, d = 1e6, the target point: a ``TARGET`` line compares the server unmask times) and
``prg`` (throughput of ``MaskExpander.expand``/``add_into`` against a bare AES-256-CTR
``update_into`` of the same bytes, and numpy's legacy MT19937 ``randint``, what Flower uses for
masks). ``consistency`` (``--grid consistency``, also in ``all``): the same round with and
without the active-server consistency check (``run_round(signing_keys=...)``: every client
signs the aggregated set with a P-256 key, the server verifies each signature on arrival and
every client verifies the quorum of its members' signatures before unmasking) at K = 10, 50,
100, d = 1e4, 10 % dropout, on the complete graph and on SecAgg+, both runs interleaved in the
same process, with the ratios ``with / without``; the keys are generated beforehand (a node's
key is long-term).

``standard`` (default) runs the four grids without the two costly extras (d = 1e7, the
complete graph at K = 500); ``all`` runs everything (about 15 minutes on 2 cores). Every timed
configuration is repeated ``--repeats`` times (default: 3 when K <= 50 and d <= 1e5, else 1) and
the median is reported. Progress goes to stderr, Markdown tables to stdout, raw numbers to
``--json PATH``.

Run (Flower columns need the benchmark virtualenv; ``.venv`` works without them)::

    .venv-bench/bin/python benchmarks/secagg.py --grid all --json /tmp/secagg_bench.json
    .venv/bin/python benchmarks/secagg.py --quick
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cryptography
import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.prg import MaskExpander
from fedprivacy.crypto.signing import SigningKey
from fedprivacy.secagg import RoundAbortedError, SecAggParameters, Stage, run_round
from fedprivacy.secagg.consistency import consistency_quorum
from fedprivacy.secagg.params import default_degree

BITS = 32
CLIP = 1.0
SESSION_ID = bytes(range(16))
GRAPH_SEED = b"benchmarks/secagg.py"
MAX_SEED_TRIES = 5
TARGET = (100, 1_000_000, 0.1)
TARGET_SPEEDUP = 5.0
PRG_TARGET_RATIO = 2.0

_START = time.perf_counter()

Row = dict[str, Any]


# ---------------------------------------------------------------------------- helpers
def progress(text: str) -> None:
    """One progress line on stderr with the elapsed time."""
    print(f"[{time.perf_counter() - _START:7.1f} s] {text}", file=sys.stderr, flush=True)


def fmt(x: float | None, unit: str = "") -> str:
    """Three significant digits, or a dash."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return f"0{unit}"
    if 1e-3 <= abs(x) < 1e4:
        digits = max(0, 2 - math.floor(math.log10(abs(x))))
        return f"{x:.{digits}f}{unit}"
    return f"{x:.2e}{unit}"


def fmt_int(x: float) -> str:
    """``1e4``-style for powers of ten, else the integer."""
    n = int(x)
    e = round(math.log10(n)) if n > 0 else 0
    return f"1e{e}" if n == 10**e and n >= 1000 else str(n)


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    return float(statistics.median(values))


def best_of(fn: Callable[[], object], budget_s: float = 0.5, min_reps: int = 3) -> float:
    """Best wall time of ``fn`` over at least ``min_reps`` calls, more while under the budget."""
    best = math.inf
    spent = 0.0
    reps = 0
    while reps < min_reps or (spent < budget_s and reps < 1000):
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        best = min(best, dt)
        spent += dt
        reps += 1
    return best


def machine_info() -> dict[str, Any]:
    """CPU model, core count and library versions."""
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu": model,
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cryptography": cryptography.__version__,
        "platform": platform.platform(),
    }
    return info


def mem_available_bytes() -> int:
    """``MemAvailable`` of /proc/meminfo (or 8 GiB when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 * 2**30


def load_flower() -> Any | None:
    """The Flower driver module, or ``None`` when ``flwr`` cannot be imported."""
    try:
        importlib.import_module("flwr")
    except ImportError:
        return None
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module("flower_secaggplus")


# ---------------------------------------------------------------------------- inputs
def make_updates(num_users: int, dimension: int, seed: int) -> dict[int, np.ndarray]:
    """User ``i``'s float64 vector, uniform in [-1, 1] (the Flower driver's stream, in float64)."""
    return {
        u: np.random.default_rng([seed, u]).uniform(-1.0, 1.0, dimension) for u in range(num_users)
    }


def dropped_users(num_users: int, rate: float, seed: int) -> list[int]:
    """``round(rate * K)`` users chosen with ``seed``."""
    count = round(rate * num_users)
    rng = np.random.default_rng([seed, 2**31])
    return sorted(int(u) for u in rng.choice(num_users, size=count, replace=False))


def plaintext_sum_seconds(vectors: list[np.ndarray]) -> tuple[float, str]:
    """Faster of ``np.sum(np.stack(v), axis=0)`` and an ``np.add`` loop (best of N)."""

    def stacked() -> np.ndarray:
        total: np.ndarray = np.sum(np.stack(vectors), axis=0)
        return total

    def loop() -> np.ndarray:
        acc = vectors[0].copy()
        for v in vectors[1:]:
            np.add(acc, v, out=acc)
        return acc

    budget = 0.3
    t_loop = best_of(loop, budget)
    t_stack = best_of(stacked, budget)
    return (t_loop, "add loop") if t_loop <= t_stack else (t_stack, "stack+sum")


# ---------------------------------------------------------------------------- measurements
@dataclass
class Config:
    """One point of a grid."""

    grid: str
    num_users: int
    dimension: int
    dropout: float
    repeats: int
    complete: bool = True  # also run the complete graph
    flower: bool = True  # also run Flower
    skip_notes: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return (
            f"K={self.num_users} d={fmt_int(self.dimension)} dropout={self.dropout:.0%} "
            f"x{self.repeats}"
        )


def round_setup(
    num_users: int, dimension: int, rate: float, degree: int | None, seed: int
) -> tuple[dict[int, np.ndarray], dict[int, Stage], SecAggParameters]:
    """The updates, the dropouts before the masked input and the parameters of one round."""
    updates = make_updates(num_users, dimension, seed)
    drop = {u: Stage.MASKED_INPUT for u in dropped_users(num_users, rate, seed)}
    params = SecAggParameters.create(
        SESSION_ID,
        0,
        list(range(num_users)),
        dimension,
        FixedPointCodec.for_sum(CLIP, num_users, BITS),
        degree=degree,
        graph_seed=GRAPH_SEED + seed.to_bytes(4, "big"),
    )
    return updates, drop, params


def run_ours(
    num_users: int, dimension: int, rate: float, degree: int | None, repeats: int, seed: int
) -> Row:
    """Median over ``repeats`` rounds of our protocol, plus the plaintext baseline."""
    tries: list[int] = []
    for attempt in range(MAX_SEED_TRIES):
        s = seed + attempt
        updates, drop, params = round_setup(num_users, dimension, rate, degree, s)
        raw: dict[str, list[float]] = {
            k: []
            for k in (
                "client_s",
                "server_s",
                "server_unmask_s",
                "reconstruct_s",
                "unmask_s",
                "max_abs_error",
                "wire_mb",
                "wall_s",
            )
        }
        stages: list[dict[str, float]] = []
        try:
            aggregated: tuple[int, ...] = ()
            for _ in range(repeats):
                t0 = time.perf_counter()
                out = run_round(params, updates, dropouts=drop)
                wall = time.perf_counter() - t0
                res = out.result
                aggregated = res.aggregated
                plain = updates[aggregated[0]].copy()
                for u in aggregated[1:]:
                    np.add(plain, updates[u], out=plain)
                raw["client_s"].append(float(np.mean([out.client_seconds[u] for u in aggregated])))
                raw["server_s"].append(out.server_seconds)
                raw["reconstruct_s"].append(res.seconds["reconstruct"])
                raw["unmask_s"].append(res.seconds["unmask"])
                raw["server_unmask_s"].append(res.seconds["reconstruct"] + res.seconds["unmask"])
                raw["max_abs_error"].append(float(np.max(np.abs(res.sum - plain))))
                raw["wire_mb"].append(out.wire_bytes / 1e6)
                raw["wall_s"].append(wall)
                stages.append(dict(res.seconds))
        except RoundAbortedError as exc:
            tries.append(s)
            progress(f"    round aborted with seed {s} ({exc}); trying seed {s + 1}")
            continue
        plain_s, plain_how = plaintext_sum_seconds([updates[u] for u in aggregated])
        row: Row = {k: median(v) for k, v in raw.items()}
        row.update(
            raw=raw,
            server_stage_seconds=stages,
            plaintext_s=plain_s,
            plaintext_method=plain_how,
            server_over_plaintext=row["server_s"] / plain_s,
            degree=degree,
            threshold=params.threshold,
            num_aggregated=len(aggregated),
            num_dropped=len(drop),
            seed=s,
            aborted_seeds=tries,
        )
        return row
    return {"skipped": f"aborted with seeds {tries}", "aborted_seeds": tries}


def run_flower(
    flower: Any, num_users: int, dimension: int, rate: float, repeats: int, seed: int
) -> Row:
    """Median over ``repeats`` Flower SecAgg+ rounds (same neighbourhood as ours)."""
    tries: list[int] = []
    for attempt in range(MAX_SEED_TRIES):
        s = seed + attempt
        runs: list[dict[str, float]] = []
        walls: list[float] = []
        try:
            for _ in range(repeats):
                t0 = time.perf_counter()
                runs.append(flower.run_flower_round(num_users, dimension, rate, seed=s))
                walls.append(time.perf_counter() - t0)
        except RuntimeError as exc:
            tries.append(s)
            progress(f"    Flower round failed with seed {s} ({exc}); trying seed {s + 1}")
            continue
        stage_keys = (
            "client_setup_s",
            "client_share_keys_s",
            "client_masked_input_s",
            "client_unmask_s",
        )
        row: Row = {k: median([r[k] for r in runs]) for k in runs[0]}
        row["client_s"] = median([sum(r[k] for k in stage_keys) for r in runs])
        row.update(raw=runs, wall_s=median(walls), seed=s, aborted_seeds=tries)
        return row
    return {"skipped": f"failed with seeds {tries}", "aborted_seeds": tries}


def flower_fits(num_users: int, dimension: int) -> tuple[bool, str]:
    """Whether the Flower driver's peak memory (estimated) fits in 70 % of the free memory."""
    # float32 inputs + int64 masked vectors held by the server + ~8 int64 working vectors
    need = num_users * dimension * (4 + 8 + 8) + 8 * dimension * 8
    avail = mem_available_bytes()
    return need <= 0.7 * avail, f"needs ~{need / 2**30:.1f} GiB of {avail / 2**30:.1f} GiB free"


def run_config(
    cfg: Config, flower: Any | None, seed: int, cap_s: float, history: dict[str, list[Row]]
) -> Row:
    """Run ours (SecAgg+ and complete graph) and Flower on one configuration."""
    k = default_degree(cfg.num_users)
    out: Row = {
        "grid": cfg.grid,
        "K": cfg.num_users,
        "d": cfg.dimension,
        "dropout": cfg.dropout,
        "repeats": cfg.repeats,
        "k": k,
    }
    t = time.perf_counter()
    out["ours_plus"] = run_ours(cfg.num_users, cfg.dimension, cfg.dropout, k, cfg.repeats, seed)
    progress(f"{cfg.grid}: {cfg.label} ours SecAgg+ (k={k}): {time.perf_counter() - t:.1f} s")

    if cfg.complete:
        prev = [
            r
            for r in history.get(cfg.grid, [])
            if r["d"] == cfg.dimension and "wall_s" in r.get("ours_complete", {})
        ]
        predicted = None
        if prev:
            ref = max(prev, key=lambda r: r["K"])
            scale = (cfg.num_users / ref["K"]) ** 2 * (cfg.repeats / ref["repeats"])
            predicted = ref["ours_complete"]["wall_s"] * ref["repeats"] * scale
        if predicted is not None and predicted > cap_s:
            why = (
                f"skipped: predicted ~{predicted:.0f} s (K={ref['K']} took "
                f"{ref['ours_complete']['wall_s']:.1f} s, x (K/{ref['K']})^2) > cap {cap_s:.0f} s"
            )
            out["ours_complete"] = {"skipped": why, "predicted_s": predicted}
            progress(f"{cfg.grid}: {cfg.label} ours complete graph {why}")
        else:
            t = time.perf_counter()
            out["ours_complete"] = run_ours(
                cfg.num_users, cfg.dimension, cfg.dropout, None, cfg.repeats, seed
            )
            progress(f"{cfg.grid}: {cfg.label} ours complete: {time.perf_counter() - t:.1f} s")
    else:
        out["ours_complete"] = {"skipped": cfg.skip_notes.get("complete", "skipped")}

    if flower is not None:
        fits, mem_note = flower_fits(cfg.num_users, cfg.dimension)
        if not cfg.flower:
            out["flower"] = {"skipped": cfg.skip_notes.get("flower", "skipped")}
        elif not fits:
            out["flower"] = {"skipped": f"skipped: does not fit in memory ({mem_note})"}
            progress(f"{cfg.grid}: {cfg.label} Flower {out['flower']['skipped']}")
        else:
            t = time.perf_counter()
            out["flower"] = run_flower(
                flower, cfg.num_users, cfg.dimension, cfg.dropout, cfg.repeats, seed
            )
            progress(f"{cfg.grid}: {cfg.label} Flower: {time.perf_counter() - t:.1f} s")
        fl, ours = out["flower"], out["ours_plus"]
        if "server_unmask_s" in fl and "server_unmask_s" in ours:
            out["speedup_unmask"] = fl["server_unmask_s"] / ours["server_unmask_s"]
    history.setdefault(cfg.grid, []).append(out)
    return out


# ---------------------------------------------------------------------------- consistency check
CONSISTENCY_STAGES = ("start_consistency", "receive_consistency", "finish_consistency")


def run_consistency(
    num_users: int, dimension: int, rate: float, degree: int | None, repeats: int, seed: int
) -> Row:
    """The same round with and without the consistency check, interleaved; medians and ratios."""
    updates, drop, params = round_setup(num_users, dimension, rate, degree, seed)
    keys = {u: SigningKey.generate() for u in range(num_users)}
    raw: dict[str, dict[str, list[float]]] = {"plain": {}, "checked": {}}
    stage_s: list[float] = []
    for i in range(repeats):
        order = ("plain", "checked") if i % 2 == 0 else ("checked", "plain")
        for name in order:
            servers: list[Any] = []
            t0 = time.perf_counter()
            out = run_round(
                params,
                updates,
                dropouts=drop,
                observer=servers.append,
                signing_keys=keys if name == "checked" else None,
            )
            wall = time.perf_counter() - t0
            agg = out.result.aggregated
            sample = {
                "client_s": float(np.mean([out.client_seconds[u] for u in agg])),
                "server_s": out.server_seconds,
                "wire_mb": out.wire_bytes / 1e6,
                "wall_s": wall,
            }
            for key, value in sample.items():
                raw[name].setdefault(key, []).append(value)
            if name == "checked":
                stage_s.append(sum(servers[0].seconds.get(k, 0.0) for k in CONSISTENCY_STAGES))
    row: Row = {
        "K": num_users,
        "d": dimension,
        "dropout": rate,
        "degree": degree,
        "threshold": params.threshold,
        "quorum": consistency_quorum(params),
        "repeats": repeats,
        "aggregated": len(agg),
        "server_consistency_s": median(stage_s),
        "raw": raw,
    }
    for name in ("plain", "checked"):
        row[name] = {k: median(v) for k, v in raw[name].items()}
    for key in ("client_s", "server_s", "wire_mb", "wall_s"):
        row[f"{key}_ratio"] = row["checked"][key] / row["plain"][key]
    return row


def table_consistency(rows: list[Row]) -> list[str]:
    """Without / with the check, and the ratios."""
    head = [
        "graph",
        "K",
        "t / quorum",
        "client s (without / with)",
        "ratio",
        "server s (without / with)",
        "ratio",
        "server check stage s",
        "wire MB (without / with)",
        "ratio",
        "round wall s (without / with)",
        "ratio",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        a, b = r["plain"], r["checked"]
        graph = "complete" if r["degree"] is None else f"SecAgg+ k={r['degree']}"
        cells = [graph, str(r["K"]), f"{r['threshold']} / {r['quorum']}"]
        for key in ("client_s", "server_s", "wire_mb", "wall_s"):
            cells += [f"{fmt(a[key])} / {fmt(b[key])}", fmt(r[f"{key}_ratio"], "x")]
            if key == "server_s":
                cells.append(fmt(r["server_consistency_s"]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def consistency_grid(quick: bool, forced: int | None, seed: int) -> list[Row]:
    """Run and print the consistency grid: K = 10, 50, 100 on both graphs, with / without."""
    sizes = [10, 20] if quick else [10, 50, 100]
    dim = 1_000 if quick else 10_000
    crows = []
    for degree_of in (lambda n: None, default_degree):
        for n in sizes:
            t = time.perf_counter()
            reps = forced or (1 if quick else 5 if n <= 50 else 3)
            crows.append(run_consistency(n, dim, 0.1, degree_of(n), reps, seed))
            progress(f"consistency: K={n} degree={degree_of(n)}: {time.perf_counter() - t:.1f} s")
    print(f"## Consistency check (d = {fmt_int(dim)}, dropout 10 %): with / without\n")
    print(
        "Same parameters, inputs and dropouts; the two rounds alternate. 'quorum' = signatures "
        "of members of S each client needs (a strict majority of the K participants, at "
        "least t). 'server check stage s' = the server's start_consistency + verifying each "
        "signature on arrival + finish_consistency; the clients' signing and verifying is in "
        "'client s' (mean over the aggregated users). Medians over the repeats.\n"
    )
    print("\n".join(table_consistency(crows)) + "\n")
    return crows


# ---------------------------------------------------------------------------- PRG
def run_prg(words: int, bits: int) -> Row:
    """Best-of-N seconds of expand, add_into, raw AES-256-CTR and (32 bits) MT19937 randint."""
    key = bytes(range(32))
    expander = MaskExpander(words, bits)
    nbytes = words * expander.dtype.itemsize
    zeros = bytearray(nbytes)
    buf = bytearray(nbytes + 16)
    acc = np.zeros(words, dtype=expander.dtype)
    nonce = bytes(16)

    def raw_aes() -> None:
        enc = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()
        enc.update_into(zeros, buf)

    def expand() -> None:
        expander.expand(key)

    def add_into() -> None:
        expander.add_into(acc, key)

    row: Row = {"words": words, "bits": bits, "bytes": nbytes}
    row["raw_aes_s"] = best_of(raw_aes)
    row["expand_s"] = best_of(expand)
    row["add_into_s"] = best_of(add_into)
    for name in ("raw_aes", "expand", "add_into"):
        row[f"{name}_gbps"] = nbytes / row[f"{name}_s"] / 1e9
    row["expand_over_raw"] = row["expand_s"] / row["raw_aes_s"]
    row["add_into_over_raw"] = row["add_into_s"] / row["raw_aes_s"]
    if bits == 32:

        def mt() -> None:
            np.random.RandomState(0).randint(0, 2**32, size=words)  # noqa: NPY002

        row["mt19937_s"] = best_of(mt, min_reps=2)
        row["mt19937_gbps"] = 4 * words / row["mt19937_s"] / 1e9
        row["mt19937_over_raw"] = row["mt19937_s"] / row["raw_aes_s"]
    return row


# ---------------------------------------------------------------------------- tables
def _cell(row: Row, key: str, unit: str = "") -> str:
    if "skipped" in row:
        return "-"
    return fmt(row.get(key), unit)


def table_plus(rows: list[Row], with_flower: bool) -> list[str]:
    """SecAgg+ against the plaintext sum and Flower."""
    head = [
        "K",
        "d",
        "dropout",
        "k / t",
        "ours client s",
        "ours server s",
        "plaintext sum s",
        "server / plaintext",
        "ours unmask s",
        "ours max err",
        "wire MB",
    ]
    if with_flower:
        head += ["Flower client s", "Flower unmask s", "Flower max err", "speed-up (unmask)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        o = r["ours_plus"]
        cells = [str(r["K"]), fmt_int(r["d"]), f"{r['dropout']:.0%}"]
        if "skipped" in o:
            cells += [f"{r['k']} / -", o["skipped"]] + ["-"] * 6
        else:
            note = f" (seed {o['seed']})" if o["aborted_seeds"] else ""
            cells += [
                f"{r['k']} / {o['threshold']}{note}",
                _cell(o, "client_s"),
                _cell(o, "server_s"),
                f"{fmt(o['plaintext_s'])} ({o['plaintext_method']})",
                fmt(o["server_over_plaintext"], "x"),
                _cell(o, "server_unmask_s"),
                _cell(o, "max_abs_error"),
                _cell(o, "wire_mb"),
            ]
        if with_flower:
            f = r.get("flower", {})
            if "skipped" in f:
                cells += [f["skipped"], "-", "-", "-"]
            else:
                note = f" (seed {f['seed']})" if f.get("aborted_seeds") else ""
                cells += [
                    _cell(f, "client_s"),
                    _cell(f, "server_unmask_s") + note,
                    _cell(f, "max_abs_error"),
                    fmt(r.get("speedup_unmask"), "x"),
                ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def table_complete(rows: list[Row]) -> list[str]:
    """Ours with the complete graph (the original SecAgg)."""
    head = [
        "K",
        "d",
        "dropout",
        "t",
        "client s",
        "server s",
        "server / plaintext",
        "unmask s",
        "max err",
        "wire MB",
        "unmask vs SecAgg+",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        o, p = r["ours_complete"], r["ours_plus"]
        cells = [str(r["K"]), fmt_int(r["d"]), f"{r['dropout']:.0%}"]
        if "skipped" in o:
            cells += ["-", o["skipped"]] + ["-"] * 6
        else:
            ratio = o["server_unmask_s"] / p["server_unmask_s"] if "server_unmask_s" in p else None
            note = f" (seed {o['seed']})" if o["aborted_seeds"] else ""
            cells += [
                f"{o['threshold']}{note}",
                fmt(o["client_s"]),
                fmt(o["server_s"]),
                fmt(o["server_s"] / p["plaintext_s"], "x") if "plaintext_s" in p else "-",
                fmt(o["server_unmask_s"]),
                fmt(o["max_abs_error"]),
                fmt(o["wire_mb"]),
                fmt(ratio, "x"),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def table_prg(rows: list[Row]) -> list[str]:
    """Mask expansion throughput."""
    head = [
        "words",
        "bits",
        "MB",
        "raw AES-CTR GB/s",
        "expand GB/s",
        "expand / raw time",
        "add_into GB/s",
        "add_into / raw time",
        "MT19937 randint GB/s (32-bit words)",
        "MT19937 / raw time",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        flag = "" if r["add_into_over_raw"] <= PRG_TARGET_RATIO else " (over 2x)"
        cells = [
            fmt_int(r["words"]),
            str(r["bits"]),
            fmt(r["bytes"] / 1e6),
            fmt(r["raw_aes_gbps"]),
            fmt(r["expand_gbps"]),
            fmt(r["expand_over_raw"], "x"),
            fmt(r["add_into_gbps"]),
            fmt(r["add_into_over_raw"], "x") + flag,
            fmt(r.get("mt19937_gbps")),
            fmt(r.get("mt19937_over_raw"), "x"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ---------------------------------------------------------------------------- grids
def auto_repeats(num_users: int, dimension: int, forced: int | None) -> int:
    """``--repeats`` if given, else 3 for small configurations and 1 for big ones."""
    if forced is not None:
        return forced
    return 3 if num_users <= 50 and dimension <= 100_000 else 1


def build_grids(
    names: list[str], quick: bool, full: bool, forced: int | None
) -> dict[str, list[Config]]:
    """The configurations of each selected grid."""
    grids: dict[str, list[Config]] = {}

    def cfg(grid: str, n: int, d: int, rate: float, **kw: Any) -> Config:
        return Config(grid, n, d, rate, auto_repeats(n, d, forced) if not quick else 1, **kw)

    if "K" in names:
        ks = [10, 20] if quick else [10, 50, 100, 200, 500]
        d = 1_000 if quick else 10_000
        grids["K"] = [
            cfg(
                "K",
                n,
                d,
                0.1,
                complete=n <= 200 or full,
                skip_notes={"complete": "skipped: K > 200 (run --grid all to try it)"},
            )
            for n in ks
        ]
    if "d" in names:
        ds = [1_000, 10_000] if quick else [10_000, 100_000, 1_000_000, 10_000_000]
        if not quick and not full:
            ds = ds[:-1]
        grids["d"] = [cfg("d", 10 if quick else 20, d, 0.1) for d in ds]
    if "dropout" in names:
        n, d = (10, 10_000) if quick else (100, 1_000_000)
        grids["dropout"] = [cfg("dropout", n, d, rate) for rate in (0.0, 0.1, 0.3)]
    return grids


def main(argv: list[str] | None = None) -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--grid",
        choices=["standard", "all", "K", "d", "dropout", "prg", "consistency"],
        default="standard",
        help="standard: the four grids without d=1e7 and the complete graph at K=500; all: "
        "everything; or one grid",
    )
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (~20 s)")
    parser.add_argument("--repeats", type=int, default=None, help="override the repeat rule")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cap",
        type=float,
        default=120.0,
        help="skip the complete graph where its predicted time exceeds this many seconds",
    )
    parser.add_argument("--json", type=Path, default=None, help="write all raw numbers here")
    args = parser.parse_args(argv)

    names = ["K", "d", "dropout", "prg"] if args.grid in ("standard", "all") else [args.grid]
    full = args.grid == "all"
    if full:
        names.append("consistency")
    info = machine_info()
    flower = load_flower()
    if flower is not None:
        info["flwr"] = importlib.import_module("flwr").__version__

    print("# Secure aggregation benchmark\n")
    print(
        f"Machine: {info['cpu']}, {info['nproc']} cores; Python {info['python']}, "
        f"numpy {info['numpy']}, cryptography {info['cryptography']}"
        + (f", flwr {info['flwr']}" if "flwr" in info else "")
        + "."
    )
    exe = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else "python"
    print(f"Command: `{exe} {' '.join(sys.argv)}`\n")
    print(
        f"Ours: bits={BITS}, clip={CLIP}, FixedPointCodec.for_sum; wire encoding on. SecAgg+ "
        "uses k = default_degree(K) neighbours and t = k // 2 + 1. Flower: num_shares = k + 1 "
        "(itself included), threshold k // 2 + 1, its own quantisation (clip 8, 2^22 levels, "
        "mod 2^32, float32 inputs). Dropouts leave before the masked-input stage. 'client s' = "
        "mean total of a client that completes the round; 'unmask s' = server reconstruct + "
        "unmask (ours), unmask stage (Flower); speed-up = Flower unmask / ours unmask "
        "(SecAgg+). Medians over the repeats.\n"
    )
    if flower is None:
        print("flwr not installed: Flower columns skipped\n")

    results: dict[str, Any] = {"machine": info, "args": vars(args) | {"json": str(args.json)}}
    history: dict[str, list[Row]] = {}
    titles = {
        "K": "K grid (d = {d}, dropout 10 %)",
        "d": "d grid (K = {K}, dropout 10 %)",
        "dropout": "dropout grid (K = {K}, d = {d})",
    }
    for grid, configs in build_grids(names, args.quick, full, args.repeats).items():
        rows = [run_config(c, flower, args.seed, args.cap, history) for c in configs]
        results[grid] = rows
        first = configs[0]
        title = titles[grid].format(K=first.num_users, d=fmt_int(first.dimension))
        print(f"## {title}: SecAgg+ vs plaintext sum" + (" vs Flower" if flower else "") + "\n")
        print("\n".join(table_plus(rows, flower is not None)) + "\n")
        print(f"### {title}: ours with the complete graph (SecAgg)\n")
        print("\n".join(table_complete(rows)) + "\n")
        sys.stdout.flush()
        if grid == "dropout":
            for r in rows:
                if (r["K"], r["d"], r["dropout"]) != TARGET:
                    continue
                ours = r["ours_plus"].get("server_unmask_s")
                fl = r.get("flower", {}).get("server_unmask_s")
                sp = r.get("speedup_unmask")
                line = (
                    f"TARGET K=100 d=1e6 dropout=10%: server unmask ours {fmt(ours)} s, "
                    f"Flower {fmt(fl) if fl is not None else 'n/a (flwr not installed)'} s, "
                    f"speed-up {fmt(sp)} x (target >= {TARGET_SPEEDUP:.0f}x)"
                )
                results["target"] = {"ours_s": ours, "flower_s": fl, "speedup": sp, "line": line}
                print(line + "\n")

    if "consistency" in names:
        results["consistency"] = consistency_grid(args.quick, args.repeats, args.seed)

    if "prg" in names:
        sizes = [10_000, 100_000] if args.quick else [10_000, 1_000_000, 10_000_000]
        prg_rows = []
        for words in sizes:
            for bits in (32, 64):
                t = time.perf_counter()
                prg_rows.append(run_prg(words, bits))
                progress(
                    f"prg: words={fmt_int(words)} bits={bits}: {time.perf_counter() - t:.1f} s"
                )
        results["prg"] = prg_rows
        print("## Mask expansion throughput (best of N, one core)\n")
        print(
            "raw AES-CTR = `Cipher(AES-256, CTR).encryptor().update_into` of the same bytes into "
            "a preallocated buffer (encryptor creation included, as in `MaskExpander`). Ratios are "
            f"time / raw AES time (target for add_into: <= {PRG_TARGET_RATIO:.0f}x). MT19937 = "
            "`np.random.RandomState(0).randint(0, 2**32, size=words)`, Flower's mask generator "
            "(int64 output), GB/s counted as 4 bytes per word.\n"
        )
        print("\n".join(table_prg(prg_rows)) + "\n")

    results["total_seconds"] = time.perf_counter() - _START
    progress(f"done in {results['total_seconds']:.1f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, default=_json_default))
        progress(f"wrote {args.json}")


def _json_default(obj: object) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


if __name__ == "__main__":
    main()
