"""In-process driver of Flower's SecAgg+ protocol (``flwr==1.42.0``), for timing it beside ours.

Runs only in the separate benchmark virtualenv ``.venv-bench`` (Flower is not a dependency of
``fedprivacy``; nothing under ``src/`` or ``tests/`` imports this file)::

    .venv-bench/bin/python benchmarks/flower_secaggplus.py --clients 100 --dimension 1000000 \
        --dropout 0.1

One round, no message transport: the messages/config dicts of the four stages are handed over in
memory. Clients are ``SecAggPlusState`` objects driven by Flower's own client stage functions;
the server side is a line-for-line copy of ``SecAggPlusWorkflow``'s computation (which needs a
``Grid``, a ``LegacyContext`` and a strategy to be called directly) built from Flower's own
primitives.

What is Flower's code and what is mirrored
------------------------------------------
Called as is (Flower 1.42.0):

* client, ``flwr/client/mod/secure_aggregation/secaggplus_mod.py``: ``SecAggPlusState``,
  ``check_configs``, ``_setup``, ``_share_keys``, ``_collect_masked_vectors``, ``_unmask``
  (everything ``secaggplus_mod`` does per stage except the ``Message``/``Context`` plumbing of
  lines 137-185 and the ``ConfigRecord`` round trip of the state);
* server, ``flwr/server/workflow/secure_aggregation/secaggplus_workflow.py``: the
  ``SecAggPlusWorkflow`` constructor (argument checks, defaults of ``max_weight``,
  ``clipping_range``, ``quantization_range``, ``modulus_range``), ``WorkflowState`` and
  ``SecAggPlusWorkflow._check_threshold``;
* primitives: ``combine_shares`` (``common/secure_aggregation/crypto/shamir.py``),
  ``generate_shared_key`` (``.../crypto/symmetric_encryption.py``), ``pseudo_rand_gen``
  (``.../secaggplus_utils.py``), ``factor_extract``, ``get_parameters_shape``,
  ``parameters_addition``, ``parameters_subtraction``, ``parameters_mod``
  (``.../ndarrays_arithmetic.py``), ``dequantize`` (``.../quantization.py``),
  ``bytes_to_private_key``/``bytes_to_public_key`` (``flwr/supercore/primitives/asymmetric.py``),
  ``bytes_to_ndarray``/``ndarrays_to_parameters`` (``flwr/compat/common/parameter.py``).

Mirrored from ``flwr/server/workflow/secure_aggregation/secaggplus_workflow.py`` (1.42.0):

* ``setup_stage`` lines 305-360 (``num_shares``/``threshold`` from int or float, ring of shuffled
  node ids, ``nid_to_neighbours``) and 391-398 (collect public keys). Only deviation: line 349's
  ``random.shuffle`` uses ``random.Random(seed)`` here, for reproducibility;
* ``share_keys_stage`` lines 408-413 (each node gets its active neighbours' public keys) and
  440-468 (routing of the encrypted shares to their destinations);
* ``collect_masked_vectors_stage`` lines 480-484 (configs sent) and 515-530 (sum and mod of the
  masked vectors, decoded with ``bytes_to_ndarray``);
* ``unmask_stage`` lines 551-561 (active/dead lists per node) and 588-650 (collect shares,
  ``combine_shares`` per sampled node, regenerate and remove the self mask of each active node
  and the pairwise masks of each dropped node with its neighbours, ``parameters_mod``,
  ``factor_extract``, ``dequantize``, offset and weight correction). Lines 652-676 (handing the
  result to ``Strategy.aggregate_fit``, history) are not reproduced.

The workflow outputs the weighted *average* ``sum_i w_i x_i / sum_i w_i``. Every client here
reports ``num_examples = max_weight`` (1000, Flower's default), so each weight ratio is exactly
1 (``q_ratio = quantization_range``, no precision lost to weighting) and the driver multiplies
the average by ``q_total_ratio / quantization_range`` (= the number of surviving clients) to get
the sum, which ``max_abs_error`` compares with the float64 sum of the survivors' float32 inputs.

Flower's defaults (``SecAggPlusWorkflow.__init__``, 1.42.0)
-----------------------------------------------------------
``clipping_range=8.0``, ``quantization_range=2**22``, ``modulus_range=2**32``,
``max_weight=1000.0``; masks are ``np.random.RandomState(seed32).randint(0, modulus_range - 1)``
int64 arrays (``pseudo_rand_gen``; the 32-byte seed is XOR-folded to 32 bits); quantisation is
stochastic rounding with the global ``np.random`` (seeded here with ``seed``); keys are ECDH on
SECP384R1 + HKDF-SHA256; shares are encrypted with Fernet; Shamir sharing is PyCryptodome's over
GF(2^128) in 16-byte chunks.

``num_shares`` and ``reconstruction_threshold`` have **no default** in 1.42.0: both are required
arguments of ``SecAggPlusWorkflow`` (Flower's example app uses 3 and 2, which does not survive
30 % dropout; ``SecAggWorkflow`` passes ``num_shares=1.0``, the complete graph). With ``None``
this driver therefore uses the SecAgg+ degree of ``fedprivacy.secagg.params.default_degree``,
``k = min(max(4, 2 * ceil(log2 K)), K - 1)`` neighbours, i.e. ``num_shares = k + 1`` (Flower
counts the node itself), and ``reconstruction_threshold = k // 2 + 1``; when ``k + 1 >= K`` it
passes ``num_shares=1.0`` (all sampled clients). Both may be given as Flower accepts them: an int,
or a float meaning a proportion (of the clients, resp. of ``num_shares``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from typing import Any, cast

import numpy as np
from flwr.app import ConfigRecord
from flwr.client.mod.secure_aggregation.secaggplus_mod import (
    SecAggPlusState,
    _collect_masked_vectors,
    _setup,
    _share_keys,
    _unmask,
    check_configs,
)
from flwr.common import NDArrays, bytes_to_ndarray, ndarrays_to_parameters
from flwr.common.secure_aggregation.crypto.shamir import combine_shares
from flwr.common.secure_aggregation.crypto.symmetric_encryption import generate_shared_key
from flwr.common.secure_aggregation.ndarrays_arithmetic import (
    factor_extract,
    get_parameters_shape,
    parameters_addition,
    parameters_mod,
    parameters_subtraction,
)
from flwr.common.secure_aggregation.quantization import dequantize
from flwr.common.secure_aggregation.secaggplus_constants import Key, Stage
from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen
from flwr.server.workflow.secure_aggregation.secaggplus_workflow import (
    SecAggPlusWorkflow,
    WorkflowState,
)
from flwr.supercore.primitives.asymmetric import bytes_to_private_key, bytes_to_public_key


def default_share_params(num_clients: int) -> tuple[int | float, int]:
    """``(num_shares, reconstruction_threshold)`` used when none is given (see module doc)."""
    k = min(max(4, 2 * math.ceil(math.log2(max(num_clients, 2)))), num_clients - 1)
    num_shares: int | float = k + 1 if k + 1 < num_clients else 1.0
    return num_shares, k // 2 + 1


def _client_call(state: SecAggPlusState, stage: str, configs: ConfigRecord) -> None:
    """What ``secaggplus_mod`` does before a stage (lines 151-157), minus the message."""
    state.current_stage = stage
    check_configs(stage, configs)


def run_flower_round(
    num_clients: int,
    dimension: int,
    dropout: float,
    seed: int = 0,
    num_shares: int | float | None = None,
    reconstruction_threshold: int | float | None = None,
) -> dict[str, float]:
    """Run one SecAgg+ round of Flower in process and time it.

    ``round(dropout * num_clients)`` clients (chosen with ``seed``) drop after the share-keys
    stage, before sending their masked vectors, so the server must rebuild their pairwise masks.

    Returns mean per-client seconds of each client stage (``client_setup_s``,
    ``client_share_keys_s`` over all clients; ``client_masked_input_s``, ``client_unmask_s`` over
    the survivors), the server's seconds for the unmask stage (``server_unmask_s``) and for all
    four stages (``server_total_s``), ``max_abs_error`` of the unmasked sum against the plaintext
    sum of the survivors, and the parameters used (``num_shares``, ``threshold``,
    ``num_dropped`` as floats).
    """
    if num_clients < 2:
        raise ValueError("num_clients must be at least 2")
    if not 0.0 <= dropout < 1.0:
        raise ValueError("dropout must lie in [0, 1)")
    if num_shares is None or reconstruction_threshold is None:
        d_shares, d_threshold = default_share_params(num_clients)
        num_shares = d_shares if num_shares is None else num_shares
        reconstruction_threshold = (
            d_threshold if reconstruction_threshold is None else reconstruction_threshold
        )
    # Flower's constructor: argument checks and the defaults of the remaining parameters.
    workflow = SecAggPlusWorkflow(num_shares, reconstruction_threshold)

    rng = np.random.default_rng(seed)
    # Flower's stochastic rounding draws from the global legacy RandomState
    np.random.seed(seed)  # noqa: NPY002
    node_ids = [int(n) for n in rng.choice(2**62, size=num_clients, replace=False) + 1]
    n_drop = round(dropout * num_clients)
    dropped = {node_ids[int(i)] for i in rng.choice(num_clients, size=n_drop, replace=False)}
    inputs = {
        nid: np.random.default_rng([seed, i]).uniform(-1.0, 1.0, dimension).astype(np.float32)
        for i, nid in enumerate(node_ids)
    }
    weight = int(workflow.max_weight)  # num_examples = max_weight: every weight ratio is 1
    clients = {nid: SecAggPlusState(nid=nid) for nid in node_ids}
    client_t: dict[str, dict[int, float]] = {s: {} for s in Stage.all()}
    server_t: dict[str, float] = {}

    # ---------------- Stage 0: setup (workflow lines 305-360, 391-398) ----------------
    t0 = time.perf_counter()
    state = WorkflowState()
    sampled_node_ids = list(node_ids)
    num_samples = len(sampled_node_ids)
    if isinstance(workflow.num_shares, float):
        state.num_shares = round(workflow.num_shares * num_samples)
        if state.num_shares < num_samples and state.num_shares & 1 == 0:
            state.num_shares += 1
        if state.num_shares <= 2:
            state.num_shares = num_samples
    else:
        state.num_shares = workflow.num_shares
    if isinstance(workflow.reconstruction_threshold, float):
        state.threshold = round(workflow.reconstruction_threshold * state.num_shares)
        state.threshold = max(state.threshold, 2)
    else:
        state.threshold = workflow.reconstruction_threshold
    state.active_node_ids = set(sampled_node_ids)
    state.clipping_range = workflow.clipping_range
    state.quantization_range = workflow.quantization_range
    state.mod_range = workflow.modulus_range
    state.max_weight = workflow.max_weight
    sa_params_dict = {
        Key.SAMPLE_NUMBER: num_samples,
        Key.SHARE_NUMBER: state.num_shares,
        Key.THRESHOLD: state.threshold,
        Key.CLIPPING_RANGE: state.clipping_range,
        Key.TARGET_RANGE: state.quantization_range,
        Key.MOD_RANGE: state.mod_range,
        Key.MAX_WEIGHT: state.max_weight,
    }
    if num_samples != state.num_shares and state.num_shares & 1 == 0:
        state.num_shares += 1
    random.Random(seed).shuffle(sampled_node_ids)
    half_share = state.num_shares >> 1
    state.nid_to_neighbours = {
        nid: {
            sampled_node_ids[(idx + offset) % num_samples]
            for offset in range(-half_share, half_share + 1)
        }
        for idx, nid in enumerate(sampled_node_ids)
    }
    state.sampled_node_ids = state.active_node_ids
    server_t["setup"] = time.perf_counter() - t0

    setup_replies: dict[int, dict[str, Any]] = {}
    for nid in state.active_node_ids:
        configs = ConfigRecord(dict(sa_params_dict))  # type: ignore[arg-type]
        t = time.perf_counter()
        _client_call(clients[nid], Stage.SETUP, configs)
        setup_replies[nid] = _setup(clients[nid], configs)
        client_t[Stage.SETUP][nid] = time.perf_counter() - t

    t0 = time.perf_counter()
    for nid, key_dict in setup_replies.items():
        pk1, pk2 = key_dict[Key.PUBLIC_KEY_1], key_dict[Key.PUBLIC_KEY_2]
        state.nid_to_publickeys[nid] = [cast(bytes, pk1), cast(bytes, pk2)]
    if not workflow._check_threshold(state):
        raise RuntimeError("setup stage: insufficient available nodes")
    server_t["setup"] += time.perf_counter() - t0

    # ---------------- Stage 1: share keys (workflow lines 408-413, 440-468) ----------------
    t0 = time.perf_counter()
    share_configs: dict[int, dict[str, Any]] = {}
    for nid in state.active_node_ids:
        neighbours = state.nid_to_neighbours[nid] & state.active_node_ids
        share_configs[nid] = {str(n): state.nid_to_publickeys[n] for n in neighbours}
    server_t["share_keys"] = time.perf_counter() - t0

    share_replies: dict[int, dict[str, Any]] = {}
    for nid in state.active_node_ids:
        configs = ConfigRecord(share_configs[nid])
        t = time.perf_counter()
        _client_call(clients[nid], Stage.SHARE_KEYS, configs)
        share_replies[nid] = _share_keys(clients[nid], configs)
        client_t[Stage.SHARE_KEYS][nid] = time.perf_counter() - t

    t0 = time.perf_counter()
    state.active_node_ids = set(share_replies)
    srcs: list[int] = []
    dsts: list[int] = []
    ciphertexts: list[bytes] = []
    fwd_ciphertexts: dict[int, list[bytes]] = {nid: [] for nid in state.active_node_ids}
    fwd_srcs: dict[int, list[int]] = {nid: [] for nid in state.active_node_ids}
    for node_id, res_dict in share_replies.items():
        dst_lst = cast(list[int], res_dict[Key.DESTINATION_LIST])
        ctxt_lst = cast(list[bytes], res_dict[Key.CIPHERTEXT_LIST])
        srcs += [node_id] * len(dst_lst)
        dsts += dst_lst
        ciphertexts += ctxt_lst
    for src, dst, ciphertext in zip(srcs, dsts, ciphertexts, strict=True):
        if dst in fwd_ciphertexts:
            fwd_ciphertexts[dst].append(ciphertext)
            fwd_srcs[dst].append(src)
    state.forward_srcs = fwd_srcs
    state.forward_ciphertexts = fwd_ciphertexts
    if not workflow._check_threshold(state):
        raise RuntimeError("share-keys stage: insufficient available nodes")
    server_t["share_keys"] += time.perf_counter() - t0

    # ------- Stage 2: collect masked vectors (workflow lines 480-484, 515-530) -------
    # The dropped clients receive their forwarded shares but never answer.
    masked_replies: dict[int, dict[str, Any]] = {}
    for nid in state.active_node_ids:
        if nid in dropped:
            continue
        configs = ConfigRecord(
            {
                Key.CIPHERTEXT_LIST: state.forward_ciphertexts[nid],
                Key.SOURCE_LIST: state.forward_srcs[nid],
            }
        )
        parameters = ndarrays_to_parameters([inputs[nid]])  # the ClientApp's FitRes
        t = time.perf_counter()
        _client_call(clients[nid], Stage.COLLECT_MASKED_VECTORS, configs)
        masked_replies[nid] = _collect_masked_vectors(clients[nid], configs, weight, parameters)
        client_t[Stage.COLLECT_MASKED_VECTORS][nid] = time.perf_counter() - t

    t0 = time.perf_counter()
    state.active_node_ids = set(masked_replies)
    del state.forward_ciphertexts, state.forward_srcs
    masked_vector: NDArrays | None = None
    for res_dict in masked_replies.values():
        bytes_list = cast(list[bytes], res_dict[Key.MASKED_PARAMETERS])
        client_masked_vec = [bytes_to_ndarray(b) for b in bytes_list]
        if masked_vector is None:
            masked_vector = client_masked_vec
        else:
            masked_vector = parameters_addition(masked_vector, client_masked_vec)
    if masked_vector is None:
        raise RuntimeError("no masked vector received")
    state.aggregate_ndarrays = parameters_mod(masked_vector, state.mod_range)
    del masked_replies
    ok = workflow._check_threshold(state)
    server_t["collect_masked_vectors"] = time.perf_counter() - t0
    if not ok:
        raise RuntimeError("collect-masked-vectors stage: insufficient available nodes")

    # ---------------- Stage 3: unmask (workflow lines 551-561, 588-650) ----------------
    t0 = time.perf_counter()
    active_nids = state.active_node_ids
    dead_nids = state.sampled_node_ids - active_nids
    unmask_configs = {
        nid: {
            Key.ACTIVE_NODE_ID_LIST: list(state.nid_to_neighbours[nid] & active_nids),
            Key.DEAD_NODE_ID_LIST: list(state.nid_to_neighbours[nid] & dead_nids),
        }
        for nid in state.active_node_ids
    }
    server_t["unmask"] = time.perf_counter() - t0

    unmask_replies: dict[int, dict[str, Any]] = {}
    for nid in state.active_node_ids:
        configs = ConfigRecord(unmask_configs[nid])  # type: ignore[arg-type]
        t = time.perf_counter()
        _client_call(clients[nid], Stage.UNMASK, configs)
        unmask_replies[nid] = _unmask(clients[nid], configs)
        client_t[Stage.UNMASK][nid] = time.perf_counter() - t

    t0 = time.perf_counter()
    state.active_node_ids = set(unmask_replies)
    collected_shares_dict: dict[int, list[bytes]] = {}
    for nid in state.sampled_node_ids:
        collected_shares_dict[nid] = []
    for res_dict in unmask_replies.values():
        nids = cast(list[int], res_dict[Key.NODE_ID_LIST])
        shares = cast(list[bytes], res_dict[Key.SHARE_LIST])
        for owner_nid, share in zip(nids, shares, strict=True):
            collected_shares_dict[owner_nid].append(share)

    masked_vector = state.aggregate_ndarrays
    del state.aggregate_ndarrays
    for nid, share_list in collected_shares_dict.items():
        if len(share_list) < state.threshold:
            raise RuntimeError("Not enough shares to recover secret in unmask vectors stage")
        secret = combine_shares(share_list)
        if nid in active_nids:
            private_mask = pseudo_rand_gen(
                secret, state.mod_range, get_parameters_shape(masked_vector)
            )
            masked_vector = parameters_subtraction(masked_vector, private_mask)
        else:
            neighbours = state.nid_to_neighbours[nid]
            neighbours.remove(nid)
            for neighbor_nid in neighbours:
                shared_key = generate_shared_key(
                    bytes_to_private_key(secret),
                    bytes_to_public_key(state.nid_to_publickeys[neighbor_nid][0]),
                )
                pairwise_mask = pseudo_rand_gen(
                    shared_key, state.mod_range, get_parameters_shape(masked_vector)
                )
                if nid > neighbor_nid:
                    masked_vector = parameters_addition(masked_vector, pairwise_mask)
                else:
                    masked_vector = parameters_subtraction(masked_vector, pairwise_mask)
    recon_parameters = parameters_mod(masked_vector, state.mod_range)
    q_total_ratio, recon_parameters = factor_extract(recon_parameters)
    inv_dq_total_ratio = state.quantization_range / q_total_ratio
    aggregated_vector = dequantize(recon_parameters, state.clipping_range, state.quantization_range)
    offset = -(len(active_nids) - 1) * state.clipping_range
    for vec in aggregated_vector:
        vec += offset
        vec *= inv_dq_total_ratio
    # Not Flower: undo the weighted average (each weight ratio is 1) to get the sum.
    aggregate_sum = aggregated_vector[0] * (float(q_total_ratio) / state.quantization_range)
    server_t["unmask"] += time.perf_counter() - t0

    survivors = sorted(active_nids)
    plain_sum = np.zeros(dimension, dtype=np.float64)
    for nid in survivors:
        plain_sum += inputs[nid]
    max_abs_error = float(np.max(np.abs(aggregate_sum - plain_sum)))

    def mean(values: dict[int, float]) -> float:
        return float(np.mean(list(values.values()))) if values else 0.0

    return {
        "client_setup_s": mean(client_t[Stage.SETUP]),
        "client_share_keys_s": mean(client_t[Stage.SHARE_KEYS]),
        "client_masked_input_s": mean(client_t[Stage.COLLECT_MASKED_VECTORS]),
        "client_unmask_s": mean(client_t[Stage.UNMASK]),
        "server_unmask_s": server_t["unmask"],
        "server_total_s": sum(server_t.values()),
        "max_abs_error": max_abs_error,
        "num_shares": float(state.num_shares),
        "threshold": float(state.threshold),
        "num_dropped": float(len(dead_nids)),
    }


def _share_arg(text: str) -> int | float:
    """An int, or a float proportion, as ``SecAggPlusWorkflow`` accepts them."""
    return float(text) if any(c in text for c in ".eE") else int(text)


def main(argv: list[str] | None = None) -> None:
    """Command line: run one round and print the timings as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--dimension", type=int, default=10_000)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--num-shares", type=_share_arg, default=None, help="int, or float proportion"
    )
    parser.add_argument("--threshold", type=_share_arg, default=None, help="int, or float")
    args = parser.parse_args(argv)
    result = run_flower_round(
        args.clients,
        args.dimension,
        args.dropout,
        seed=args.seed,
        num_shares=args.num_shares,
        reconstruction_threshold=args.threshold,
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
