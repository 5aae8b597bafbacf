"""The app backend's AI duties (SPEC §1): context lifecycle, dispatch, rescan, finalizer, API."""
