"""Placeholder internal API router (issue 3)."""

from fastapi import APIRouter

router = APIRouter()
