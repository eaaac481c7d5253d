"""The web door (SPEC §14): the operator's console at ``/``, server-rendered from Jinja2
templates with our own CSS and JS (no CDN, no third-party code), behind a session cookie.

One module per concept: ``app`` (assembly), ``security`` (headers, same-origin, CSRF token),
``sessions`` (cookie → session → principal), ``forms`` (the checked form of every state change),
``login``, ``throttle``, ``templates`` (render, navigation), ``assets`` (hashed static files),
``errors`` (codes → pages), ``home`` (what needs the person logged in), ``catalogue`` (the
catalogue's query and pages), ``pages`` (catalogue routes), ``live`` (event streams of the live
parts), ``runform`` (a schema → form fields and back), ``run`` (the run form and its confirmation),
``execution_page`` (an execution's page and its cancel), ``approvals`` and ``approval_cards`` (the
approvals inbox), ``history`` (executions, audit), ``hosts`` (the edge workers), ``personas``,
``persona_editor`` (stored personas: admins only), ``agent_runs``, ``chat`` and ``chat_view`` (the
chat with the agent), ``packs`` and ``pack_views`` (the packs page: admins only), ``credentials``
and ``credential_views`` (the credentials page and the binders of skill and pack pages: admins
only). It never imports another door (what it shares with REST about packs is
``doors.pack_changes``).
"""

from ongrid_skills.doors.web.app import build_web_app

__all__ = ["build_web_app"]
