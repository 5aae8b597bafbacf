"""Public record ids (issue 27 #7): what another member uses to see a record's public view.

Record ids are sequential, so a view keyed by them lets any member list every saved place by
counting. A public id is instead a deterministic, authenticated encryption of the record id
(a synthetic-IV construction with HMAC-SHA256 as the PRF):

    tag    = HMAC(key, "tag" || id)[:16]                 (16 bytes)
    masked = id XOR HMAC(key, "pad" || tag)[:8]           (8 bytes)
    public id = "pr_" + base64url(tag || masked)         (35 characters)

It cannot be guessed or made for another id without the key (a forged one fails the tag
check, compared in constant time), reveals neither the id nor the order of ids, and is the same
every time for a record, so links stay valid. Nothing is stored: it works on an adopted
database whose ``core`` schema is the backend's (no migration). The key is derived from
``PINLOG_JWT_SECRET`` (:func:`key_from_secret`); rotating that secret changes every public id
(old links answer 404).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from pydantic import SecretStr

#: Every public id starts with this, so it is never mistaken for a record id.
PREFIX = "pr_"
_TAG_BYTES = 16
_ID_BYTES = 8
#: Length of a public id, characters.
PUBLIC_ID_CHARS = len(PREFIX) + len(base64.urlsafe_b64encode(bytes(_TAG_BYTES + _ID_BYTES)))


def key_from_secret(secret: SecretStr | None) -> bytes:
    """The public-id key derived from the JWT secret (its own purpose label, so the key is
    never the token key itself); a fixed placeholder when no secret is configured (every
    caller that serves the API has one: ``load_settings`` generates or requires it)."""
    material = secret.get_secret_value().encode("utf-8") if secret is not None else b""
    return hmac.new(material, b"pinlog public record id v1", hashlib.sha256).digest()


class PublicIds:
    """Encode and check public record ids with one key (module docstring)."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _prf(self, label: bytes, data: bytes) -> bytes:
        return hmac.new(self._key, label + data, hashlib.sha256).digest()

    def encode(self, record_id: int) -> str:
        """The public id of ``record_id`` (1..2^63-1)."""
        raw = int(record_id).to_bytes(_ID_BYTES, "big")
        tag = self._prf(b"tag", raw)[:_TAG_BYTES]
        pad = self._prf(b"pad", tag)[:_ID_BYTES]
        masked = bytes(a ^ b for a, b in zip(raw, pad, strict=True))
        return PREFIX + base64.urlsafe_b64encode(tag + masked).decode("ascii")

    def decode(self, public_id: str) -> int | None:
        """The record id of a valid public id, or None (wrong shape, or a tag that does not
        check out: forged, or made with another key)."""
        if (not isinstance(public_id, str) or len(public_id) != PUBLIC_ID_CHARS
                or not public_id.startswith(PREFIX) or not public_id.isascii()):
            return None
        try:
            blob = base64.urlsafe_b64decode(public_id[len(PREFIX):].encode("ascii"))
        except (binascii.Error, ValueError):
            return None
        if len(blob) != _TAG_BYTES + _ID_BYTES:
            return None
        tag, masked = blob[:_TAG_BYTES], blob[_TAG_BYTES:]
        pad = self._prf(b"pad", tag)[:_ID_BYTES]
        raw = bytes(a ^ b for a, b in zip(masked, pad, strict=True))
        if not hmac.compare_digest(tag, self._prf(b"tag", raw)[:_TAG_BYTES]):
            return None
        record_id = int.from_bytes(raw, "big")
        return record_id if 0 < record_id < 2**63 else None
