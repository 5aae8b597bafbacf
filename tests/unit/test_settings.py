"""Settings (SPEC §13): defaults, durations, secrets never echoed, budget rule (SPEC §6)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pinlog.composition import build_config
from pinlog.settings import SettingsError, load_settings


def test_defaults_match_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(data_dir=tmp_path / "d")
    embedding = build_config(s).ai.embedding
    assert (s.host, s.port) == ("127.0.0.1", 8000)
    assert s.rescan_interval == timedelta(minutes=5)
    assert s.pending_expiry == timedelta(minutes=5)
    assert s.processing_expiry == timedelta(minutes=10)
    assert (s.max_retries, s.rescan_batch_size, s.dispatch_queue_size) == (3, 100, 100)
    assert s.embedding_provider == "local-e5" and embedding.profile == "local-e5-small-q4-384-cosine-v1"
    assert embedding.dimension == 384 and s.judge == "similarity" and s.max_text_chars == 2000
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
        load_settings(data_dir=tmp_path, processing_expiry=200, llm_timeout=90, judge="llm",
                      llm_base_url="http://127.0.0.1:9/v1")
    message = str(exc.value)
    assert "PINLOG_LLM_TIMEOUT" in message and "PINLOG_PROCESSING_EXPIRY" in message
    # issue 13: the LLM timeout counts only when an LLM is called (SPEC §13)
    assert load_settings(data_dir=tmp_path, processing_expiry=200, llm_timeout=90).judge == \
        "similarity"
    with pytest.raises(SettingsError, match="PINLOG_EMBEDDING_TIMEOUT"):
        load_settings(data_dir=tmp_path, processing_expiry=100, llm_timeout=1)
    # the defaults satisfy it, with the worst-case backoff counted
    s = load_settings(data_dir=tmp_path)
    worst = max(s.embedding_timeout, s.llm_timeout) * s.model_attempts + s.retries.total_backoff()
    assert worst < s.processing_expiry.total_seconds()
    assert s.retries.total_backoff() == pytest.approx(0.5 + 1.0)


def test_the_budget_counts_the_worst_case_backoff(tmp_path):
    """SPEC §6, at the boundary: 60 s × 3 attempts = 180 s, plus 0.5 + 1.0 s of backoff."""
    with pytest.raises(SettingsError, match="PINLOG_EMBEDDING_TIMEOUT"):
        load_settings(data_dir=tmp_path, processing_expiry=181)
    s = load_settings(data_dir=tmp_path, processing_expiry=182)
    assert s.retries.budget(s.embedding_timeout) == pytest.approx(181.5)


def test_even_vote_count_is_rejected(tmp_path):
    with pytest.raises(SettingsError, match="PINLOG_LLM_VOTES"):
        load_settings(data_dir=tmp_path, llm_votes=2)


def test_an_llm_judge_needs_its_endpoint(tmp_path):
    with pytest.raises(SettingsError, match="PINLOG_LLM_BASE_URL"):
        load_settings(data_dir=tmp_path, judge="llm")


def test_a_data_dir_that_cannot_be_created_is_one_settings_error(tmp_path):
    with pytest.raises(SettingsError, match="PINLOG_DATA_DIR: cannot use /proc/nope"):
        load_settings(data_dir="/proc/nope")


def test_unknown_variables_name_the_closest_known_one():
    from pinlog.settings import unknown_variables, unknown_variables_warning

    env = {"PINLOG_RESCAN_INTERVALL": "60", "PINLOG_PORT": "1", "PINLOG_ZZZ": "x",
           "PINLOG_TEST_DATABASE_URL": "postgresql://x", "HOME": "/root"}
    assert unknown_variables(env) == [("PINLOG_RESCAN_INTERVALL", "PINLOG_RESCAN_INTERVAL"),
                                      ("PINLOG_ZZZ", None)]
    line = unknown_variables_warning(env)
    assert line is not None and "\n" not in line
    assert "PINLOG_RESCAN_INTERVALL (did you mean PINLOG_RESCAN_INTERVAL?)" in line
    assert "60" not in line  # values are never shown
    assert unknown_variables_warning({"PINLOG_PORT": "1"}) is None


# --- issue 27 #9: settings that cannot work, one clear line each ---------------------------------

@pytest.mark.parametrize(("env", "name", "says"), [
    ({"PINLOG_JWT_TTL": "0"}, "PINLOG_JWT_TTL", "must be positive"),  # tokens born expired
    ({"PINLOG_JWT_TTL": "-5"}, "PINLOG_JWT_TTL", "must be positive"),
    ({"PINLOG_PENDING_EXPIRY": "-5"}, "PINLOG_PENDING_EXPIRY", "must be positive"),
    ({"PINLOG_PROCESSING_EXPIRY": "-PT5M"}, "PINLOG_PROCESSING_EXPIRY", "must be positive"),
    ({"PINLOG_RESCAN_INTERVAL": "five minutes"}, "PINLOG_RESCAN_INTERVAL",
     "must be a number of seconds or an ISO-8601 duration (PT5M)"),
    ({"PINLOG_SEARCH_FLOOR": "2"}, "PINLOG_SEARCH_FLOOR", "less than or equal to 1"),
    ({"PINLOG_SEARCH_SHORT_QUERY_FLOOR": "-3"}, "PINLOG_SEARCH_SHORT_QUERY_FLOOR",
     "greater than or equal to -1"),
    ({"PINLOG_CANDIDATE_FLOOR": "1.5"}, "PINLOG_CANDIDATE_FLOOR", "less than or equal to 1"),
    ({"PINLOG_EMBEDDING_PROFILE": "   "}, "PINLOG_EMBEDDING_PROFILE", "must not be blank"),
    ({"PINLOG_EMBEDDING_PROFILE": " p-v1"}, "PINLOG_EMBEDDING_PROFILE", "must not be blank"),
    ({"PINLOG_DATA_DIR": ""}, "PINLOG_DATA_DIR", "must not be empty"),
    ({"PINLOG_DATA_DIR": "  "}, "PINLOG_DATA_DIR", "must not be empty"),
    ({"PINLOG_MAX_BODY_BYTES": "20000"}, "PINLOG_MAX_BODY_BYTES", "must be at least 48576"),
    ({"PINLOG_MIGRATE_LOCK_TIMEOUT": "0"}, "PINLOG_MIGRATE_LOCK_TIMEOUT", "greater than 0"),
    ({"PINLOG_MIGRATE_ATTEMPTS": "0"}, "PINLOG_MIGRATE_ATTEMPTS", "greater than or equal to 1"),
], ids=["jwt-ttl-0", "jwt-ttl-negative", "pending-expiry-negative", "processing-expiry-negative",
        "interval-words", "search-floor-2", "short-floor-minus-3", "candidate-floor-1.5",
        "profile-blank", "profile-edge-space", "data-dir-empty", "data-dir-blank",
        "body-bytes-too-small", "lock-timeout-0", "migrate-attempts-0"])
def test_a_setting_that_cannot_work_is_one_clear_line(tmp_path, monkeypatch, env, name, says):
    monkeypatch.chdir(tmp_path)
    if "PINLOG_DATA_DIR" not in env:
        monkeypatch.setenv("PINLOG_DATA_DIR", str(tmp_path / "d"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as exc:
        load_settings()
    [line] = str(exc.value).splitlines()
    assert line.startswith(f"invalid setting {name}") and says in line, line
    assert "identifier" not in line  # pydantic's "day identifier" message for "-5"
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "d"])  # nothing made in the cwd


def test_the_body_limit_follows_the_longest_note(tmp_path):
    assert load_settings(data_dir=tmp_path).body_limit() == 64 * 1024
    assert load_settings(data_dir=tmp_path, max_text_chars=10_000,
                         embedding_batch_max_chars=10_000).body_limit() == 12 * 10_000 + 24 * 1024
    assert load_settings(data_dir=tmp_path, max_body_bytes=100_000).body_limit() == 100_000


def test_durations_accept_clock_and_iso_forms(tmp_path):
    s = load_settings(data_dir=tmp_path, pending_expiry="0:05:00", jwt_ttl="P1DT2H",
                      rescan_interval=" 30 ")
    assert s.pending_expiry == timedelta(minutes=5) and s.jwt_ttl == timedelta(days=1, hours=2)
    assert s.rescan_interval == timedelta(seconds=30)
