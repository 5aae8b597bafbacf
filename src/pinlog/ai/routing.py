"""Which embedding profile this replica uses right now (SPEC §9.1, issue 24).

A replica is configured with one or two embedding providers (``PINLOG_EMBEDDING_*`` and, during
a switch, ``PINLOG_NEXT_EMBEDDING_*``), each with its calibration and judge: one
:class:`ProfileModels` per profile. The DATABASE says which profile is *active* and which one
is *building* (``ai.embedding_profile``, :func:`read_roles`); with no row (before any switch) the
first configured profile is active, as before profiles existed. :class:`ProfileRouter` holds the
replica's models and its view of the roles, refreshed by the ai runtime every heartbeat
(``pinlog.db.process_settings.HEARTBEAT_SECONDS``) and whenever a guard says the roles moved:

* search, keywords and the embedding stage use the active profile's models
  (:meth:`ProfileRouter.active`); a replica with no provider for it refuses
  (:class:`ProfileNotServed`, an ERROR logged once per value by the drift check of
  :func:`pinlog.db.process_settings.profile_drift`);
* a context embedded while a profile is building also gets that profile's vector
  (:meth:`ProfileRouter.building`).

Correctness never rests on this view being fresh: the embedding save writes the active table
only under the active profile's name (``ai/state.sql`` ``upsert_embedding``), and a search reads
the roles in the same snapshot as the vectors (:func:`pinlog.ai.search.search`).

The dimension checks of SPEC §9 for any profile's models (the start-up probe, the stored vectors)
are here too (:func:`probe_dimension`, :func:`check_stored_dimensions`): the ai runtime runs them
for every configured profile, ``pinlog profiles build`` for the building one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

from pinlog.ai import state
from pinlog.ai.calibration import Calibration
from pinlog.ai.errors import ModelError, TransientModelError
from pinlog.ai.ports import EmbeddingProvider, Judge
from pinlog.db.process_settings import profile_drift
from pinlog.db.sql import Queries
from pinlog.errors import StartupError

log = logging.getLogger(__name__)
q = Queries("pinlog.ai", "profiles.sql", fragments_from=("state.sql",))

#: The roles of ``ai.embedding_profile`` (SPEC §9.1).
ACTIVE, BUILDING, KEPT = "active", "building", "kept"

#: The text embedded once at start-up to learn the provider's real output length (SPEC §9).
DIMENSION_PROBE_TEXT = "dimension probe"


class ProfileNotServed(TransientModelError):
    """The database's active profile is not one this replica has a provider for
    (SPEC §9.1): search answers 503 and no stage is worked on (transient: another replica, or
    this one once reconfigured, does it)."""


class ProfileSwitched(Exception):  # noqa: N818 - a signal, not an error
    """A search found another active profile in its snapshot than the one its query was
    embedded with (an activation committed meanwhile): re-read the roles and search again."""

    def __init__(self, active: str) -> None:
        super().__init__(active)
        self.active = active


@dataclass(frozen=True)
class ProfileRoles:
    """What ``ai.embedding_profile`` records: the active and the building profile (None when
    none is recorded; no active row = before any switch)."""

    active: str | None = None
    building: str | None = None


async def read_roles(conn: AsyncConnection) -> ProfileRoles:
    """The recorded roles (one indexed read of a tiny table)."""
    row = (await conn.execute(q("read_roles"))).one()
    return ProfileRoles(row.active, row.building)


@dataclass(frozen=True)
class ProfileModels:
    """Everything one embedding profile needs on this replica.

    Attributes:
        profile: its profile string (SPEC §9).
        provider: its (micro-batched) embedding provider; ``provider.profile == profile``.
        calibration: its thresholds (candidate floor, judge, search cuts; SPEC §8, §10).
        judge: its keyword judge (None where no keyword stage runs, e.g. a backfill).
    """

    profile: str
    provider: EmbeddingProvider
    calibration: Calibration
    judge: Judge | None = None

    @property
    def dimension(self) -> int:
        """The provider's vector length."""
        return self.provider.dimension


