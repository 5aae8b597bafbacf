"""Python's cyclic garbage collector while components run (``PINLOG_GC_THRESHOLD``, issue 25):
``composition.tuned_collector`` sets the young generation's threshold and freezes what exists at
start, ``running_components`` applies the setting, and everything is restored when the last
overlapping block ends."""

from __future__ import annotations

import gc

import pytest

from pinlog.composition import build_config, running_components, tuned_collector
from tests.conftest import make_settings


@pytest.fixture(autouse=True)
def interpreter_defaults():
    """Each test starts from the interpreter's thresholds, nothing frozen, and leaves it so."""
    saved = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    yield
    gc.unfreeze()
    gc.set_threshold(*saved)


def test_the_block_tunes_the_young_generation_freezes_and_restores():
    kept = [object()]  # a tracked object that exists at start: frozen out of collections
    with tuned_collector(12_345):
        assert gc.get_threshold() == (12_345, 10, 10)
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # permanent generation only
    assert any(o is kept for o in gc.get_objects())
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_threshold_zero_leaves_the_interpreter_alone():
    gc.set_threshold(900, 11, 12)
    with tuned_collector(0):
        assert gc.get_threshold() == (900, 11, 12)
        assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == (900, 11, 12)


def test_overlapping_blocks_restore_only_when_the_last_one_ends():
    """Two replicas in one process start and stop out of order: the second keeps the tuning
    after the first stopped, and the interpreter's thresholds come back after both."""
    first, second = tuned_collector(5_000), tuned_collector(5_000)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == (5_000, 10, 10) and gc.get_freeze_count() > 0
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


async def test_running_components_apply_the_setting(tmp_path):
    config = build_config(make_settings(tmp_path, gc_threshold=4_321))
    async with running_components(config, engine=None, ai=False, core=False,  # type: ignore[arg-type]
                                  retention=False):
        assert gc.get_threshold()[0] == 4_321
    assert gc.get_threshold() == (700, 10, 10)
    default = build_config(make_settings(tmp_path)).settings.gc_threshold
    assert default == 10_000
