from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.dp.group_privacy import group_privacy_bounds
from fedprivacy.dp.rdp import DEFAULT_ORDERS
from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.params import flatten_parameters, load_flat_
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.hyper_defaults import DEFAULT_HYPER
from fedprivacy.uldp.method_names import METHODS
from fedprivacy.uldp.method_specs import MethodSpec, method_spec
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.rounds import RoundHyper


def hyper_for(method: str, **changes: float) -> RoundHyper:
    d = DEFAULT_HYPER["heart_disease"][method_spec(method).family]
    kw: dict[str, float] = dict(
        global_lr=d.global_lr, clip=d.clip, noise_multiplier=5.0, sampling_rate=0.5
    )
    kw.update(changes)
    batch = 16 if method_spec(method).family == "group" else d.batch_size
    return RoundHyper(
        LocalTrainingSpec(epochs=d.local_epochs, batch_size=batch, lr=d.local_lr), **kw
    )  # type: ignore[arg-type]


def test_method_specs() -> None:
    assert len(METHODS) == 14
    # each name looks up its own entry, with the flags its suffix spells
    assert [method_spec(name).name for name in METHODS] == list(METHODS)
    assert len({method_spec(name) for name in METHODS}) == len(METHODS)
    assert method_spec("ULDP-AVG-ws") == MethodSpec(
        "ULDP-AVG-ws", "avg", weighted=True, sampled=True
    )
    assert method_spec("ULDP-AVG") == MethodSpec("ULDP-AVG", "avg", weighted=False, sampled=False)
    s = method_spec("ULDP-SGD-ws")
    assert (s.family, s.weighted, s.sampled) == ("sgd", True, True)
    assert (method_spec("ULDP-AVG-s").weighted, method_spec("ULDP-AVG-s").sampled) == (False, True)
    assert method_spec("ULDP-AVG-w").weighted and not method_spec("ULDP-AVG-w").sampled
    assert method_spec("ULDP-GROUP-median").group == "median"
    assert not method_spec("DEFAULT").private
    with pytest.raises(ParameterError) as err:
        method_spec("ULDP-FOO")
    for name in METHODS:
        assert name in str(err.value)


@pytest.mark.parametrize("method", METHODS)
def test_each_method_learns_on_heart_disease(heart_fed: Federation, method: str) -> None:
    # small noise: this checks the direction and scale of the updates, not the privacy
    fed = heart_fed
    runner = MethodRunner(method, fed, hyper_for(method, noise_multiplier=0.05))
    model = fed.task.build_model(0)
    flat = flatten_parameters(model)
    before = fed.task.evaluate(model, fed.test_x, fed.test_y)
    rng = np.random.default_rng(0)
    for _ in range(4):
        out = runner.run_round(flat, rng)
        assert torch.isfinite(out.flat).all()
        flat = out.flat
    load_flat_(model, flat)
    after = fed.task.evaluate(model, fed.test_x, fed.test_y)
    assert after["loss"] < before["loss"] - 0.01
    assert after["metric"] > before["metric"]


def test_sgd_ws_descends(heart_fed: Federation) -> None:
    fed = heart_fed
    runner = MethodRunner("ULDP-SGD-ws", fed, hyper_for("ULDP-SGD-ws", noise_multiplier=0.01))
    model = fed.task.build_model(0)
    flat = flatten_parameters(model)
    losses = [fed.task.evaluate(model, fed.x, fed.y)["loss"]]
    rng = np.random.default_rng(1)
    for _ in range(5):
        out = runner.run_round(flat, rng)
        # x_{t+1} = x_t - eta_g / (q |U| |S|) * (noisy sum of clipped weighted gradients)
        step = runner.hyper.global_lr / (0.5 * fed.num_users * fed.num_silos)
        torch.testing.assert_close(out.flat, flat - step * out.noisy_sum)
        assert out.sampled is not None and 0 < out.sampled.sum() < fed.num_users
        flat = out.flat
        load_flat_(model, flat)
        losses.append(fed.task.evaluate(model, fed.x, fed.y)["loss"])
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))


