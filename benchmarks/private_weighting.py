"""Private weighting protocol (Protocol 1 of ULDP-FL): ours (gmpy2) against pure-Python Paillier.

What it measures, per setting ``(params P, users U, silos S)``:

* **ours** (``fedprivacy.secagg.private_weighting.SecureWeighting``, 2 threads, every message
  through its byte encoding, 3072-bit keys, ``P = 1e-10``, ``N_max = 2000``, clip 1.0; each silo
  draws its own discrete Gaussian noise of std ``SIGMA * CLIP / sqrt(S)`` on the plaintext grid,
  timed separately as "noise sampling" and included in its local encryption): the
  seconds of each phase, per party: key exchange (server: Paillier key generation; silo mean),
  blinded histogram (server; silo mean), the server's weight encryption, the silos' local
  encryption (the weighting of 2(b)-(c); local *training* is not included: the deltas are given)
  in round 0 (**cold**: one full exponentiation per user and the fixed-base tables; this is also
  the cost of every round with user-level sub-sampling, where the weights are re-encrypted each
  round) and in round 1 (**warm**: weights reused, sessions without sub-sampling), the silos'
  re-randomisation (``r^n`` per output ciphertext, data-independent, computed before the round),
  and the server's aggregation (product, CRT decryption, decoding). The maximum absolute
  deviation from the float64 plaintext aggregate is checked.
* **baseline** ("phe"): the same protocol on ``phe`` 1.5 with gmpy2 hidden (a subprocess where
  ``sys.modules["gmpy2"] = None`` before ``import phe``, so ``phe.util.HAVE_GMP`` is False and
  every modular exponentiation is Python's ``pow``), written the way the authors' code
  (``FumiyukiKato/uldp-fl``, ``secure_aggregation.py``) does it: ``max_int = n - 1``; per user
  ``enc * n_su``, ``* r_u``, ``* C_LCM`` (three scalar multiplications of an ``EncryptedNumber``);
  per parameter ``(E mod n) * enc`` (with ``max_int = n - 1`` phe treats every non-zero scalar as
  negative: a positive ``E`` costs a full-size exponent ``n - E``, a negative one a small exponent
  plus an inversion); noise and masks added as scalars; ``phe`` encryption and decryption.
  X25519, AES-GCM and the PRG are the same code as ours (their cost is negligible).
* **baseline, restructured** ("phe-tuned", main setting only): our algorithm (one full
  exponentiation per user, then ``E + 2^b`` small exponents per parameter, one inversion) on
  phe's pure-Python arithmetic (``phe.util.powmod``/``invert``), one core, no tables. It shows how
  much of the speed-up is the algorithm and how much gmpy2, tables and threads.

Per-silo time = the silo's local encryption (+ re-randomisation for ours, shown separately).
The main setting (16 params, 10 users, 3 silos) is measured in full for the baseline (setup and
one round, all silos). For the other settings the baseline's per-silo time is **extrapolated
linearly** from a measured subset: the authors' per-user work (``enc * n * r * C_LCM`` and the
``P`` multiplications) timed for one user at each distinct ``P``, times ``U``, plus the measured
per-silo noise and mask additions; the table marks these rows "extrapolated". The main setting
prints both, which checks the extrapolation.

Run::

    nice .venv/bin/python benchmarks/private_weighting.py --json /tmp/pw.json
    .venv/bin/python benchmarks/private_weighting.py --quick    # 1024-bit keys, a few seconds
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

PRECISION = 1e-10
CLIP = 1.0
NOISE_BOUND = 1e3
SIGMA = 5.0

MAIN = (16, 10, 3)
FIG11_PARAMS = [(p, 20, 3) for p in (16, 32, 64, 107)]
FIG11_USERS = [(16, u, 3) for u in (10, 20, 30, 40)]
FIG11_SILOS = [(16, 20, s) for s in (3, 6, 9)]
HEART = (14, 10, 4)  # Fed-Heart-Disease: Linear(13, 1) = 14 parameters, 4 silos, 10 users
TCGA = (40, 100, 6)  # Fed-TCGA-BRCA: Linear(39, 1) = 40 parameters, 6 silos, 100 users


# ---------------------------------------------------------------------- common
def make_inputs(params: int, users: int, silos: int, seed: int) -> dict[str, Any]:
    """Histogram with every n_su >= 1 (as in a 10,000-record artificial dataset), deltas, noise."""
    rng = np.random.default_rng(seed)
    hist = rng.integers(1, 40, size=(silos, users))
    deltas = [rng.uniform(-CLIP, CLIP, size=(users, params)) for _ in range(silos)]
    noise = [rng.normal(0.0, SIGMA * CLIP / math.sqrt(silos), size=params) for _ in range(silos)]
    return {"hist": hist, "deltas": deltas, "noise": noise}


def plaintext(inputs: dict[str, Any]) -> np.ndarray:
    hist = inputs["hist"].astype(np.float64)
    w = hist / hist.sum(axis=0, keepdims=True)
    return sum(w[s] @ inputs["deltas"][s] + inputs["noise"][s] for s in range(hist.shape[0]))


def machine_info() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import gmpy2
    import phe

    return {
        "cpu": model,
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "gmpy2": gmpy2.version(),
        "gmp": gmpy2.mp_version(),
        "phe": getattr(phe, "__version__", "1.5"),
        "platform": platform.platform(),
        "date": datetime.date.today().isoformat(),
        "load_average_start": os.getloadavg(),
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run with every timing replaced by its median over the runs."""
    out = dict(runs[0])
    out["setup"] = {k: float(np.median([r["setup"][k] for r in runs])) for k in runs[0]["setup"]}
    out["rounds"] = [
        {k: float(np.median([r["rounds"][i][k] for r in runs])) for k in runs[0]["rounds"][i]}
        for i in range(len(runs[0]["rounds"]))
    ]
    out["repeats"] = len(runs)
    return out


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- ours
def run_ours(
    setting: tuple[int, int, int],
    key_bits: int,
    seed: int,
    *,
    workers: int = 2,
    subsampling: bool = False,
) -> dict[str, Any]:
    from fedprivacy.secagg.private_weighting import SecureWeighting, phase_seconds

    params, users, silos = setting
    inputs = make_inputs(params, users, silos, seed)
    n_max = 2000 if key_bits >= 3072 else None
    wall = time.perf_counter()
    out: dict[str, Any] = {"setting": list(setting), "workers": workers, "subsampling": subsampling}
    noise_std = SIGMA * CLIP / math.sqrt(silos)
    with SecureWeighting(
        inputs["hist"],
        n_params=params,
        key_bits=key_bits,
        insecure_small_key=key_bits < 2048,
        precision=PRECISION,
        n_max=n_max,
        clip_bound=CLIP,
        noise_bound=NOISE_BOUND,
        subsampling=subsampling,
        workers=workers,
    ) as sw:
        sw.setup()
        assert sw.setup_outcome is not None
        out["setup"] = phase_seconds(sw.setup_outcome, cpu=True)
        rounds = []
        rng = np.random.default_rng(seed + 1)
        for r in range(2):
            sampled = rng.random(users) < 0.5 if subsampling else None
            agg, _ = sw.aggregate(r, inputs["deltas"], noise_std, sampled)
            assert sw.last_round is not None
            seconds = phase_seconds(sw.last_round, cpu=True)
            ref = sw.plaintext_reference(inputs["deltas"], sampled)
            seconds["max_abs_deviation"] = float(np.max(np.abs(agg - ref)))
            seconds["deviation_bound"] = (
                ((users if sampled is None else int(sampled.sum())) + silos) * PRECISION / 2
            )
            rounds.append(seconds)
        out["rounds"] = rounds
        assert sw.last_round is not None
        out["wire_bytes_round"] = sw.last_round.wire_bytes
        out["noise_sampling"] = time_noise_sampling(sw, noise_std)
    out["wall"] = time.perf_counter() - wall
    return out


