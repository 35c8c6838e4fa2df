"""collector.py: what `llamay serve` does to the garbage collector after its load."""

from __future__ import annotations

import gc

from llamay.collector import YOUNG, settle_after_load


def test_the_load_is_frozen_and_the_young_generation_collected_less_often():
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    loaded = [[i] for i in range(1000)]  # (tracked objects alive across the call, as a load's are)
    try:
        settle_after_load()
        assert gc.get_freeze_count() >= frozen + len(loaded)
        assert gc.get_threshold() == (YOUNG, *threshold[1:])
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
