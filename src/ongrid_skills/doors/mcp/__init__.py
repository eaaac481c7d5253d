"""The MCP door (SPEC §10): tools/list and tools/call over stdio and streamable HTTP."""
