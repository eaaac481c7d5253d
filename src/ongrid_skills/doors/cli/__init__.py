"""The ``ongrid-skills`` command line: local commands, ``serve``, ``mcp`` and ``chat``."""
