"""Issue 13 item 5: the suite ignores the calling shell's PINLOG_* variables (only the documented
test variables pass through). Runs a slice of the suite in a subprocess with a hostile shell."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pinlog.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def test_this_process_holds_no_pinlog_variable_but_the_test_ones():
    assert [n for n in os.environ if n.startswith("PINLOG_")
            and n != "PINLOG_TEST_DATABASE_URL"] == []
    assert load_settings(data_dir="/tmp/unused").port == 8000


@pytest.mark.slow
def test_a_hostile_shell_does_not_change_the_results(tmp_path):
    env = {**os.environ, "PINLOG_PORT": "8101", "PINLOG_RESCAN_INTERVAL": "abc",
           "PINLOG_JUDGE": "llm", "PINLOG_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x"}
    (tmp_path / ".env").write_text("PINLOG_MAX_RETRIES=abc\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         str(ROOT / "tests/unit/test_settings.py"), str(ROOT / "tests/unit/test_hermetic.py"),
         "-k", "not hostile"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
