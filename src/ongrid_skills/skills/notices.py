"""The loader's warnings: each with a stable code, the key it is about and a message.

A warning never refuses a file: the file loads (or is knowingly left out) and the warning says
what was changed, ignored or not run. Doors show the code beside the message (``GET
/v1/loader``'s ``warnings``, ``validate``, a pack's install result), so operators and scripts
match on the code, never on the text. The codes (docs/skills.md lists them):

========================== =================================================================
``name_normalised``        a name that is not snake_case was normalised
``frontmatter_flat``       frontmatter that is not YAML was read as flat ``key: value`` lines
``field_capped``           a declared text or field over its size cap was cut or not kept
``unknown_key``            a key we do not read is kept and shown, not used
``tool_key_ignored``       a key of a ``tools`` entry we do not read
``foreign_tools``          a ``tools`` key in another format: kept, loaded as instructions
``activation_overridden``  ``metadata.ongrid.activation`` overrides the top-level one
``openclaw_field_ignored`` a malformed openclaw requirement, ignored as openclaw does
``confirmation_unknown``   a ``confirmation`` value that is none of ours: ``required`` applies
``impl_unavailable``       no tool's impl exists in this build: loaded as instructions
``edge_instructions``      ``scope: edge`` on a prompt-only skill: loaded as instructions
``credentials_not_used``   credentials declared on a skill with no process to give them to
``version_unchecked``      a ``min_ongrid_version`` that is not a version
``hooks_not_run``          a plugin's hooks: reported, never run
``mcp_not_run``            a plugin's MCP servers: reported, never started
``skill_not_listed``       an openclaw plugin's skill outside its manifest's ``skills``
``command_skipped``        a Claude Code command file that cannot be a skill
========================== =================================================================
"""

from __future__ import annotations

from typing import NamedTuple

NAME_NORMALISED = "name_normalised"
FRONTMATTER_FLAT = "frontmatter_flat"
FIELD_CAPPED = "field_capped"
UNKNOWN_KEY = "unknown_key"
TOOL_KEY_IGNORED = "tool_key_ignored"
FOREIGN_TOOLS = "foreign_tools"
ACTIVATION_OVERRIDDEN = "activation_overridden"
OPENCLAW_FIELD_IGNORED = "openclaw_field_ignored"
CONFIRMATION_UNKNOWN = "confirmation_unknown"
IMPL_UNAVAILABLE = "impl_unavailable"
EDGE_INSTRUCTIONS = "edge_instructions"
CREDENTIALS_NOT_USED = "credentials_not_used"
VERSION_UNCHECKED = "version_unchecked"
HOOKS_NOT_RUN = "hooks_not_run"
MCP_NOT_RUN = "mcp_not_run"
SKILL_NOT_LISTED = "skill_not_listed"
COMMAND_SKIPPED = "command_skipped"

CODES = frozenset(
    {
        NAME_NORMALISED,
        FRONTMATTER_FLAT,
        FIELD_CAPPED,
        UNKNOWN_KEY,
        TOOL_KEY_IGNORED,
        FOREIGN_TOOLS,
        ACTIVATION_OVERRIDDEN,
        OPENCLAW_FIELD_IGNORED,
        CONFIRMATION_UNKNOWN,
        IMPL_UNAVAILABLE,
        EDGE_INSTRUCTIONS,
        CREDENTIALS_NOT_USED,
        VERSION_UNCHECKED,
        HOOKS_NOT_RUN,
        MCP_NOT_RUN,
        SKILL_NOT_LISTED,
        COMMAND_SKIPPED,
    }
)


class Notice(NamedTuple):
    """One warning about a file: its stable ``code``, the frontmatter ``key`` it is about (for
    ``validate``'s line number) and the message shown."""

    code: str
    key: str
    message: str


Notices = list[Notice]

__all__ = ["CODES", "Notice", "Notices"]
