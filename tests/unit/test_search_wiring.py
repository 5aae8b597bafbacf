"""One decision for core's search and the ai side's (SPEC §10 "The same decision for adopters",
issue 28): the composition root hands core the ai side's relevance rule — the settings'
lexical thresholds and the profile's calibrated doubt strength — as one value."""

from __future__ import annotations

from pinlog.composition import build_config
from tests.conftest import make_settings


def test_core_search_decides_with_the_ai_sides_rule(tmp_path):
    config = build_config(make_settings(tmp_path, search_text_min_coverage=0.5,
                                        search_doubt_strength=4.25))
    rule = config.core.search.rule
    assert rule is config.ai.relevance
    assert (rule.min_coverage, rule.doubt_strength) == (0.5, 4.25)


def test_the_bundled_profile_doubts_with_its_calibrated_strength(tmp_path):
    config = build_config(make_settings(tmp_path))
    assert config.ai.calibration.search_strength is not None
    assert config.core.search.rule.doubt_strength == config.ai.calibration.search_doubt_strength
    assert config.core.search.rule.doubt_strength is not None
