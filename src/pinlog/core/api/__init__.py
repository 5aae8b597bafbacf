"""core's public REST API under ``/v1`` (JSON, member JWT auth) and the operator API under ``/ops/v1``
(internal secret; what the ``pinlog`` command asks a running server). ``router`` is mounted by the app."""

from fastapi import APIRouter

from pinlog.core.api.routes import contexts, me, ops, records, search

router = APIRouter()
router.include_router(records.router)
router.include_router(records.public_router)
router.include_router(contexts.router)
router.include_router(me.router)
router.include_router(search.router)
router.include_router(ops.router)

__all__ = ["router"]
