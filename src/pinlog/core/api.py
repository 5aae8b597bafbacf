"""Placeholder public API router (issue 4)."""

from fastapi import APIRouter

router = APIRouter()
