"""Reading an HTML form's body (``application/x-www-form-urlencoded``): the human pages' one input.

A body reaches this code already capped in size by the request edge (``server/edge.py``). Here it
must be UTF-8 before and after its %-escapes are undone, hold at most :data:`MAX_FIELDS` fields,
and name each field once: a browser's own form does all of that, and anything else is refused with
400 before a page sees it. The values' own rules (lengths, characters) are the page's to check.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.requests import Request

from haggler.errors import InvalidInput

FORM_TYPE = "application/x-www-form-urlencoded"
#: A page's forms have a handful of fields; a body with more is not one of them.
MAX_FIELDS = 20


async def read_form_body(request: Request) -> dict[str, str]:
    """The submitted form's fields; InvalidInput when the body is not a form as a browser sends it."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != FORM_TYPE:
        raise InvalidInput(f"send the form as {FORM_TYPE}")
    return parse_form(await request.body())


def parse_form(raw: bytes) -> dict[str, str]:
    """A form body's bytes as its fields (see :func:`read_form_body`)."""
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                          encoding="utf-8", errors="strict", max_num_fields=MAX_FIELDS)
    except UnicodeDecodeError:
        raise InvalidInput("the form is not valid UTF-8") from None
    except ValueError:
        raise InvalidInput(f"the form has more than {MAX_FIELDS} fields") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise InvalidInput(f"the form names the field {name!r} more than once")
        fields[name] = value
    return fields
