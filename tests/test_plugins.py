"""``FEDPRIVACY_PLUGINS``: each process imports its operator's modules, or says which failed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.plugins import PLUGINS_ENV, load_plugins


def test_a_module_that_cannot_be_imported_is_a_one_line_error_naming_the_variable() -> None:
    with pytest.raises(ParameterError, match="FEDPRIVACY_PLUGINS: cannot import 'no_such_mod"):
        load_plugins({PLUGINS_ENV: "json, no_such_module"})


def test_a_serving_process_logs_the_failure_and_keeps_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("fedprivacy.test-plugins")
    with caplog.at_level(logging.WARNING, logger=log.name):
        assert load_plugins({PLUGINS_ENV: "no_such_module,json"}, log=log) == ("json",)
    assert "no_such_module" in caplog.text


def test_the_command_imports_them_before_it_runs(tmp_path: Path) -> None:
    """The command imports its process's plugins before the command's own work."""
    (tmp_path / "marker_plugin.py").write_text(
        "import sys\nprint('plugin imported', file=sys.stderr)\n"
    )
    env = {**os.environ, PLUGINS_ENV: "marker_plugin", "PYTHONPATH": str(tmp_path)}
    argv = ["account", "--noise-multiplier", "1", "--steps", "1", "--delta", "1e-5", "-q"]
    done = subprocess.run(
        [sys.executable, "-c", f"from fedprivacy.cli.main import main; main({argv!r})"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and float(done.stdout) > 0
    assert "plugin imported" in done.stderr
