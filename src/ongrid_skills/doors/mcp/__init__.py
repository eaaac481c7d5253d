"""The MCP door (SPEC §10): tools/list and tools/call over stdio and streamable HTTP.

One concept per module, imported in this order (each only from the ones above it):

- ``tools``         what a caller is offered: the ``tools/list`` answer of a (persona, role) view
- ``results``       an execution or a refusal as a ``CallToolResult``
- ``session``       per-connection state: log level, ``list_changed`` after reloads
- ``follow``        a running call followed to its end, its timeline forwarded to the client
- ``confirmation``  one human confirmation by elicitation; a "no" recorded as rejected
- ``get_execution`` the door's own tool: status and outcome of an execution
- ``resources``     SKILL.md skills and their bundled files as ``skill://`` resources
- ``server``        ``create_mcp_server``: the SDK's low-level server and its handlers
- ``transports``    ``serve_stdio``; ``McpHttp`` and ``mcp_route`` for streamable HTTP

The door answers no permission question itself (:mod:`ongrid_skills.governance.gate` does) and
imports no other door. Importing it imports the MCP SDK (about a second): the CLI and the served
app import it only when they serve MCP.
"""

from ongrid_skills.doors.mcp.server import create_mcp_server
from ongrid_skills.doors.mcp.transports import McpEndpoint, McpHttp, mcp_route, serve_stdio

__all__ = ["McpEndpoint", "McpHttp", "create_mcp_server", "mcp_route", "serve_stdio"]
