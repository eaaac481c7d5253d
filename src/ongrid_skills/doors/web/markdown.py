"""A SKILL.md body as the console shows it: Markdown rendered to HTML that cannot run anything.

CommonMark by markdown-it-py with raw HTML off (``<script>`` and every other tag in the body is
text), images off (the page loads nothing from elsewhere: the Content-Security-Policy would
refuse it anyway) and markdown-it's link check (no ``javascript:``, ``vbscript:``, ``file:``
or ``data:`` link). The body is the skill author's text, the same a model reads with
``read_skill``; this module neither reads a file nor decides anything.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markupsafe import Markup

#: The body shown in the page at most (a longer one is cut, with a note: ``read_skill`` has it).
MAX_SHOWN_CHARS = 200_000


def render_markdown(text: str) -> Markup:
    """``text`` as safe HTML (see the module docstring)."""
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    parser.disable("image")
    cut = len(text) > MAX_SHOWN_CHARS
    html = parser.render(text[:MAX_SHOWN_CHARS])
    if cut:
        html += '<p class="hint">Cut here: <code>read_skill</code> returns the whole body.</p>'
    return Markup(html)  # noqa: S704 - markdown-it escapes the text; raw HTML is off
