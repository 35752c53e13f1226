from __future__ import annotations

import json

import pytest

from fedprivacy.cli.main import main
from fedprivacy.dp.accounting import epsilon_for


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


BASE = ("account", "--noise-multiplier", "1.0", "--steps", "100", "--delta", "1e-5")


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["account", "--help"])
    assert exc.value.code == 0
    assert "--noise-multiplier" in capsys.readouterr().out


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *BASE, "--sampling-rate", "0.1", "--json")
    assert code == 0
    data = json.loads(out)
    for key in ("epsilon", "delta", "accountant", "noise_multiplier", "sampling_rate", "steps"):
        assert key in data
    assert "routes" not in data and "group_size" not in data
    assert data["accountant"] == "rdp" and data["steps"] == 100 and data["delta"] == 1e-5
    assert data["epsilon"] == pytest.approx(epsilon_for(1.0, 100, 1e-5, sampling_rate=0.1))


def test_json_pld(capsys: pytest.CaptureFixture[str]) -> None:
    argv = (
        "account",
        "-z",
        "5",
        "--sampling-rate",
        "0.5",
        "-T",
        "50",
        "--delta",
        "1e-5",
        "--accountant",
        "pld",
    )
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["accountant"] == "pld" and data["sampling_rate"] == 0.5
    expected = epsilon_for(5.0, 50, 1e-5, sampling_rate=0.5, accountant="pld")
    assert data["epsilon"] == pytest.approx(expected)
    assert data["epsilon"] < epsilon_for(5.0, 50, 1e-5, sampling_rate=0.5)


def test_json_group(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *BASE, "--group-size", "8", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["group_size"] == 8
    routes = {r["route"]: r for r in data["routes"]}
    assert set(routes) == {"rdp", "approx-dp", "rdp-all-orders"}
    for r in data["routes"]:
        assert set(r) >= {"route", "epsilon", "delta", "valid", "order"}
    assert data["chosen"] in ("rdp", "approx-dp")
    assert routes[data["chosen"]]["valid"] is True
    assert data["group_epsilon"] == routes[data["chosen"]]["epsilon"]
    assert data["group_epsilon"] > 8 * data["epsilon"] * 0.5


def test_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *BASE, "--group-size", "2")
    assert code == 0
    assert "epsilon" in out and "chosen" in out and "approx-dp" in out


@pytest.mark.parametrize(
    ("flag", "value", "match"),
    [
        ("--delta", "0", "--delta"),
        ("--delta", "1", "--delta"),
        ("--delta", "1.5", "--delta"),
        ("--noise-multiplier", "0", "--noise-multiplier"),
        ("--noise-multiplier", "-1", "--noise-multiplier"),
        ("--sampling-rate", "0", "--sampling-rate"),
        ("--sampling-rate", "1.5", "--sampling-rate"),
        ("--steps", "0", "--steps"),
        ("--group-size", "0", "--group-size"),
    ],
)
def test_invalid_values_exit_2(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, match: str
) -> None:
    argv = list(BASE)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    code, out, err = run(capsys, *argv, "--json")
    assert code == 2 and out == ""
    assert err.startswith("fedprivacy account: error: ") and match in err


def test_group_with_pld_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *BASE, "--accountant", "pld", "--group-size", "2")
    assert code == 2 and "--accountant rdp" in err


def test_no_accounting_log_noise(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # q = 0.5 makes dp-accounting log one warning per unconverged fractional order (dozens)
    argv = ("account", "--noise-multiplier", "4.9", "--steps", "7", "--delta", "1e-5")
    with caplog.at_level("WARNING"):
        code, out, err = run(capsys, *argv, "--sampling-rate", "0.5", "--json")
    assert code == 0 and json.loads(out)["epsilon"] > 0
    assert not [r for r in caplog.records if r.name == "absl"]
    assert "failed to converge" not in err
