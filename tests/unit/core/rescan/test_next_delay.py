"""SPEC §7.2 "Recovery speed": when the next rescan round runs (``next_delay``) — a pure function
of the round's report and the expiry outlook; no database (the rounds themselves are in
``tests/integration/core/rescan/test_recovery_speed.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pinlog.core.rescan import ExpiryOutlook, next_delay
from pinlog.settings import Settings
from tests.conftest import make_settings


@pytest.fixture
def make_rescan_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings with SPEC §7.1 defaults unless overridden, without a database URL."""

    def build(**overrides: object) -> Settings:
        values: dict[str, object] = {"embedding_timeout": 5, "llm_timeout": 5}
        values.update(overrides)
        return make_settings(tmp_path, **values)

    return build


def test_next_delay_rules(make_rescan_settings):
    from pinlog.core.rescan import (
        FAILED_ROUND_RETRY_SECONDS,
        MIN_WAKE_SECONDS,
        WAKE_SLACK_SECONDS,
        RoundReport,
    )

    settings = make_rescan_settings(rescan_batch_size=10)  # interval 300 s
    quiet = RoundReport()
    assert next_delay(settings, None, None) == FAILED_ROUND_RETRY_SECONDS  # a failed round
    assert next_delay(settings, RoundReport(claimed=10), ExpiryOutlook(0, 5, None)) == 0
    assert next_delay(settings, RoundReport(finalized=10), None) == 0
    assert next_delay(settings, RoundReport(claimed=9), ExpiryOutlook(0, 0, None)) == 300
    assert next_delay(settings, quiet, ExpiryOutlook(3, 0, 42.0)) == 42.0 + WAKE_SLACK_SECONDS
    assert next_delay(settings, quiet, ExpiryOutlook(3, 0, 4000.0)) == 300
    assert next_delay(settings, quiet, ExpiryOutlook(1, 0, -0.9)) == MIN_WAKE_SECONDS
    assert next_delay(settings, quiet, ExpiryOutlook(0, 2, None)) == MIN_WAKE_SECONDS
