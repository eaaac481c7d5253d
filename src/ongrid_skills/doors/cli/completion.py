"""Shell completion of skill and persona names and of ``run``'s ``KEY=VALUE`` args (click's
completion protocol, docs/cli.md).

The shell asks with ``_ONGRID_SKILLS_COMPLETE=bash_complete`` (or ``zsh_complete``,
``fish_complete``) on every Tab; click parses the words typed so far without running any command,
then calls these callbacks. They load the registry of the same dirs a command would (settings,
``--config``, ``-d``), quietly: no loader line, no log line, no store opened, and nothing on
error (a broken config completes nothing rather than printing into the operator's prompt).

bash is told apart: it cuts words at the characters of ``COMP_WORDBREAKS`` (``=`` and ``:``
among them) and hands ``path=/v`` over as ``path``, ``=``, ``/v``, then replaces only the text
after the last ``=``; zsh and fish hand over and replace whole words. :class:`BashWords` glues
the pieces back before click parses them and cuts each answer to what bash replaces, so the
callbacks see whole words in every shell. Its script is click's with two changes: it passes
``COMP_WORDBREAKS`` along, and a completed ``KEY=`` gets no space after it (the value follows).
"""

from __future__ import annotations

import logging
import os

import click
from click.shell_completion import BashComplete, CompletionItem, add_completion_class

from ongrid_skills.doors.cli import args as cli_args
from ongrid_skills.doors.cli.output.terminal import one_line
from ongrid_skills.errors import SkillError
from ongrid_skills.settings import Settings
from ongrid_skills.skills.registry import Registry, build_registry

#: bash's word breaks when the script does not say (bash's default, ``=`` and ``:`` included).
_DEFAULT_BREAKS = "\"'><=;|&(:"
#: The break characters that may sit inside one of our words (KEY=VALUE, KEY:=JSON, pack:name).
_INNER = "=:"
_WITH_BREAKS = 'COMP_WORDBREAKS="$COMP_WORDBREAKS" COMP_WORDS='
_NOSPACE = """
    if [[ ${#COMPREPLY[@]} -gt 0 && ${COMPREPLY[0]} == *= ]]; then
        compopt -o nospace
    fi

    return 0
}"""


class BashWords(BashComplete):
    """click's bash completion with whole words: see the module docstring."""

    source_template = BashComplete.source_template.replace("COMP_WORDS=", _WITH_BREAKS, 1).replace(
        "\n    return 0\n}", _NOSPACE, 1
    )

    def get_completion_args(self) -> tuple[list[str], str]:
        args, incomplete = super().get_completion_args()
        words = glued([*args, incomplete], self._breaks())
        return words[:-1], words[-1]

    def get_completions(self, args: list[str], incomplete: str) -> list[CompletionItem]:
        items = super().get_completions(args, incomplete)
        cut = max(incomplete.rfind(c) for c in self._breaks()) + 1
        head = incomplete[:cut]
        if not head:
            return items
        # What bash replaces is what follows the last break; an item that does not repeat
        # the word's head (an option's value after "--persona=") is that part already.
        return [
            CompletionItem(item.value[cut:], type=item.type, help=item.help)
            if item.value.startswith(head)
            else item
            for item in items
        ]

    @staticmethod
    def _breaks() -> str:
        breaks = os.environ.get("COMP_WORDBREAKS", _DEFAULT_BREAKS)
        return "".join(c for c in _INNER if c in breaks)


add_completion_class(BashWords, "bash")


def glued(pieces: list[str], breaks: str) -> list[str]:
    """bash's pieces of a word glued back: a piece made of break characters joins the pieces
    on either side (``path``, ``=``, ``/v`` → ``path=/v``; ``limits``, ``:``, ``=``, … →
    ``limits:=…``).

    >>> glued(["run", "x", "path", "=", "/v", "mode", "="], "=:")
    ['run', 'x', 'path=/v', 'mode=']
    >>> glued(["run", "pack", ":", "name"], "=:")
    ['run', 'pack:name']
    """
    words: list[str] = []
    open_end = False
    for piece in pieces:
        if breaks and piece and words and not piece.strip(breaks):
            words[-1] += piece
            open_end = True
        elif open_end:
            words[-1] += piece
            open_end = False
        else:
            words.append(piece)
    return words


def skill_names(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The names of the loaded skills that start with ``incomplete``, each with its summary."""
    registry = _quiet_registry(ctx)
    if registry is None:
        return []
    return [
        CompletionItem(skill.name, help=one_line(skill.description, 60))
        for skill in registry.list()
        if skill.name.startswith(incomplete)
    ]


def persona_names(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The names of the loaded personas that start with ``incomplete``."""
    registry = _quiet_registry(ctx)
    if registry is None:
        return []
    return [
        CompletionItem(name) for name in sorted(registry.personas) if name.startswith(incomplete)
    ]


def arg_words(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``run NAME``'s words: the ``KEY=`` of each property of the skill's schema not given yet
    (an array's stays, it may be repeated), each with its description; after ``KEY=``, the
    values of a property that has few (enum, const, boolean). Nothing for a JSON object."""
    name = ctx.params.get("name")
    words = list(ctx.params.get("words") or ())
    if not name or incomplete.startswith(("{", "[", "-")):
        return []
    registry = _quiet_registry(ctx)
    try:
        schema = registry.get(name).schema if registry is not None else None
    except SkillError:
        return []
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    key, equals, typed = incomplete.partition("=")
    if equals:
        if key.endswith(":") or key not in properties:
            return []
        values = cli_args.choices(properties[key])
        return [CompletionItem(f"{key}={v}") for v in values if v.startswith(typed)]
    given = set(cli_args.given_keys(words))
    return [
        CompletionItem(f"{key}=", help=_described(prop))
        for key, prop in properties.items()
        if key.startswith(incomplete)
        and cli_args.typable(key)
        and (key not in given or cli_args.repeatable(prop))
    ]


def _described(prop: object) -> str | None:
    text = prop.get("description") if isinstance(prop, dict) else None
    return one_line(text, 60) if isinstance(text, str) and text.strip() else None


def _quiet_registry(ctx: click.Context) -> Registry | None:
    # The group's callback has not run (completion parses, never invokes): read its options
    # from the parsed parameters, as Context would get them.
    root = ctx.find_root().params
    skills_dirs = tuple(os.path.abspath(d) for d in root.get("skills_dirs") or ())
    logging.disable(logging.CRITICAL)  # a warning printed now would land in the prompt
    try:
        settings = Settings.load(config=root.get("config"))
        return build_registry(
            (*settings.external_dirs, *skills_dirs),
            settings.persona_dirs,
            native_dirs=settings.native_dirs,
            bundled=settings.bundled_skills,
            config=settings.config,
            sink=lambda _line: None,
            default_timeout=settings.default_timeout_seconds,
        )
    except Exception:  # any failure: complete nothing, never a traceback at the prompt
        return None
    finally:
        logging.disable(logging.NOTSET)
