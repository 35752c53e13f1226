"""``fedprivacy flower``: errors name the flag, before any process starts; ``flower app``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fedprivacy.cli.main import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--users", "2"], "--users: must be at least 3, got 2"),
        (["--kill", "x"], "--kill: must be USER@ROUND:STAGE"),
        (["--kill", "1@0:nope"], "--kill: must be USER@ROUND:STAGE"),
        (["--replay", "3"], "--replay: must be USER@ROUND"),
        (["--simulation", "--replay", "1@0"], "--simulation: fault injection needs a real"),
        (["--simulation", "--node-auth"], "--node-auth: SuperNode authentication needs a real"),
        (
            ["--node-auth", "--no-tls"],
            "--node-auth: SuperNode authentication needs TLS (drop --no-tls)",
        ),
        (["--per-round", "9"], "--per-round:"),
        (["--scheme", "multiround"], "--target-privacy: is required"),
    ],
)
def test_bad_options_are_refused_with_the_flag(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["flower", "deploy", "--out", str(tmp_path / "run"), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"fedprivacy flower deploy: error: {message}" in err
    assert not (tmp_path / "run" / "logs").exists()  # nothing was started


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--method", "ULDP-AVG"], "method: a cross-silo deployment runs the private weighting"),
        (["--method", "NOPE"], "method:"),
        (["--secure-key-bits", "1024"], "--secure-key-bits: 1024-bit Paillier moduli"),
        (["--users", "0"], "users:"),
        (["--replay", "3"], "--replay: must be USER@ROUND"),
        (["--kill", "1@x"], "--kill: must be USER@ROUND:STAGE"),
    ],
)
def test_bad_cross_silo_options_are_refused_before_anything_starts(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["flower", "cross-silo", "--out", str(tmp_path / "run"), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "run" / "logs").exists()


def test_flower_app_writes_a_flower_app_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["flower", "app", str(tmp_path / "app")]) == 0
    project = tomllib.loads((tmp_path / "app" / "pyproject.toml").read_text())
    components = project["tool"]["flwr"]["app"]["components"]
    assert components == {
        "serverapp": "fedprivacy.flower.deploy.apps:server_app",
        "clientapp": "fedprivacy.flower.deploy.apps:client_app",
    }
    assert set(project["tool"]["flwr"]["app"]["config"]) >= {"train-config", "run-dir"}


def test_flower_keys_writes_what_each_nodes_operator_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedprivacy.crypto.signing import Roster, SigningKey, Statement
    from fedprivacy.policy import PartyPolicy

    assert main(["flower", "keys", str(tmp_path / "keys"), "--users", "4"]) == 0
    assert "FEDPRIVACY_POLICY_DIR=" in capsys.readouterr().out
    roster = Roster.from_file(str(tmp_path / "keys" / "node-keys" / "roster.toml"))
    for u in range(4):
        path = tmp_path / "keys" / "policies" / f"node-{u}.toml"
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        policy = PartyPolicy.from_policy_file(path)
        assert not policy.allow_unauthenticated and policy.roster  # the safe defaults, a key
        signature = SigningKey.from_file(policy.signing_key).sign(Statement.HELLO, b"x")
        roster.verify(u, Statement.HELLO, b"x", signature)  # its own key, in the roster
    assert main(["flower", "keys", str(tmp_path / "few"), "--users", "2"]) == 2
    assert "--users: must be at least 3, got 2" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["deploy", "--stage-timeout", "0"],
            "argument --stage-timeout: must be a number of seconds",
        ),
        (
            ["deploy", "--stage-timeout", "-5"],
            "argument --stage-timeout: must be a number of seconds",
        ),
        (["deploy", "--kill", "99@0:mask"], "--kill: user 99 is not one of"),
        (["deploy", "--kill", "1@99:mask"], "--kill: round 99 is not one of"),
        (["deploy", "--replay", "7@1"], "--replay: user 7 is not one of the run's 0..5"),
        (["cross-silo", "--kill", "9@1:silo-round"], "--kill: user 9 is not one of"),
        (
            ["deploy", "-N", "6", "-K", "4", "--scheme", "multiround", "-T", "3"],
            "--target-privacy: must divide per_round = 4",
        ),
    ],
)
def test_a_deployment_refuses_before_any_process_starts(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused in one line, exit 2, nothing started and nothing written."""
    import fedprivacy.flower.deploy.deploy as deploy_module

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("a deployment was started")

    monkeypatch.setattr(deploy_module, "deploy", started)
    out = tmp_path / "run"
    try:
        code = main(["flower", *argv, "--out", str(out)])
    except SystemExit as exc:  # refused by the parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_the_progress_line_of_the_server_view(capsys: pytest.CaptureFixture[str]) -> None:
    from fedprivacy.cli.flower_command import _progress

    view = {"t_strong": 2, "exposed_users": 0, "rank": 3}
    _progress({"round": 3, "event": "server_view", "t_weak_lower": 2, "t_weak_upper": 4, **view})
    _progress({"round": 4, "event": "server_view", "t_weak_lower": 1, "t_weak_upper": 1, **view})
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "round 3: the server's view: T_weak in [2, 4], T_strong 2, 0 exposed"
    assert err[1].startswith("round 4: the server's view: T_weak = 1,")
