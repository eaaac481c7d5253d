"""The ways in: ``cli``, ``rest``, ``mcp`` (and the served ASGI app that mounts REST and MCP).

Doors never import each other; :mod:`ongrid_skills.doors.asgi` composes the HTTP ones and the CLI
starts it. Each door maps the typed errors of :mod:`ongrid_skills.errors` to its wire once.
"""
