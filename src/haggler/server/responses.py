"""JSON responses with an explicit UTF-8 content type, and the negotiate.v1 error shape."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict
from starlette.responses import Response

JSON_TYPE = "application/json; charset=utf-8"


def dump_json(content: Any) -> bytes:
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class JSON(Response):
    media_type = JSON_TYPE

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, bytes) else dump_json(content)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSON:
    return JSON({"error": message}, status_code=status, headers=headers)


class ErrorBody(BaseModel):
    """Every error of the store and the exchange: ``{"error": "..."}``, the message naming what is wrong."""

    model_config = ConfigDict(extra="forbid")
    error: str