@pytest.mark.parametrize(
    "method", ["ULDP-AVG", "ULDP-AVG-w", "ULDP-AVG-ws", "ULDP-SGD", "ULDP-SGD-ws"]
)
@pytest.mark.parametrize("gradient", ["vmap", "bmm"])
def test_vectorised_round_equals_per_user_loop(
    heart_fed: Federation,
    method: str,
    gradient: str,
    presum_oracle: Callable[..., torch.Tensor],
) -> None:
    fed = heart_fed
    hp = hyper_for(method, clip=0.3)
    hp = RoundHyper(LocalTrainingSpec(2, 4, 0.2), hp.global_lr, hp.clip, hp.noise_multiplier, 0.5)
    flat = flatten_parameters(fed.task.build_model(3))
    runner = MethodRunner(method, fed, hp, gradient=gradient)
    got = runner.presum(flat, np.random.default_rng(7))
    expected = presum_oracle(method, fed, flat, hp, np.random.default_rng(7))
    assert float(expected.norm()) > 0.1
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def _epsilons(runner: MethodRunner, counts: np.ndarray | None = None) -> tuple[float, float]:
    """A runner's epsilons after its rounds, every user in each unless ``counts`` says."""
    if counts is None:
        counts = np.full(runner.fed.num_users, runner.rounds, dtype=np.int64)
    return runner.accounting.epsilons(runner.rounds, counts)


def _run(fed: Federation, method: str, rounds: int, **changes: float) -> list[float]:
    runner = MethodRunner(method, fed, hyper_for(method, **changes))
    flat = flatten_parameters(fed.task.build_model(0))
    rng = np.random.default_rng(0)
    eps = []
    for _ in range(rounds):
        flat = runner.run_round(flat, rng).flat
        eps.append(_epsilons(runner)[0])
    return eps


def test_epsilon_per_round_matches_accountant(heart_fed: Federation) -> None:
    fed = heart_fed
    cases = (("ULDP-SGD", 5.0, 1.0), ("ULDP-SGD-s", 5.0, 0.5), ("ULDP-SGD-w", 2.0, 1.0))
    for method, z, q in cases:
        eps = _run(fed, method, 3, noise_multiplier=z, sampling_rate=0.5)
        for t, e in enumerate(eps, start=1):
            ref = PrivacyAccountant("rdp").compose_gaussian(z, t, q).epsilon(1e-5)
            assert e == pytest.approx(ref, rel=1e-12)
    # ULDP-NAIVE: noise multiplier sigma of the corrected sensitivity 2|S|C ...
    eps = _run(fed, "ULDP-NAIVE", 2, noise_multiplier=5.0)
    assert eps[-1] == pytest.approx(PrivacyAccountant().compose_gaussian(5.0, 2).epsilon(1e-5))
    # ... or sigma / 2 with the paper's noise
    runner = MethodRunner("ULDP-NAIVE", fed, hyper_for("ULDP-NAIVE"))
    paper = MethodRunner(
        "ULDP-NAIVE",
        fed,
        RoundHyper(runner.hyper.local, 1.0, 0.1, 5.0, naive_noise="paper"),
    )
    assert paper.effective_noise_multiplier == 2.5
    assert _run(fed, "DEFAULT", 1) == [math.inf]


def test_group_epsilon_per_round_from_the_silos_histories(heart_fed: Federation) -> None:
    fed = heart_fed
    hp = RoundHyper(LocalTrainingSpec(1, 4, 0.05), global_lr=1.0, clip=1.0, noise_multiplier=5.0)
    runner = MethodRunner("ULDP-GROUP-8", fed, hp)
    kept = runner.group_fed
    assert runner.group_k == 8 and kept is not None and runner.group_state is not None
    assert np.all(kept.records_per_user() <= 8)
    flat = flatten_parameters(fed.task.build_model(0))
    rng = np.random.default_rng(0)
    sizes = np.diff(kept.silo_offsets)
    steps = [math.ceil(n / 4) for n in sizes]
    for t in (1, 2):
        flat = runner.run_round(flat, rng).flat
        for s, k in enumerate(steps):
            # one history per silo, a step recorded at every DP-SGD step at rate 1/k
            expected = [(5.0, 1.0 / k, t * k)] if k else []
            assert runner.group_state.history(s) == expected
        # every silo's t * k sub-sampled Gaussian steps in the package's accountant
        curves = [
            PrivacyAccountant("rdp").compose_gaussian(5.0, t * k, 1.0 / k).rdp()[1]
            for k in steps
            if k > 0
        ]
        curve = np.max(np.stack(curves), axis=0)
        expected_eps = group_privacy_bounds(DEFAULT_ORDERS, curve, 8, 1e-5).epsilon
        assert _epsilons(runner)[0] == pytest.approx(expected_eps, rel=1e-9)


