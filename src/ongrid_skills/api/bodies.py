"""Request bodies: strict (unknown fields refused), small, documented in OpenAPI."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

#: Deepest args accepted. JSON a little under the parser's own limit (~1000 levels) parses, then
#: makes the store's and the audit's JSON encoders overflow the stack (a 500); no skill needs it.
MAX_ARGS_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def args_problem(value: Any, max_depth: int = MAX_ARGS_DEPTH) -> str | None:
    """Why ``value`` cannot travel as JSON to a skill and into the store, or None.

    Python's JSON parser accepts what JSON does not carry: NaN and Infinity (also as 1e400) and
    lone UTF-16 surrogates (``"\\ud800"``); such args would reach the skill as invalid JSON and
    fail later, after the call ran, when the answer is encoded. Checked without recursion.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return "args hold a number JSON cannot carry (NaN, Infinity or out of range)"
        elif isinstance(item, str):
            if _SURROGATE.search(item):
                return "args hold a string with a lone UTF-16 surrogate"
        elif isinstance(item, dict | list):
            depth += 1
            if depth > max_depth:
                return f"args are nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    if _SURROGATE.search(key):
                        return "args hold a key with a lone UTF-16 surrogate"
                    stack.append((child, depth))
            else:
                stack.extend((child, depth) for child in item)
    return None


class ExecuteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: Any = Field(default=None, description="The args object, validated against the schema.")
    params: Any = Field(default=None, description="Alias of args.")
    persona: str | None = Field(default=None, max_length=128)
    # Strict: the human confirmation is the JSON value true, never a string such as "yes" or "0".
    confirm: StrictBool = Field(
        default=False, description="The caller's explicit human confirmation."
    )
    wait: StrictBool = Field(default=True, description="Wait for the end (false: return at once).")

    @model_validator(mode="after")
    def one_of_args_or_params(self) -> ExecuteBody:
        if self.args is not None and self.params is not None:
            raise ValueError("give args or params, not both")
        problem = args_problem(self.call_args)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def call_args(self) -> Any:
        if self.args is not None:
            return self.args
        return self.params if self.params is not None else {}


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    comment: str | None = Field(default=None, max_length=2000)
