"""Providers and judges describe themselves (issue 22): one registry each, a discriminated union
on the name, an unknown name is one line listing the known ones, and every field a member reads
is a ``PINLOG_*`` variable the settings know."""

from __future__ import annotations

import pytest

from pinlog.ai.judges import JUDGES
from pinlog.ai.judges.llm import LlmJudgeConfig
from pinlog.ai.providers import PROVIDERS
from pinlog.ai.providers.openai import OpenAIConfig
from pinlog.composition import build_config
from pinlog.settings import Settings, SettingsError, known_variables


@pytest.mark.parametrize(("field", "registry", "kind"), [
    ("embedding_provider", PROVIDERS, "embedding provider"),
    ("judge", JUDGES, "judge"),
], ids=["provider", "judge"])
def test_an_unknown_name_is_one_line_listing_the_known_ones(field, registry, kind):
    with pytest.raises(SettingsError) as exc:
        build_config(Settings(**{field: "no-such-name"}))
    message = str(exc.value)
    assert "\n" not in message and "KeyError" not in message
    assert message.startswith(f"invalid setting PINLOG_{field.upper()}: unknown {kind} "
                              "'no-such-name'")
    assert len(registry.names) >= 2
    for name in registry.names:
        assert name in message


def test_each_provider_declares_its_profile_and_dimension():
    profiles = set()
    for name in PROVIDERS.names:
        config = build_config(Settings(embedding_provider=name)).ai.embedding
        assert config.provider == name and config.profile and config.dimension >= 1
        profiles.add(config.profile)
    assert len(profiles) == len(PROVIDERS.names)  # one vector space per provider
    # the settings override the member's defaults, and core gets the same profile
    config = build_config(Settings(embedding_provider="openai", embedding_profile="mine-v2",
                                   embedding_dimension=256, embedding_model="m"))
    assert isinstance(config.ai.embedding, OpenAIConfig)
    assert (config.ai.embedding.profile, config.ai.embedding.dimension,
            config.ai.embedding.model) == ("mine-v2", 256, "m")
    assert config.core.search.profile == config.core.reprocess.profile == "mine-v2"


def test_members_read_only_variables_the_settings_know():
    """What a member reads is a Settings field (so ``PINLOG_*`` is documented, validated and
    known to the unknown-variable warning), and a refused value names that variable."""
    known = set(known_variables())
    for registry in (PROVIDERS, JUDGES):
        for name, member in registry.members.items():
            for field in member.model_fields:
                if field in (registry.discriminator, "endpoint", "retries"):
                    continue  # the name; the LLM endpoint and retry policy are shared values
                assert member.settings_prefix + field.upper() in known, (name, field)
    settings = Settings(judge="llm", llm_base_url="http://x/v1", llm_chain="a")
    judge = build_config(settings).ai.judge
    assert isinstance(judge, LlmJudgeConfig) and judge.chain == ("a",)
    with pytest.raises(SettingsError, match="invalid setting PINLOG_LLM_VOTES"):
        JUDGES.config("llm", settings.model_copy(update={"llm_votes": "many"}))


def test_the_union_discriminates_on_the_name():
    config = build_config(Settings(embedding_provider="openai")).ai.embedding
    again = PROVIDERS.adapter.validate_python(config.model_dump())
    assert type(again) is OpenAIConfig and again == config
    with pytest.raises(Exception, match="does not match any of the expected tags"):
        PROVIDERS.adapter.validate_python({"provider": "no-such-name"})