def test_noise_scales(heart_fed: Federation) -> None:
    fed = heart_fed
    # ULDP-SGD: N(0, sigma^2 C^2 / |S|) per silo, sigma C in the sum
    runner = MethodRunner("ULDP-SGD", fed, hyper_for("ULDP-SGD", noise_multiplier=3.0, clip=0.5))
    flat = flatten_parameters(fed.task.build_model(0))
    rng = np.random.default_rng(0)
    outs = [runner.run_round(flat, rng) for _ in range(40)]
    z = torch.cat([o.noisy_sum - o.presum for o in outs])
    assert float(z.std()) == pytest.approx(3.0 * 0.5, rel=0.12)
    # ULDP-NAIVE (corrected): N(0, (2 sigma C)^2 |S|) per silo, 2 sigma C |S| in the sum
    runner = MethodRunner(
        "ULDP-NAIVE", fed, hyper_for("ULDP-NAIVE", noise_multiplier=1.0, clip=0.1)
    )
    outs = [runner.run_round(flat, rng) for _ in range(15)]
    z = torch.cat([o.noisy_sum - o.presum for o in outs])
    assert float(z.std()) == pytest.approx(2 * 1.0 * 0.1 * fed.num_silos, rel=0.2)


def test_sampled_round_uses_only_sampled_users(heart_fed: Federation) -> None:
    fed = heart_fed
    hp = hyper_for("ULDP-AVG-s", sampling_rate=0.5)
    runner = MethodRunner("ULDP-AVG-s", fed, hp)
    flat = flatten_parameters(fed.task.build_model(0))
    out = runner.run_round(flat, np.random.default_rng(4))
    assert out.sampled is not None
    pairs = sum(
        int(np.isin(fed.silo_users[s], np.flatnonzero(out.sampled)).sum())
        for s in range(fed.num_silos)
    )
    assert out.groups == pairs
    step = hp.global_lr / (0.5 * fed.num_users * fed.num_silos)
    torch.testing.assert_close(out.flat, flat + step * out.noisy_sum)
    again = MethodRunner("ULDP-AVG-s", fed, hp).run_round(flat, np.random.default_rng(4))
    assert again.groups == out.groups


def test_runner_validation(
    heart_fed: Federation, presum_oracle: Callable[..., torch.Tensor]
) -> None:
    local = LocalTrainingSpec(1, 4, 0.1)
    with pytest.raises(ParameterError, match="clip"):
        MethodRunner("ULDP-AVG", heart_fed, RoundHyper(local, clip=0.0))
    with pytest.raises(ParameterError, match="sampling_rate"):
        MethodRunner("ULDP-AVG-s", heart_fed, RoundHyper(local, sampling_rate=1.5))
    with pytest.raises(ParameterError, match="method"):
        MethodRunner("ULDP-GROUP-2", heart_fed, RoundHyper(local)).presum(
            torch.zeros(14), np.random.default_rng(0)
        )
    with pytest.raises(ParameterError, match="method"):
        presum_oracle(
            "DEFAULT", heart_fed, torch.zeros(14), RoundHyper(local), np.random.default_rng(0)
        )


@pytest.mark.parametrize(
    ("method", "sampling_rate"),
    [("ULDP-AVG-w", 1.0), ("ULDP-SGD-s", 0.3), ("ULDP-NAIVE", 1.0), ("ULDP-GROUP-2", 1.0)],
)
def test_epsilon_after_equals_running_that_many_rounds(
    heart_fed: Federation, method: str, sampling_rate: float
) -> None:
    hyper = hyper_for(method, sampling_rate=sampling_rate)
    flat = flatten_parameters(heart_fed.task.build_model(0))
    short = MethodRunner(method, heart_fed, hyper)
    short.run_round(flat, np.random.default_rng(0))
    projected = [short.accounting.after(short.rounds, r)[0] for r in (1, 2, 3)]
    assert projected[0] == pytest.approx(_epsilons(short)[0], rel=1e-12)
    longer = MethodRunner(method, heart_fed, hyper)
    rng = np.random.default_rng(1)  # other data and noise: the privacy cost is the same
    for rounds in (1, 2, 3):
        flat = longer.run_round(flat, rng).flat
        assert projected[rounds - 1] == pytest.approx(_epsilons(longer)[0], rel=1e-9)
    assert projected[0] < projected[1] < projected[2]


