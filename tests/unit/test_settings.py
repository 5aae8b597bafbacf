"""Settings (SPEC §13): defaults, durations, secrets never echoed, budget rule (SPEC §6)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pinlog.settings import SettingsError, load_settings


def test_defaults_match_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(data_dir=tmp_path / "d")
    assert (s.host, s.port) == ("127.0.0.1", 8000)
    assert s.rescan_interval == timedelta(minutes=5)
    assert s.pending_expiry == timedelta(minutes=5)
    assert s.processing_expiry == timedelta(minutes=10)
    assert (s.max_retries, s.rescan_batch_size, s.dispatch_queue_size) == (3, 100, 100)
    assert s.embedding_provider == "local-e5" and s.profile == "local-e5-small-q4-384-cosine-v1"
    assert s.dimension == 384 and s.judge == "similarity" and s.max_text_chars == 2000
    assert (s.embedding_timeout, s.llm_timeout, s.llm_votes) == (60, 90, 1)


def test_durations_accept_seconds_and_iso8601(tmp_path, monkeypatch):
    monkeypatch.setenv("PINLOG_RESCAN_INTERVAL", "PT2M")
    monkeypatch.setenv("PINLOG_PENDING_EXPIRY", "42")
    s = load_settings(data_dir=tmp_path)
    assert s.rescan_interval == timedelta(minutes=2)
    assert s.pending_expiry == timedelta(seconds=42)


def test_embedded_setup_generates_secrets_once_per_data_dir(tmp_path):
    a = load_settings(data_dir=tmp_path)
    b = load_settings(data_dir=tmp_path)
    assert a.secret_values() == b.secret_values() and len(a.secret_values()[0]) >= 32
    assert a.jwt_secret.get_secret_value() == b.jwt_secret.get_secret_value()
    assert (tmp_path / "secrets.json").stat().st_mode & 0o077 == 0


def test_external_database_requires_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("PINLOG_DATABASE_URL", "postgresql://u:hunter2@db/x")
    with pytest.raises(SettingsError) as exc:
        load_settings(data_dir=tmp_path)
    assert "PINLOG_INTERNAL_SECRETS" in str(exc.value) and "PINLOG_JWT_SECRET" in str(exc.value)
    assert "hunter2" not in str(exc.value)


def test_secret_rotation_list_keeps_order(tmp_path, monkeypatch):
    monkeypatch.setenv("PINLOG_INTERNAL_SECRETS", "new-secret, old-secret")
    s = load_settings(data_dir=tmp_path)
    assert s.secret_values() == ["new-secret", "old-secret"]
    assert "new-secret" not in repr(s)


def test_invalid_value_fails_without_echoing_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PINLOG_JWT_SECRET", "s3cr3t-value")
    monkeypatch.setenv("PINLOG_PORT", "not-a-port-s3cr3t")
    with pytest.raises(SettingsError) as exc:
        load_settings(data_dir=tmp_path)
    assert "PINLOG_PORT" in str(exc.value)
    assert "s3cr3t" not in str(exc.value)


def test_budget_rule_rejects_timeouts_that_outlive_the_processing_expiry(tmp_path):
    """SPEC §6: timeouts × attempts + backoff must stay below the PROCESSING expiry."""
    with pytest.raises(SettingsError) as exc:
        load_settings(data_dir=tmp_path, processing_expiry=200, llm_timeout=90)
    message = str(exc.value)
    assert "PINLOG_LLM_TIMEOUT" in message and "PINLOG_PROCESSING_EXPIRY" in message
    # the defaults satisfy it, with the worst-case backoff counted
    s = load_settings(data_dir=tmp_path)
    worst = max(s.embedding_timeout, s.llm_timeout) * s.model_attempts + s.total_backoff()
    assert worst < s.processing_expiry.total_seconds()
    assert s.total_backoff() == pytest.approx(0.5 + 1.0)


def test_even_vote_count_is_rejected(tmp_path):
    with pytest.raises(SettingsError, match="PINLOG_LLM_VOTES"):
        load_settings(data_dir=tmp_path, llm_votes=2)
