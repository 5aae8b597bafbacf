"""Operator mistakes get one clear line and exit 2, never a traceback or a secret."""

import pytest

from tests.helpers import pinlog_env, run_pinlog

pytestmark = pytest.mark.slow


def test_commands_before_migrate_say_what_to_do(tmp_path):
    env = pinlog_env(tmp_path / "data")
    token = run_pinlog(["token", "--member", "alice"], env)
    assert token.returncode == 2
    assert "run `pinlog migrate` first" in token.stderr and "Traceback" not in token.stderr
    serve = run_pinlog(["serve"], env, timeout=60)
    assert serve.returncode == 2 and "run `pinlog migrate` first" in serve.stderr
    assert run_pinlog(["migrate"], env).returncode == 0
    serve = run_pinlog(["serve"], env, timeout=60)
    assert serve.returncode == 2 and "run `pinlog presets load` first" in serve.stderr
    assert "Traceback" not in serve.stderr


def test_unreachable_database_and_bad_settings_never_echo_secrets(tmp_path):
    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL="postgresql://u:SuperSecretPw@127.0.0.1:1/x",
                     PINLOG_INTERNAL_SECRETS="internal-secret-value",
                     PINLOG_JWT_SECRET="jwt-secret-value-jwt-secret-value-1234")
    migrate = run_pinlog(["migrate"], env)
    assert migrate.returncode == 2 and "cannot connect to the database" in migrate.stderr
    url = run_pinlog(["db", "url"], env)
    assert url.stdout.strip() == "postgresql://u@127.0.0.1:1/x"
    bad = run_pinlog(["status"], {**env, "PINLOG_LOG_LEVEL": "LOUD", "PINLOG_JWT_SECRET": "short"})
    assert bad.returncode == 2 and "PINLOG_LOG_LEVEL" in bad.stderr and "PINLOG_JWT_SECRET" in bad.stderr
    for output in (migrate.stderr, url.stdout, url.stderr, bad.stderr):
        assert "SuperSecretPw" not in output and "secret-value" not in output
        assert "short" not in output.replace("PINLOG", "")
