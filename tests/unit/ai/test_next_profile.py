"""The next embedding profile's provider (SPEC §9.1): ``PINLOG_NEXT_EMBEDDING_*`` built through
the same provider registry as the first one, its errors naming its own variables, its profile
different from the first's, its thresholds its own profile's defaults."""

from __future__ import annotations

import pytest

from pinlog.ai.calibration import GENERIC, PROFILE_DEFAULTS
from pinlog.ai.providers import PROVIDERS, next_embedding_config
from pinlog.ai.providers.local_e5 import PROFILE as LOCAL_PROFILE
from pinlog.ai.providers.openai import PROFILE as OPENAI_PROFILE
from pinlog.ai.providers.openai import OpenAIConfig
from pinlog.composition import build_config
from pinlog.settings import Settings, SettingsError, known_variables


def test_no_next_profile_unless_its_provider_is_set():
    config = build_config(Settings())
    assert config.ai.next_embedding is None and config.ai.next_calibration is None


def test_the_next_provider_reads_its_own_variables_through_the_registry():
    settings = Settings(next_embedding_provider="openai", next_embedding_model="big-model",
                        next_embedding_base_url="http://x/v1", next_embedding_dimension=256,
                        next_embedding_profile="big-256-v1", embedding_timeout=7.0)
    nxt = build_config(settings).ai.next_embedding
    assert isinstance(nxt, OpenAIConfig)
    assert (nxt.profile, nxt.dimension, nxt.model, nxt.base_url, nxt.timeout) == \
        ("big-256-v1", 256, "big-model", "http://x/v1", 7.0)
    # the first provider is unchanged by the next one's settings
    assert build_config(settings).ai.embedding.profile == LOCAL_PROFILE
    # every field the registry's members read has its PINLOG_NEXT_EMBEDDING_* twin
    known = set(known_variables())
    for member in PROVIDERS.members.values():
        for field in member.model_fields:
            if field not in ("provider", "timeout"):  # the name; the timeout is shared
                assert "PINLOG_NEXT_EMBEDDING_" + field.upper() in known, field


def test_the_next_providers_errors_name_its_own_variables():
    with pytest.raises(SettingsError) as unknown:
        build_config(Settings(next_embedding_provider="no-such"))
    assert str(unknown.value).startswith(
        "invalid setting PINLOG_NEXT_EMBEDDING_PROVIDER: unknown embedding provider 'no-such'")
    settings = Settings(next_embedding_provider="openai")
    with pytest.raises(SettingsError) as bad:  # a value its model refuses
        next_embedding_config(settings.model_copy(update={"next_embedding_dimension": "wide"}))
    assert str(bad.value).startswith("invalid setting PINLOG_NEXT_EMBEDDING_DIMENSION: ")
    assert "(PINLOG_NEXT_EMBEDDING_PROVIDER=openai)" in str(bad.value)


def test_the_next_profile_must_differ_from_the_first():
    with pytest.raises(SettingsError, match="PINLOG_NEXT_EMBEDDING_PROFILE: the next profile "
                                            "must differ"):
        build_config(Settings(next_embedding_provider="local-e5"))
    with pytest.raises(SettingsError, match="must differ"):
        build_config(Settings(embedding_provider="openai", embedding_profile="p",
                              next_embedding_provider="openai", next_embedding_profile="p"))


def test_the_next_profile_has_its_own_profiles_thresholds_not_the_overrides():
    settings = Settings(search_floor=0.95, candidate_floor=0.99, next_embedding_provider="openai")
    config = build_config(settings).ai
    assert config.calibration.search_floor == 0.95  # the first profile's override
    assert config.next_calibration == PROFILE_DEFAULTS[OPENAI_PROFILE]
    other = build_config(Settings(next_embedding_provider="openai",
                                  next_embedding_profile="unknown-v1")).ai
    assert other.next_calibration == GENERIC


async def test_profile_models_are_built_for_a_configured_profile_only():
    """What the profile switch's operations (CLI, console) build: a configured profile's
    micro-batched provider, calibration and (on request) judge; another profile is refused."""
    from pinlog.ai.providers import MicroBatcher
    from pinlog.composition import close_profile_models, configured_profiles, profile_models

    config = build_config(Settings(embedding_provider="openai", embedding_base_url="http://x/v1",
                                   next_embedding_provider="openai",
                                   next_embedding_profile="next-v1",
                                   next_embedding_base_url="http://y/v1"))
    assert configured_profiles(config) == (OPENAI_PROFILE, "next-v1")
    models = profile_models(config, "next-v1", judge=True)
    try:
        assert isinstance(models.provider, MicroBatcher) and models.profile == "next-v1"
        assert models.provider.profile == "next-v1" and models.judge is not None
        assert models.calibration == config.ai.next_calibration
    finally:
        await close_profile_models(models)
    with pytest.raises(SettingsError, match="no embedding provider is configured for profile x"):
        profile_models(config, "x")
