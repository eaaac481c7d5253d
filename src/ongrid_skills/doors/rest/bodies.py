"""Request bodies: strict (unknown fields refused), small, documented in OpenAPI."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from ongrid_skills.skills.schemas import args_problem


class ExecuteBody(BaseModel):
    # OpenAPI says what the validator below enforces: args and params are not both given.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "not": {
                "required": ["args", "params"],
                "properties": {
                    "args": {"not": {"type": "null"}},
                    "params": {"not": {"type": "null"}},
                },
            }
        },
    )

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
