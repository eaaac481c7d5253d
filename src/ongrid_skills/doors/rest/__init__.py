"""The REST door (SPEC §9): ``/v1`` routes, bearer-token auth, errors mapped to HTTP once."""

from ongrid_skills.doors.rest.app import build_rest_app

__all__ = ["build_rest_app"]
