"""How long the rescan loop waits between rounds (SPEC §7.1, §7.2 "Recovery speed"): a pure
function of the rescan's config, the last round and the expiry outlook — no database."""

from __future__ import annotations

from dataclasses import replace

from pinlog.core.rescan import (
    FAILED_ROUND_RETRY_SECONDS,
    MIN_WAKE_SECONDS,
    WAKE_SLACK_SECONDS,
    ExpiryOutlook,
    RescanConfig,
    RoundReport,
    next_delay,
)
from pinlog.settings import Settings


def test_next_delay_rules():
    # interval 300 s; a heartbeat timeout above it (the cap is tested below)
    config = RescanConfig.from_settings(Settings(rescan_batch_size=10, heartbeat_timeout=3600))
    quiet = RoundReport()
    assert next_delay(config, None, None) == FAILED_ROUND_RETRY_SECONDS  # a failed round
    assert next_delay(config, RoundReport(claimed=10), ExpiryOutlook(0, 5, None)) == 0
    assert next_delay(config, RoundReport(finalized=10), None) == 0
    assert next_delay(config, RoundReport(claimed=9), ExpiryOutlook(0, 0, None)) == 300
    assert next_delay(config, quiet, ExpiryOutlook(3, 0, 42.0)) == 42.0 + WAKE_SLACK_SECONDS
    assert next_delay(config, quiet, ExpiryOutlook(3, 0, 4000.0)) == 300
    assert next_delay(config, quiet, ExpiryOutlook(1, 0, -0.9)) == MIN_WAKE_SECONDS
    assert next_delay(config, quiet, ExpiryOutlook(0, 2, None)) == MIN_WAKE_SECONDS


def test_a_failed_round_is_retried_within_the_interval_at_most():
    short = replace(RescanConfig.from_settings(Settings()), interval=Settings().rescan_interval / 100)
    assert next_delay(short, None, None) == short.interval.total_seconds() < FAILED_ROUND_RETRY_SECONDS


def test_the_loop_looks_at_least_once_per_heartbeat_timeout():
    """SPEC §7.3.1: another process may die or stop at any time and release work this loop has
    not seen (its rows came after this loop's last round): a quiet loop looks again within one
    heartbeat timeout, not one interval."""
    config = RescanConfig.from_settings(Settings(rescan_batch_size=10))  # 300 s; timeout 30 s
    quiet = RoundReport()
    assert config.heartbeat_timeout == 30
    assert next_delay(config, quiet, ExpiryOutlook(0, 0, None)) == 30
    assert next_delay(config, quiet, None) == 30
    assert next_delay(config, quiet, ExpiryOutlook(3, 0, 200.0)) == 30
    assert next_delay(config, quiet, ExpiryOutlook(3, 0, 12.0)) == 12.0 + WAKE_SLACK_SECONDS
    assert next_delay(config, RoundReport(claimed=10), None) == 0  # full batches: at once
    assert next_delay(config, None, None) == FAILED_ROUND_RETRY_SECONDS