class ProfileRouter:
    """This replica's models by profile and its view of the database's roles (SPEC §9.1).

    Args:
        models: one per configured profile, the first provider's first (it is active while the
            database records no active profile).
        roles: the initial view (default: nothing recorded).
    """

    def __init__(self, models: Sequence[ProfileModels], roles: ProfileRoles | None = None) -> None:
        if not models:
            raise ValueError("a router needs the models of at least one profile")
        self.primary = models[0].profile
        self.models = {m.profile: m for m in models}
        self.roles = roles or ProfileRoles()
        self._reported: str | None = None

    @property
    def served(self) -> tuple[str, ...]:
        """The profiles this replica has models for, the first provider's first."""
        return tuple(self.models)

    @property
    def active_profile(self) -> str:
        """The profile search, keywords and the embedding stage use: the database's active
        profile, or the first provider's while none is recorded."""
        return self.roles.active or self.primary

    def serves_active(self) -> bool:
        """True when this replica has models for the active profile."""
        return self.active_profile in self.models

    def active(self) -> ProfileModels:
        """The active profile's models.

        Raises:
            ProfileNotServed: this replica has no provider for the database's active profile.
        """
        models = self.models.get(self.active_profile)
        if models is None:
            raise ProfileNotServed(f"this replica has no provider for the active embedding "
                                   f"profile {self.active_profile}")
        return models

    def building(self) -> ProfileModels | None:
        """The building profile's models when this replica has them (else None: the backfill
        fills what this replica does not embed)."""
        building = self.roles.building
        if building is None or building == self.active_profile:
            return None
        return self.models.get(building)

    def models_for(self, profile: str) -> ProfileModels | None:
        """The models of ``profile`` if this replica has them."""
        return self.models.get(profile)

    def update(self, roles: ProfileRoles) -> bool:
        """Take ``roles`` as the new view; logs the drift ERROR (once per active value) when
        this replica cannot serve the active profile. Returns True when the view changed."""
        changed = roles != self.roles
        self.roles = roles
        problem = profile_drift(roles.active, self.served)
        if problem is None:
            self._reported = None
        elif self._reported != roles.active:
            self._reported = roles.active
            log.error(problem, extra={"profile": roles.active})
        if changed:
            log.info("embedding profile roles", extra={"profile": self.active_profile,
                                                       "reason": f"building {roles.building}"})
        return changed

    async def refresh(self, conn: AsyncConnection) -> bool:
        """Re-read the roles on ``conn`` (:meth:`update`). Returns True when they changed."""
        return self.update(await read_roles(conn))


# --- SPEC §9 dimension checks, for any profile's models ------------------------------------------

def dimension_fix(profile: str, what: str, dimension: int) -> str:
    """The one-line refusal of SPEC §9's dimension check."""
    return (f"embedding dimension mismatch under profile {profile}: {what}, expected {dimension} "
            "(PINLOG_EMBEDDING_DIMENSION). A profile names one vector space: set a new "
            "PINLOG_EMBEDDING_PROFILE, then run `pinlog presets load` and "
            "`pinlog reprocess --profile`")


async def probe_dimension(provider: EmbeddingProvider, profile: str, dimension: int) -> None:
    """Embed one probe text with ``provider`` (unbatched: the model itself) and compare the
    real output length with ``dimension`` (SPEC §9). A transient failure (endpoint briefly
    down) only skips the probe (WARNING): every later answer is length-checked anyway.

    Raises:
        StartupError: the provider answers with another length (one line naming the fix), or
            refuses the probe permanently.
    """
    try:
        out = await provider.embed([DIMENSION_PROBE_TEXT], "passage")
        got = int(np.asarray(out).shape[-1])
    except ModelError as exc:
        if exc.transient:
            log.warning("embedding dimension probe skipped: provider unavailable",
                        extra={"error_class": "transient", "profile": profile})
            return
        if "vector length" not in str(exc):
            raise StartupError(f"embedding provider refused the start-up probe: {exc}") from None
        raise StartupError(dimension_fix(profile, f"provider says {exc}", dimension)) from None
    if got != dimension:
        raise StartupError(dimension_fix(profile, f"the provider returns {got}", dimension))


async def check_stored_dimensions(conn: AsyncConnection, profile: str, dimension: int) -> None:
    """Preset vectors, context embeddings and shadow vectors stored for ``profile`` must have
    ``dimension`` (SPEC §9; the shadow ones: SPEC §9.1, the building and kept profiles).

    Raises:
        StartupError: one line naming what differs and the fix.
    """
    presets, other = await state.stored_dimensions(conn, profile, dimension)
    wrong = [d for d in presets if d != dimension]
    if wrong:
        raise StartupError(dimension_fix(profile, f"stored preset vectors have {wrong[0]}",
                                         dimension))
    if other is not None:
        raise StartupError(dimension_fix(profile, f"stored embeddings have {other}", dimension))
    shadow = [int(r.dims) for r in await conn.execute(q("shadow_dimensions"),
                                                       {"profile": profile})]
    wrong = [d for d in shadow if d != dimension]
    if wrong:
        raise StartupError(dimension_fix(profile, f"stored vectors of the profile switch have "
                                         f"{wrong[0]}", dimension))
