"""Persistence: executions and their events, approvals, the audit chain, API tokens."""

from ongrid_skills.store.facade import Store, open_store

__all__ = ["Store", "open_store"]
