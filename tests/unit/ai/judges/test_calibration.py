"""Per-profile calibration and settings overrides (SPEC §8, §10, §13)."""

from __future__ import annotations

from pinlog.ai.calibration import GENERIC, PROFILE_DEFAULTS
from tests.conftest import make_settings, config_of

E5 = "local-e5-small-q4-384-cosine-v1"


def test_default_profile_uses_its_calibrated_values(tmp_path):
    cal = config_of(make_settings(tmp_path)).ai.calibration
    assert cal == PROFILE_DEFAULTS[E5]
    assert 0.8 < cal.candidate_floor < 1.0  # e5 cosines are compressed
    assert 1.0 <= cal.judge_floor <= 4.0 and cal.judge_margin > 0  # calibrated score (z units)


def test_unknown_profile_falls_back_to_the_generic_values(tmp_path):
    settings = make_settings(tmp_path, embedding_provider="sentence-transformers",
                             embedding_profile="st-some-model-v9")
    assert config_of(settings).ai.calibration == GENERIC


def test_settings_override_each_value_when_set(tmp_path):
    settings = make_settings(tmp_path, candidate_floor=0.1, judge_floor=0.2, judge_margin=0.3,
                             judge_max_picks=1, search_floor=0.4,
                             search_short_query_floor=0.5, search_ratio=0.6)
    cal = config_of(settings).ai.calibration
    assert (cal.candidate_floor, cal.judge_floor, cal.judge_margin, cal.max_picks,
            cal.search_floor, cal.search_short_query_floor, cal.search_ratio) == (
        0.1, 0.2, 0.3, 1, 0.4, 0.5, 0.6)


def test_max_picks_from_the_environment_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("PINLOG_JUDGE_MAX_PICKS", "3")
    assert config_of(make_settings(tmp_path)).ai.calibration.max_picks == 3
    monkeypatch.delenv("PINLOG_JUDGE_MAX_PICKS")
    assert config_of(make_settings(tmp_path)).ai.calibration.max_picks == PROFILE_DEFAULTS[E5].max_picks


def test_cue_floor_has_a_profile_default_and_a_setting(tmp_path):
    assert config_of(make_settings(tmp_path)).ai.calibration.judge_cue_floor == -0.5
    assert config_of(make_settings(tmp_path, judge_cue_floor=0.7)).ai.calibration.judge_cue_floor == 0.7
