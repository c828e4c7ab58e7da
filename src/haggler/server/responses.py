"""JSON responses with an explicit UTF-8 content type, and the negotiate.v1 error shape."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

JSON_TYPE = "application/json; charset=utf-8"


def dump_json(content: Any) -> bytes:
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class JSON(Response):
    media_type = JSON_TYPE

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, bytes) else dump_json(content)


#: The ``request_id`` every error body carries: its answer's ``X-Request-Id`` (an exchange refusal
#: replayed for its Idempotency-Key carries the first request's). Optional in the document only
#: because refusals stored before request ids existed are replayed without one.
RequestId = Annotated[str | None, Field(description="The id of the request (its answer's X-Request-Id), "
                                                    "to quote to the store's operator")]


class ErrorBody(BaseModel):
    """Every error of the store and the exchange: ``{"error": "...", "request_id": "..."}``, the
    message naming what is wrong."""

    model_config = ConfigDict(extra="forbid")
    error: str
    request_id: RequestId = None
