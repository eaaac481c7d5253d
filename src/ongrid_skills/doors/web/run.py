"""Running a skill from the console: ``GET/POST /skills/{name}/run``.

The form is generated from the skill's schema (:mod:`~ongrid_skills.doors.web.runform`) and
posts back to itself; ``_action`` says what the post asks:

- ``review`` (the Run button): read the fields into args; a call the gate would run at once
  (or refuse) goes straight to ``manager.submit``; a call that needs a confirmation or
  signatures first gets the confirmation page, which states what will run;
- ``confirm`` (on that page): ``manager.submit`` with the confirmation (dangerous calls: only
  when an admin ticks to sign first); a call still waiting for signers is an approval request;
- ``json`` / ``fields`` / ``edit``: the whole args as one JSON text and back, or back from the
  confirmation page to the form; ``add <field>``: one more row of an array (without JS).

Every permission is the gate's and the manager's, as for ``POST /v1/skills/{name}/execute``:
the submit runs with the session's principal, refused calls are recorded and audited there, and
invalid args come back as the same ``invalid_args`` violations, shown on their fields. A
submitted call continues on its execution page (303). This module never decides a permission.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from ongrid_skills.doors.web.forms import CheckedForm, Form
from ongrid_skills.doors.web.runform import (
    Field,
    Problems,
    fields_of,
    parse_json,
    place,
    read_fields,
    values_of,
    walk,
)
from ongrid_skills.doors.web.sessions import Session, WebSession, manager_of
from ongrid_skills.doors.web.templates import render
from ongrid_skills.errors import Denied, InvalidArgs, InvalidRequest, UnknownPersona, Violation
from ongrid_skills.execution.pipeline import check_runnable
from ongrid_skills.governance.gate import admit, offered, requester_signs_first
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry
from ongrid_skills.skills.schemas import args_problem
from ongrid_skills.types import Role, SkillClass

router = APIRouter()
#: The run form's own fields besides the args (``a/…``).
CONTROL = frozenset({"csrf", "persona", "_mode", "_json", "_action", "_key", "_sign"})
#: An idempotency key of the page: a double-clicked confirmation runs the call once.
KEY_RE = re.compile(r"[A-Za-z0-9_-]{16,64}")
OFFERED_SHOWN = 12


@dataclass(frozen=True, slots=True)
class PersonaOffer:
    """A persona as the picker shows it: its mode and what it is offered (the gate's rule)."""

    name: str
    description: str
    mode: str
    offers_this: bool
    offered: list[str]
    offered_total: int


def persona_offers(registry: Registry, skill: Skill, role: Role) -> list[PersonaOffer]:
    offers = []
    for persona in sorted(registry.personas.values(), key=lambda p: p.name):

        def keep(skill: Skill, persona: Persona = persona) -> bool:
            return offered(skill, persona, role)

        names = [s.name for s in registry.list(keep=keep)]
        offers.append(
            PersonaOffer(
                persona.name,
                persona.description,
                persona.permission_mode.value,
                offered(skill, persona, role),
                names[:OFFERED_SHOWN],
                len(names),
            )
        )
    return offers


def run_blocker(skill: Skill, session: WebSession) -> str | None:
    """Why this session gets no Run button for this skill (acting as itself), or None. The
    server refuses such a post anyway: the button only spares a useless click."""
    if skill.kind == "instructions":
        return f"{skill.name} is an instructions skill: it is read, never run"
    decision = admit(skill, None, role=session.principal.role)
    return decision.reason if decision.action == "deny" else None


def needs_review(skill: Skill, session: WebSession) -> bool:
    """Whether the Run button leads to a confirmation page first (acting as itself)."""
    return admit(skill, None, role=session.principal.role).action == "approve"


@router.get("/skills/{name}/run")
async def run_form(
    request: Request,
    name: str,
    session: Session,
    persona: Annotated[str | None, Query(max_length=200)] = None,
    again: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    manager = manager_of(request)
    skill = manager.registry.resolve(name)
    if skill.kind == "instructions":  # read, never run: its page shows the instructions
        return RedirectResponse(f"/skills/{quote(skill.name, safe='')}", status_code=303)
    # A schema that names no properties takes any: the JSON box is its form.
    untyped = isinstance(skill.schema, dict) and not isinstance(
        skill.schema.get("properties"), dict
    )
    if again:  # "Run again" on an execution page: the same args, the same persona
        execution = manager.get(again)
        if execution.skill != skill.name:
            raise InvalidRequest(f"execution {again} is a call of {execution.skill}, not {name}")
        values = None if untyped else values_of(fields_of(skill.schema), execution.args)
        text = json.dumps(execution.args, indent=2, ensure_ascii=False)
        return _form_page(
            request,
            session,
            skill,
            mode="fields" if values is not None else "json",
            persona=persona if persona is not None else execution.persona or "",
            values=values,
            json_text=text,
        )
    return _form_page(
        request, session, skill, mode="json" if untyped else "fields", persona=persona or ""
    )


@router.post("/skills/{name}/run")
async def run_post(request: Request, name: str, session: Session, form: CheckedForm) -> Response:
    manager = manager_of(request)
    skill = manager.registry.resolve(name)
    check_runnable(skill)
    action = form.get("_action") or "review"
    mode = form.get("_mode") or "fields"
    if mode not in ("fields", "json"):
        raise InvalidRequest("_mode must be fields or json")
    persona = form.get("persona") or ""
    key = form.get("_key") or ""
    if key and not KEY_RE.fullmatch(key):
        raise InvalidRequest("_key is not a key this form made")
    fields = fields_of(skill.schema)
    problems = Problems()
    json_text = form.get("_json") or ""
    if mode == "json":
        args, problem = parse_json(json_text) if json_text.strip() else ({}, None)
        if problem is not None:
            problems.add("_json", problem)
    else:
        args, problems = read_fields(fields, form, CONTROL)
    page: dict[str, Any] = {"persona": persona, "key": key}

    if action in ("json", "fields", "edit") or action.startswith("add "):
        if problems:
            return _form_page(request, session, skill, form, mode, problems, status=400, **page)
        if action == "json":
            text = json.dumps(args, indent=2, ensure_ascii=False)
            return _form_page(request, session, skill, mode="json", json_text=text, **page)
        if action.startswith("add "):
            return _form_page(request, session, skill, form, extra_row=action[4:], **page)
        values = values_of(fields, args)
        if values is None:
            problems.general.append("these args do not fit the fields: edit them as JSON")
            text = json.dumps(args, indent=2, ensure_ascii=False)
            return _form_page(
                request, session, skill, form, "json", problems, json_text=text, **page
            )
        return _form_page(request, session, skill, values=values, **page)
    if action not in ("review", "confirm"):
        raise InvalidRequest(f"unknown action {action[:40]!r}")
    if problems:
        if mode == "fields":  # say at once what else the server would refuse
            place(fields, _violations(skill, args), problems, skip_known=True)
        return _form_page(request, session, skill, form, mode, problems, status=400, **page)

    principal = session.principal
    try:
        who = manager.registry.persona(persona) if persona else None
    except UnknownPersona as exc:
        problems.general.append(exc.message)
        return _form_page(request, session, skill, form, mode, problems, status=400, **page)
    if action == "review" and admit(skill, who, role=principal.role).action == "approve":
        violations = _violations(skill, args)
        if violations:
            place(fields, violations, problems)
            return _form_page(request, session, skill, form, mode, problems, status=400, **page)
        return _confirm_page(request, session, skill, args, persona, who)
    sign_first = form.get("_sign") == "1"
    confirm = action == "confirm" and (skill.skill_class is not SkillClass.DANGEROUS or sign_first)
    try:
        execution = await manager.submit(
            skill.name,
            args,
            principal=principal,
            persona=persona or None,
            confirm=confirm,
            wait=False,
            idempotency_key=key or None,
        )
    except InvalidArgs as exc:
        place(fields, exc.violations, problems)
        return _form_page(request, session, skill, form, mode, problems, status=400, **page)
    except Denied as exc:
        problems.general.append(exc.message)
        return _form_page(request, session, skill, form, mode, problems, status=403, **page)
    return RedirectResponse(f"/executions/{execution.id}", status_code=303)


def _violations(skill: Skill, args: Any) -> list[Violation]:
    """The violations ``manager.submit`` would answer, checked before asking to confirm."""
    problem = args_problem(args)
    if problem is not None:
        return [Violation("", problem)]
    return skill.validate(args)


def _form_page(
    request: Request,
    session: WebSession,
    skill: Skill,
    form: Form | None = None,
    mode: str = "fields",
    problems: Problems | None = None,
    *,
    status: int = 200,
    persona: str = "",
    key: str = "",
    values: dict[str, list[str]] | None = None,
    json_text: str | None = None,
    extra_row: str | None = None,
) -> Response:
    """The run form: the fields (with what was posted, or ``values``) or the JSON editor."""
    registry = manager_of(request).registry
    fields = fields_of(skill.schema)
    if values is None:
        values = {}
        if form is not None:
            values = {f.name: form.all(f.name) for f in walk(fields)}
    if extra_row is not None:
        values.setdefault(extra_row, [])
    if json_text is None:
        json_text = (form.get("_json") if form is not None else None) or "{}"
    ids = {f.name: f"f{i}" for i, f in enumerate(walk(fields))}
    problems = problems or Problems()
    return render(
        request,
        "run.html",
        status=status,
        section="catalogue",
        title=f"Run {skill.name}",
        skill=skill,
        fields=fields,
        ids=ids,
        values=values,
        rows=_rows(fields, values, extra_row),
        problems=problems,
        summary=_summary(fields, ids, problems),
        mode=mode,
        json_text=json_text,
        persona=persona,
        personas=persona_offers(registry, skill, session.principal.role),
        blocker=run_blocker(skill, session),
        review=needs_review(skill, session),
        key=key or secrets.token_urlsafe(18),
    )


def _summary(
    fields: list[Field], ids: dict[str, str], problems: Problems
) -> list[tuple[str | None, str, str]]:
    """The problems in the order of the form: (the field's id to link to, where, what)."""
    found: list[tuple[str | None, str, str]] = [(None, "", m) for m in problems.general]
    places = [(f.pointer, ids[f.name] + ("-0" if f.kind == "array" else "")) for f in walk(fields)]
    for pointer, target in [*places, ("_json", "args-json")]:
        for message in problems.by_field.get(pointer, []):
            found.append((target, pointer, message))
    return found


def _rows(
    fields: list[Field], values: dict[str, list[str]], extra: str | None
) -> dict[str, list[str]]:
    """The rows each array field shows: its values, then one empty row (two after an add)."""
    return {
        f.name: [
            *(v for v in values.get(f.name, []) if v != ""),
            "",
            *([""] if f.name == extra else []),
        ]
        for f in walk(fields)
        if f.kind == "array"
    }


def _confirm_page(
    request: Request,
    session: WebSession,
    skill: Skill,
    args: Any,
    persona: str,
    who: Persona | None,
) -> Response:
    """What will run, before it does: the call, its args, and who must still agree."""
    principal = session.principal
    dangerous = skill.skill_class is SkillClass.DANGEROUS
    decision = admit(skill, who, role=principal.role)
    return render(
        request,
        "run_confirm.html",
        section="catalogue",
        title=f"Confirm {skill.name}",
        skill=skill,
        args_json=json.dumps(args, ensure_ascii=False, separators=(",", ":")),
        args_pretty=json.dumps(args, ensure_ascii=False, indent=2),
        persona=persona,
        dangerous=dangerous,
        signatures=decision.signatures_required,
        may_sign_first=requester_signs_first(principal, skill.skill_class, True),
        key=secrets.token_urlsafe(18),
    )