def time_noise_sampling(sw: Any, noise_std: float) -> dict[str, float]:
    """Seconds of one silo's discrete Gaussian draw (part of its local encryption), per round."""
    from fedprivacy.secagg.private_weighting.noise import sample_noise

    p = sw.params
    start = time.perf_counter(), time.process_time()
    sample_noise(noise_std, p.precision, p.c_lcm, p.noise_bound, p.n_params)
    return {
        "wall": time.perf_counter() - start[0],
        "cpu": time.process_time() - start[1],
        "sigma_int_bits": int(Fraction(noise_std) * p.c_lcm / Fraction(p.precision)).bit_length(),
    }


# ---------------------------------------------------------------------- baseline (subprocess)
def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _elapsed(t: tuple[float, float]) -> list[float]:
    """[wall, cpu] seconds since ``t``."""
    wall, cpu = _now()
    return [wall - t[0], cpu - t[1]]


def _scaled(x: list[float], k: float) -> list[float]:
    return [v * k for v in x]


def _accumulate(acc: list[float], t: tuple[float, float]) -> None:
    for i, v in enumerate(_elapsed(t)):
        acc[i] += v


def _baseline_worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs in a fresh interpreter with gmpy2 hidden, so phe is pure Python."""
    sys.modules["gmpy2"] = None  # type: ignore[assignment]  # import gmpy2 -> ImportError
    import phe
    import phe.util

    if phe.util.HAVE_GMP:
        raise RuntimeError("gmpy2 is visible to phe: the baseline would not be pure Python")
    from fedprivacy.crypto.aead import open_sealed, seal
    from fedprivacy.crypto.keys import agree, derive_key
    from fedprivacy.crypto.keys import generate_keypair as x25519_keypair
    from fedprivacy.crypto.prg import MaskExpander

    def sample(key: bytes, n: int, count: int, units: bool) -> list[int]:
        bits, out, block = n.bit_length(), [], 0
        words = -(-bits // 64)
        top = (1 << bits) - 1
        while len(out) < count:
            raw = MaskExpander(8 * words, 64).expand(derive_key(key, "bench", block)).tobytes()
            block += 1
            for i in range(8):
                v = int.from_bytes(raw[i * 8 * words : (i + 1) * 8 * words], "little") & top
                if v < n and (not units or (v and math.gcd(v, n) == 1)):
                    out.append(v)
        return out[:count]

    def mask_totals(
        me: int, agreements: dict[int, bytes], n: int, count: int, tag: str
    ) -> list[int]:
        total = [0] * count
        for peer, secret in sorted(agreements.items()):
            m = sample(derive_key(secret, tag, min(me, peer), max(me, peer)), n, count, False)
            sign = 1 if me < peer else -1
            total = [(t + sign * v) % n for t, v in zip(total, m, strict=True)]
        return total

    mode = cfg["mode"]
    key_bits = cfg["key_bits"]
    c_lcm = math.lcm(*range(1, cfg["n_max"] + 1))
    result: dict[str, Any] = {"mode": mode, "have_gmp": phe.util.HAVE_GMP}

    if mode == "per_user":
        # one user's share of a silo's work at each P, plus a silo's fixed work and server costs
        p, q = cfg["p"], cfg["q"]
        pk = phe.PaillierPublicKey(p * q)
        sk = phe.PaillierPrivateKey(pk, p, q)
        pk.max_int = pk.n - 1
        n = pk.n
        rng = np.random.default_rng(cfg["seed"])
        t = _now()
        enc = [pk.encrypt(v) for v in sample(os.urandom(32), n, 2, True)]
        result["server_encrypt_per_user"] = _scaled(_elapsed(t), 0.5)
        r_u = sample(os.urandom(32), n, 1, True)[0]
        per_user, fixed = {}, {}
        for P in cfg["params"]:
            E = np.rint(rng.uniform(-CLIP, CLIP, size=P) / PRECISION).astype(np.int64)
            t = _now()
            w = enc[0] * 17
            w = w * r_u
            w = w * c_lcm
            acc = [int(e) % n * w for e in E]
            per_user[P] = _elapsed(t)
            Z = np.rint(rng.normal(0, SIGMA, size=P) / PRECISION).astype(np.int64)
            masks = sample(os.urandom(32), n, P, False)
            t = _now()
            acc = [(int(z) * c_lcm) % n + a for z, a in zip(Z, acc, strict=True)]
            acc = [m + a for m, a in zip(masks, acc, strict=True)]
            fixed[P] = _elapsed(t)
            if P == cfg["params"][0]:
                t = _now()
                for a in acc[:4]:
                    sk.raw_decrypt(a.ciphertext(be_secure=False))
                result["server_decrypt_per_param"] = _scaled(_elapsed(t), 0.25)
        result["per_user"] = {str(k): v for k, v in per_user.items()}
        result["silo_fixed"] = {str(k): v for k, v in fixed.items()}
        return result

    params, users, silos = cfg["setting"]
    inputs = make_inputs(params, users, silos, cfg["seed"])
    hist = inputs["hist"]
    phases_server: dict[str, list[float]] = {}  # phase -> [wall, cpu] seconds
    phases_silo: list[dict[str, list[float]]] = [{} for _ in range(silos)]

    # ---- 1(a)-(c): key exchange
    t = _now()
    if mode == "full":
        pk, sk = phe.generate_paillier_keypair(n_length=key_bits)
    else:
        pk = phe.PaillierPublicKey(cfg["p"] * cfg["q"])
        sk = phe.PaillierPrivateKey(pk, cfg["p"], cfg["q"])
    pk.max_int = pk.n - 1  # as the authors' code: every residue is a valid scalar
    n, n2 = pk.n, pk.nsquare
    phases_server["key_exchange"] = _elapsed(t)
    dh = []
    for s in range(silos):
        t = _now()
        dh.append(x25519_keypair())
        phases_silo[s]["key_exchange"] = _elapsed(t)
    agreements: list[dict[int, bytes]] = []
    for s in range(silos):
        t = _now()
        agreements.append(
            {v: agree(dh[s].private, dh[v].public_bytes) for v in range(silos) if v != s}
        )
        _accumulate(phases_silo[s]["key_exchange"], t)
    t = _now()
    seed = os.urandom(32)
    sealed = {v: seal(derive_key(agreements[0][v], "seed"), seed, b"seed") for v in range(1, silos)}
    _accumulate(phases_silo[0]["key_exchange"], t)
    for v in range(1, silos):
        t = _now()
        assert open_sealed(derive_key(agreements[v][0], "seed"), sealed[v], b"seed") == seed
        _accumulate(phases_silo[v]["key_exchange"], t)

    # ---- 1(d)-(f): blinded histograms, the server's sum and inverses
    blinds = sample(derive_key(seed, "blind"), n, users, True)
    received = []
    for s in range(silos):
        t = _now()
        masks = mask_totals(s, agreements[s], n, users, "hist")
        received.append(
            [(r * int(c) + m) % n for r, c, m in zip(blinds, hist[s], masks, strict=True)]
        )
        phases_silo[s]["blinded_histogram"] = _elapsed(t)
    t = _now()
    totals = [sum(col) % n for col in zip(*received, strict=True)]
    inverses = [phe.util.invert(b, n) for b in totals]
    phases_server["blinded_histogram"] = _elapsed(t)

    # ---- 2(a): the server encrypts the inverses (phe's encrypt: r^n mod n^2 in Python)
    t = _now()
    enc = [pk.encrypt(inv) for inv in inverses]
    phases_server["weights_encryption"] = _elapsed(t)

    # ---- 2(b): each silo weights its deltas in the encrypted domain
    offset_bits = int(math.ceil(CLIP / PRECISION)).bit_length()
    updates = []
    for s in range(silos):
        E = np.rint(inputs["deltas"][s] / PRECISION).astype(np.int64)
        Z = np.rint(inputs["noise"][s] / PRECISION).astype(np.int64)
        t = _now()
        if mode in ("full", "authors"):
            acc: list[Any] = [None] * params
            for u in range(users):
                w = enc[u] * int(hist[s, u])
                w = w * blinds[u]
                w = w * c_lcm
                for j in range(params):
                    term = int(E[u, j]) % n * w
                    acc[j] = term if acc[j] is None else acc[j] + term
            acc = [(int(z) * c_lcm) % n + a for z, a in zip(Z, acc, strict=True)]
            masks = mask_totals(s, agreements[s], n, params, "round")
            acc = [m + a for m, a in zip(masks, acc, strict=True)]
            out = [a.ciphertext(be_secure=False) for a in acc]
        else:  # tuned: our algorithm on phe's pure-Python arithmetic
            powmod, invert = phe.util.powmod, phe.util.invert
            offset = 1 << offset_bits
            ws = []
            for u in range(users):
                k = int(hist[s, u]) * blinds[u] % n * c_lcm % n
                ws.append(powmod(enc[u].ciphertext(be_secure=False), k, n2))
            q_all = 1
            for w in ws:
                q_all = q_all * powmod(w, offset, n2) % n2
            q_inv = invert(q_all, n2)
            masks = mask_totals(s, agreements[s], n, params, "round")
            out = []
            for j in range(params):
                c = q_inv
                for u in range(users):
                    c = c * powmod(ws[u], int(E[u, j]) + offset, n2) % n2
                plain = (int(Z[j]) * c_lcm + masks[j]) % n
                out.append(c * (1 + plain * n) % n2)
        phases_silo[s]["local_encryption"] = _elapsed(t)
        updates.append(out)

    # ---- 2(c): the server sums, decrypts and decodes
    t = _now()
    agg = []
    for j in range(params):
        total = phe.EncryptedNumber(pk, updates[0][j])
        for s in range(1, silos):
            total = total + phe.EncryptedNumber(pk, updates[s][j])
        m = sk.raw_decrypt(total.ciphertext(be_secure=False))
        m = m - n if m > n // 2 else m
        agg.append(m / c_lcm * PRECISION)
    phases_server["aggregation"] = _elapsed(t)
    result["max_abs_deviation"] = float(np.max(np.abs(np.array(agg) - plaintext(inputs))))
    result["server"] = phases_server
    result["silos"] = phases_silo
    return result


def run_baseline(cfg: dict[str, Any], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--baseline-worker", json.dumps(cfg)]
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"baseline worker failed:\n{proc.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = time.perf_counter() - start
    return out


# ---------------------------------------------------------------------- report
def mean_silo(phases: list[dict[str, list[float]]], name: str, cpu: bool = False) -> float:
    """Mean over silos of a baseline phase ([wall, cpu] pairs)."""
    return float(np.mean([p.get(name, [0.0, 0.0])[1 if cpu else 0] for p in phases]))


def report_baseline(baseline: dict[str, Any], ours: dict[str, Any], key_bits: int) -> None:
    full, tuned, per_user = baseline["full"], baseline["tuned"], baseline["per_user"]
    o = ours[str(MAIN)]
    st, r0, r1 = o["setup"], o["rounds"][0], o["rounds"][1]
    print("\n### Baseline (phe without gmpy2), main setting, measured in full (wall seconds)\n")
    print("| phase | phe (authors' pattern) | phe-tuned (our algorithm) | ours cold | ours warm |")
    print("|---|---|---|---|---|")
    fs, fl, ts, tl = full["server"], full["silos"], tuned["server"], tuned["silos"]
    rows: list[tuple[str, float | None, float | None, float, float | None]] = [
        ("key exchange, server", fs["key_exchange"][0], None, st["key_exchange_server"], None),
        (
            "key exchange, silo (mean)",
            mean_silo(fl, "key_exchange"),
            None,
            st["key_exchange_silo_mean"],
            None,
        ),
        (
            "blinded histogram, server",
            fs["blinded_histogram"][0],
            None,
            st["blinded_histogram_server"],
            None,
        ),
        (
            "blinded histogram, silo (mean)",
            mean_silo(fl, "blinded_histogram"),
            None,
            st["blinded_histogram_silo_mean"],
            None,
        ),
        (
            "weights encryption, server",
            fs["weights_encryption"][0],
            ts["weights_encryption"][0],
            r0["weights_encryption_server"],
            r1["weights_encryption_server"],
        ),
        (
            "local encryption, silo (mean)",
            mean_silo(fl, "local_encryption"),
            mean_silo(tl, "local_encryption"),
            r0["local_encryption_silo_mean"],
            r1["local_encryption_silo_mean"],
        ),
        (
            "rerandomisation, silo (mean, offline)",
            0.0,
            0.0,
            r0.get("rerandomisation_silo_mean", 0.0),
            r1.get("rerandomisation_silo_mean", 0.0),
        ),
        (
            "aggregation, server",
            fs["aggregation"][0],
            ts["aggregation"][0],
            r0["aggregation_server"],
            r1["aggregation_server"],
        ),
    ]
    for name, a, b, c, d in rows:
        cells = [fmt(x) if x is not None else "-" for x in (a, b, c, d)]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        f"\nBaseline max abs deviation {full['max_abs_deviation']:.1e} (phe), "
        f"{tuned['max_abs_deviation']:.1e} (phe-tuned); baseline wall {full['wall']:.1f} s."
    )

    print(
        "\n### Per-silo speed-up: baseline local encryption / ours (wall clock, and CPU time of "
        "all threads in brackets)\n"
    )
    print(
        "| setting | P | U | S | baseline s/silo | how | ours cold online | ours warm online | "
        "ours rerand. | cold online x | cold total x | warm online x | warm total x |"
    )
    print("|" + "---|" * 13)
    for _key, o in ours.items():
        P, U, S = o["setting"]
        pu, fx = per_user["per_user"][str(P)], per_user["silo_fixed"][str(P)]
        est = [U * pu[0] + fx[0], U * pu[1] + fx[1]]
        rows_b = [(est, "extrapolated")]
        if tuple(o["setting"]) == MAIN:
            measured = [mean_silo(fl, "local_encryption"), mean_silo(fl, "local_encryption", True)]
            rows_b.insert(0, (measured, "measured"))
        r0, r1 = o["rounds"]
        ours_w = (
            r0["local_encryption_silo_mean"],
            r1["local_encryption_silo_mean"],
            r1.get("rerandomisation_silo_mean", 0.0),
        )
        ours_c = (
            r0["local_encryption_silo_mean_cpu"],
            r1["local_encryption_silo_mean_cpu"],
            r1.get("rerandomisation_silo_mean_cpu", 0.0),
        )
        for b, how in rows_b:

            def ratios(base: float, v: tuple[float, float, float]) -> list[float]:
                cold, warm, rr = v
                return [base / cold, base / (cold + rr), base / warm, base / (warm + rr)]

            xw, xc = ratios(b[0], ours_w), ratios(b[1], ours_c)
            cells = " | ".join(f"{w:.0f}x ({c:.0f}x)" for w, c in zip(xw, xc, strict=True))
            print(
                f"| {o['label']} | {P} | {U} | {S} | {fmt(b[0])} ({fmt(b[1])}) | {how} | "
                f"{fmt(ours_w[0])} ({fmt(ours_c[0])}) | {fmt(ours_w[1])} ({fmt(ours_c[1])}) | "
                f"{fmt(ours_w[2])} ({fmt(ours_c[2])}) | {cells} |"
            )
    o = ours[str(MAIN)]
    r0, r1 = o["rounds"]
    for cpu in (False, True):
        sfx = "_cpu" if cpu else ""
        b_main = mean_silo(fl, "local_encryption", cpu)
        b_tuned = mean_silo(tl, "local_encryption", cpu)
        cold = r0[f"local_encryption_silo_mean{sfx}"]
        warm = r1[f"local_encryption_silo_mean{sfx}"]
        rr = r1.get(f"rerandomisation_silo_mean{sfx}", 0.0)
        print(
            f"\nTARGET ({'CPU time' if cpu else 'wall clock'}; 16 params, 10 users, 3 silos, "
            f"{key_bits}-bit): baseline {fmt(b_main)} s per silo (measured) vs ours "
            f"{fmt(cold)} s cold / {fmt(warm)} s warm online, {fmt(rr)} s re-randomisation: "
            f"online {b_main / cold:.0f}x cold / {b_main / warm:.0f}x warm; with "
            f"re-randomisation {b_main / (cold + rr):.0f}x / {b_main / (warm + rr):.0f}x. Against "
            f"phe-tuned ({fmt(b_tuned)} s): online {b_tuned / cold:.0f}x / {b_tuned / warm:.0f}x."
        )


def fmt(x: float) -> str:
    return f"{x:.3f}" if x < 100 else f"{x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline-worker", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="1024-bit keys, three settings")
    ap.add_argument("--key-bits", type=int, default=3072)
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--main-only", action="store_true", help="only the main (target) setting")
    ap.add_argument(
        "--repeats", type=int, default=1, help="runs of ours per setting; medians are reported"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.baseline_worker:
        print(json.dumps(_baseline_worker(json.loads(args.baseline_worker))))
        return

    key_bits = 1024 if args.quick else args.key_bits
    n_max = 2000 if key_bits >= 3072 else 200
    settings: list[tuple[str, tuple[int, int, int]]] = [("main (target)", MAIN)]
    if args.main_only:
        pass
    elif args.quick:
        settings += [("Fig. 11 params", (32, 10, 3)), ("Heart Disease-like", HEART)]
    else:
        settings += [("Fig. 11 params", s) for s in FIG11_PARAMS]
        settings += [("Fig. 11 users", s) for s in FIG11_USERS]
        settings += [("Fig. 11 silos", s) for s in FIG11_SILOS]
        settings += [("Heart Disease-like", HEART), ("TCGA-BRCA-like", TCGA)]
        unique: dict[tuple[int, int, int], str] = {}
        for label, setting in settings:
            unique.setdefault(setting, label)  # first label wins, e.g. (16, 20, 3)
        settings = [(label, setting) for setting, label in unique.items()]
    info = machine_info()
    log(f"machine: {info}")

    ours: dict[str, Any] = {}
    for label, setting in settings:
        log(f"ours {label} {setting} ...")
        runs = [run_ours(setting, key_bits, args.seed + i) for i in range(args.repeats)]
        ours[str(setting)] = median_run(runs)
        ours[str(setting)]["label"] = label
    log("ours, main setting, one thread and with sub-sampling ...")
    ours_one_thread = run_ours(MAIN, key_bits, args.seed, workers=1)
    ours_subsampling = run_ours(MAIN, key_bits, args.seed, subsampling=True)

    baseline: dict[str, Any] = {}
    if not args.skip_baseline:
        from fedprivacy.crypto.paillier import generate_keypair

        key = generate_keypair(key_bits, insecure_small_key=key_bits < 2048)
        common = {"key_bits": key_bits, "n_max": n_max, "seed": args.seed}
        log("baseline (phe, pure Python) main setting, full protocol ...")
        baseline["full"] = run_baseline({**common, "mode": "full", "setting": list(MAIN)}, 3000)
        log(f"  {baseline['full']['wall']:.1f} s")
        log("baseline restructured (phe-tuned) main setting ...")
        baseline["tuned"] = run_baseline(
            {**common, "mode": "tuned", "setting": list(MAIN), "p": key.p, "q": key.q}, 3000
        )
        distinct = sorted({s[0] for _, s in settings})
        log(f"baseline per-user subset for P in {distinct} (extrapolation) ...")
        baseline["per_user"] = run_baseline(
            {**common, "mode": "per_user", "params": distinct, "p": key.p, "q": key.q}, 3000
        )

    # ------------------------------------------------------------------ tables
    print(
        f"\nMachine: {info['cpu']}, {info['nproc']} cores; Python {info['python']}, gmpy2 "
        f"{info['gmpy2']} ({info['gmp']}), phe {info['phe']}; {info['date']}; "
        f"{key_bits}-bit keys, P = {PRECISION}, N_max = {n_max}, clip {CLIP}; "
        f"load average at start {tuple(round(x, 2) for x in info['load_average_start'])}."
    )
    print("\n### Ours: seconds per phase (silo columns are the mean over silos)\n")
    print(
        "| setting | P | U | S | key exch. server | key exch. silo | blinded hist. server | "
        "blinded hist. silo | weights enc. server (r0) | local enc. silo cold (r0) | "
        "local enc. silo warm (r1) | rerandomisation silo | aggregation server | "
        "max abs dev (bound) |"
    )
    print("|" + "---|" * 14)
    for _key, o in ours.items():
        P, U, S = o["setting"]
        st, r0, r1 = o["setup"], o["rounds"][0], o["rounds"][1]
        print(
            f"| {o['label']} | {P} | {U} | {S} | {fmt(st['key_exchange_server'])} | "
            f"{fmt(st['key_exchange_silo_mean'])} | {fmt(st['blinded_histogram_server'])} | "
            f"{fmt(st['blinded_histogram_silo_mean'])} | {fmt(r0['weights_encryption_server'])} | "
            f"{fmt(r0['local_encryption_silo_mean'])} | {fmt(r1['local_encryption_silo_mean'])} | "
            f"{fmt(r1.get('rerandomisation_silo_mean', 0.0))} | {fmt(r1['aggregation_server'])} | "
            f"{max(r0['max_abs_deviation'], r1['max_abs_deviation']):.1e} "
            f"({r0['deviation_bound']:.1e}) |"
        )
    print("\n### Silo noise: discrete Gaussian draw per silo and round (in local enc.)\n")
    print("| setting | P | sigma_int bits | sampling wall s | local enc. silo warm (r1) s |")
    print("|---|---|---|---|---|")
    for _key, o in ours.items():
        ns, r1 = o["noise_sampling"], o["rounds"][1]
        print(
            f"| {o['label']} | {o['setting'][0]} | {ns['sigma_int_bits']} | {ns['wall']:.4f} | "
            f"{fmt(r1['local_encryption_silo_mean'])} |"
        )
    for name, o in (("one thread", ours_one_thread), ("sub-sampling q=0.5", ours_subsampling)):
        r0, r1 = o["rounds"]
        print(
            f"\nMain setting, {name}: local enc. silo round 0 "
            f"{fmt(r0['local_encryption_silo_mean'])} s, round 1 "
            f"{fmt(r1['local_encryption_silo_mean'])} s; rerandomisation "
            f"{fmt(r1.get('rerandomisation_silo_mean', 0.0))} s; weights enc. server round 1 "
            f"{fmt(r1['weights_encryption_server'])} s; aggregation {fmt(r1['aggregation_server'])}"
            f" s; max abs dev {r1['max_abs_deviation']:.1e}."
        )

    if baseline:
        report_baseline(baseline, ours, key_bits)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": info,
                    "key_bits": key_bits,
                    "ours": ours,
                    "ours_one_thread": ours_one_thread,
                    "ours_subsampling": ours_subsampling,
                    "baseline": baseline,
                },
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
