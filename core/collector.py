"""The garbage collector's settings for a long-running process: `llamay serve`, and the benches that measure
constraints as it runs them.

What the load made (the model, the vocabulary's tables, the compiled kernels) is never garbage: it is frozen out
of the collector's passes. And the youngest generation is collected every `YOUNG` allocations rather than
CPython's 700: compiling a constraint's lazy rules allocates, in bursts, objects that mostly survive (grammar
nodes, program lists), which at 700 go through many young collections on their way to the old generation, and
every tenth of those counts towards a full pass of the heap (one held the GIL, so the event loop and every
stream, about 90 ms). Measured on JSONSchemaBench's slice 0 (masks of every instance, one process): mean
105-106 us a mask at 700, 95-101 us at 5,000 to 50,000, 95 us with the collector off.
"""

from __future__ import annotations

import gc

YOUNG = 10_000  # allocations between collections of the youngest generation


def settle_after_load() -> None:
    """Collect once, freeze what survives, and collect the youngest generation every YOUNG allocations."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
