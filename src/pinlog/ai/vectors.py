"""pgvector's text form ``[x,y,…]`` ↔ float32 numpy vectors — the one formatter/parser the ai
side uses for every vector it binds as text (``CAST(:v AS vector)``) or reads back as text.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def to_pgvector(vector: np.ndarray) -> str:
    """``(dim,) float32`` → pgvector text literal ``[x,y,…]`` (no spaces).

    numpy's shortest float32 repr: an exact float32 round trip, about half the characters of a
    float64 repr. Any shape is flattened; values are cast to float32 first.
    """
    return "[" + ",".join(np.asarray(vector, dtype=np.float32).reshape(-1).astype(str)) + "]"


def parse_pgvector(value: Any) -> np.ndarray:
    """pgvector's text form ``[1,2,3]`` (or an already-adapted sequence/array) → ``(dim,)``
    float32 array.

    Raises:
        ValueError: ``value`` is a string that is not a list of numbers.
    """
    if isinstance(value, str):
        return np.array(value.strip("[]").split(","), dtype=np.float32)
    return np.asarray(value, dtype=np.float32)