def test_epsilon_after_needs_a_round_and_a_positive_count(heart_fed: Federation) -> None:
    runner = MethodRunner("ULDP-AVG", heart_fed, hyper_for("ULDP-AVG"))
    with pytest.raises(ParameterError, match="at least one round"):
        runner.accounting.after(runner.rounds, 5)
    runner.run_round(flatten_parameters(heart_fed.task.build_model(0)), np.random.default_rng(0))
    with pytest.raises(ParameterError, match="rounds"):
        runner.accounting.after(runner.rounds, 0)
    default = MethodRunner("DEFAULT", heart_fed, hyper_for("DEFAULT"))
    assert default.accounting.after(1, 10) == (math.inf, math.inf)


def test_epsilon_against_the_server_has_no_sub_sampling_amplification(
    heart_fed: Federation,
) -> None:
    hyper = hyper_for("ULDP-AVG-ws", sampling_rate=0.2)
    runner = MethodRunner("ULDP-AVG-ws", heart_fed, hyper, amplified=True)
    flat = flatten_parameters(heart_fed.task.build_model(0))
    rng = np.random.default_rng(3)
    counts = np.zeros(heart_fed.num_users, dtype=np.int64)
    for _ in range(4):
        out = runner.run_round(flat, rng)
        assert out.sampled is not None
        counts += out.sampled
        # the server knows the sample: the most-sampled user's rounds, unsampled Gaussian
        worst = int(counts.max())
        expected = PrivacyAccountant().compose_gaussian(5.0, worst, 1.0).epsilon(1e-5)
        assert _epsilons(runner, counts)[1] == pytest.approx(expected)
    amplified = PrivacyAccountant().compose_gaussian(5.0, 4, 0.2).epsilon(1e-5)
    released, server = _epsilons(runner, counts)
    assert released == pytest.approx(amplified) and server > released
    # a server-chosen sample: no amplification for anyone
    chosen = MethodRunner("ULDP-AVG-ws", heart_fed, hyper, amplified=False)
    assert chosen.accounting.epsilons(4, counts) == (server, server)
    # without sub-sampling both adversaries get the same guarantee
    plain = MethodRunner("ULDP-AVG-w", heart_fed, hyper_for("ULDP-AVG-w"))
    plain.run_round(flat, np.random.default_rng(0))
    assert _epsilons(plain)[0] == _epsilons(plain)[1]
    assert plain.accounting.after(1, 200)[0] == plain.accounting.after(1, 200)[1]


def test_central_mechanism_noise_is_the_servers(heart_fed: Federation) -> None:
    """``dp = central``: the silos add nothing, the server adds sigma C once to the sum."""
    from fedprivacy.fl.mechanism import CentralGaussian

    hp = hyper_for("ULDP-AVG", clip=0.3)
    flat = flatten_parameters(heart_fed.task.build_model(0))
    central = MethodRunner("ULDP-AVG", heart_fed, hp, mechanism=CentralGaussian(5.0, 0.3))
    rng, noise_rng = np.random.default_rng(1), np.random.default_rng(2)
    outs = [central.run_round(flat, rng, noise_rng) for _ in range(20)]
    noise = torch.cat([(out.noisy_sum - out.presum).double() for out in outs])
    # sigma C on the sum once (silos' noise as well would give sqrt(2) sigma C)
    assert float(noise.std()) == pytest.approx(5.0 * 0.3, rel=0.15)
    silo = MethodRunner("ULDP-AVG", heart_fed, hp)
    silo.run_round(flat, np.random.default_rng(1), np.random.default_rng(2))
    # the same Gaussian mechanism for the released models
    assert central.accounting.after(1, 1)[0] == pytest.approx(_epsilons(silo)[0], rel=1e-12)
    assert _epsilons(central)[1] == math.inf and math.isfinite(_epsilons(silo)[1])
    for silo_level in ("ULDP-NAIVE", "ULDP-GROUP-2"):  # their silos add the noise
        with pytest.raises(ParameterError, match="at their sensitivity"):
            MethodRunner(silo_level, heart_fed, hp, mechanism=CentralGaussian(5.0, 0.3))
    with pytest.raises(ParameterError, match="takes no mechanism"):
        MethodRunner("DEFAULT", heart_fed, hp, mechanism=CentralGaussian(5.0, 0.3))
