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


#: Smallest L2 norm an embedding may have (SPEC §9, issue "degenerate vectors"). A unit-length
#: model output is ~1; a norm this small means an all-zero or collapsed vector whose cosine is
#: NaN (or numerically meaningless) in pgvector and numpy. Chosen so the squared norm stays far
#: above float32's smallest normal number (~1.2e-38) for any dimension up to 16,000.
MIN_NORM = 1e-6


def degenerate_rows(matrix: np.ndarray) -> list[int]:
    """Indices of the rows of a ``(n, dim)`` matrix that are not usable embeddings: any
    non-finite value (NaN, ±inf) or an L2 norm below :data:`MIN_NORM` (zero / near-zero)."""
    m = np.asarray(matrix, dtype=np.float64)
    finite = np.isfinite(m)
    norms = np.linalg.norm(np.where(finite, m, 0.0), axis=1)
    bad = ~finite.all(axis=1) | ~(norms >= MIN_NORM)
    return [int(i) for i in np.flatnonzero(bad)]


def check_embeddings(matrix: object, count: int, dimension: int) -> np.ndarray:
    """Validate a provider's answer for ``count`` texts; returns it as ``(count, dimension)``
    float32.

    Every provider's output passes here before it is stored, compared with presets or used as a
    search query (SPEC §6/§9: a degenerate vector is a provider error, never stored).

    Raises:
        pinlog.ai.errors.DegenerateVectorError (a PermanentModelError): wrong shape (count or
            dimension), a non-finite value, or a zero / near-zero norm row (named by index only,
            never by text).
    """
    from pinlog.ai.errors import DegenerateVectorError

    try:
        out = np.asarray(matrix, dtype=np.float32)
    except (ValueError, TypeError):
        raise DegenerateVectorError("malformed embedding values") from None
    if out.ndim != 2 or out.shape != (count, dimension):
        got = out.shape[-1] if out.ndim == 2 and out.shape[0] == count else tuple(out.shape)
        raise DegenerateVectorError(f"wrong vector length: expected {dimension}, got {got}")
    bad = degenerate_rows(out)
    if bad:
        raise DegenerateVectorError(
            f"degenerate embedding (zero, near-zero norm or non-finite) at row(s) {bad[:5]}")
    return out


class Float4Array:
    """Many vectors as ONE PostgreSQL ``real[]`` parameter, bound in binary (SPEC §5.4: the batch
    path writes hundreds of vectors per statement; formatting each as text costs ~0.2 ms, binary
    a few µs). ``values``: any ``(n, dim)`` or ``(n·dim,)`` array, flattened to float32 in row
    order; SQL slices row ``i`` (1-based) as ``flat[(i-1)·dim + 1 : i·dim]`` and casts it to
    ``vector`` (pgvector's ``real[] → vector`` cast). Non-finite values are refused before this
    point (:func:`check_embeddings`)."""

    __slots__ = ("values",)

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)


def _register_float4_array() -> None:
    """psycopg binary dumper for :class:`Float4Array` (built-in OIDs only: ``real`` 700, ``real[]``
    1021), registered on psycopg's global adapters: every connection made after the import of
    this module knows it; it applies to this wrapper type only."""
    import struct

    import psycopg
    from psycopg.adapt import Buffer, Dumper
    from psycopg.pq import Format

    element = np.dtype([("length", ">i4"), ("value", ">f4")])

    class Float4ArrayDumper(Dumper):
        format = Format.BINARY
        oid = 1021  # real[]

        def dump(self, obj: Float4Array) -> Buffer:
            values = obj.values
            # PostgreSQL binary array: ndim, has-null flag, element oid, (length, lower bound),
            # then each element as (byte length, big-endian float4)
            header = struct.pack(">iiIii", 1, 0, 700, values.shape[0], 1)
            body = np.empty(values.shape[0], dtype=element)
            body["length"] = 4
            body["value"] = values
            return header + body.tobytes()

    psycopg.adapters.register_dumper(Float4Array, Float4ArrayDumper)


_register_float4_array()
