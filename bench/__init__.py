"""PinLog AI benchmarks: ``python -m bench`` runs them all and writes BENCHMARKS.md.

The scripts in this folder also run on their own (``python bench/bench_pipeline.py``) and import
each other by their flat names (``from scratch_db import ...``), so the folder itself is put on
``sys.path`` when it is imported as a package.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
