"""The command line's progress bars show the server's view a round leaves."""

from __future__ import annotations

import pytest

from fedprivacy.cli import main as cli_main


def test_the_bar_carries_the_status_it_is_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli_main, "_is_terminal", lambda stream: True)
    factory = cli_main._progress_factory(True)
    assert factory is not None
    update = factory("training", 3)
    update.status("T_weak in [2, 4], T_strong 2, 0 exposed")  # type: ignore[attr-defined]
    update(1)
    update(1)
    assert "T_weak in [2, 4], T_strong 2, 0 exposed" in capsys.readouterr().err
    assert cli_main._progress_factory(False) is None
