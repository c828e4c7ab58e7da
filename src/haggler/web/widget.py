"""The haggling chat widget's script (``widget.js`` beside this module), as the store serves it.

Any site embeds it with ``embed_tag``'s one line; the store's own product pages do the same.
The script is hand-written and served as is: nothing is built at install time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from html import escape
from importlib import resources

from starlette.responses import Response

WIDGET_PATH = "/widget.js"
#: Starlette adds "; charset=utf-8" to a text/ media type.
JAVASCRIPT_TYPE = "text/javascript"
#: Embedding sites point at one fixed URL, so the script is cached briefly and revalidated by
#: its ETag: a new version reaches every site within ten minutes.
CACHE_CONTROL = "public, max-age=600"


@dataclass(frozen=True)
class WidgetScript:
    body: bytes
    etag: str

    @classmethod
    def load(cls) -> WidgetScript:
        """The script as packaged (read once, when the store starts)."""
        body = resources.files(__package__).joinpath("widget.js").read_bytes()
        return cls(body, f'"{hashlib.sha256(body).hexdigest()[:32]}"')

    def response(self, if_none_match: str | None) -> Response:
        """The script, or 304 when the browser's copy (``If-None-Match``) is this one."""
        headers = {"Cache-Control": CACHE_CONTROL, "ETag": self.etag,
                   # Other origins load it with <script>; a host page isolated with COEP may too.
                   "Cross-Origin-Resource-Policy": "cross-origin", "X-Content-Type-Options": "nosniff"}
        if if_none_match and self.etag in {tag.strip() for tag in if_none_match.split(",")}:
            return Response(status_code=304, headers=headers)
        return Response(self.body, media_type=JAVASCRIPT_TYPE, headers=headers)


def embed_tag(base: str, product_id: str) -> str:
    """The one line that puts the haggling chat for ``product_id`` on a page, on any site."""
    return f"<script src='{escape(base + WIDGET_PATH)}' data-product='{escape(product_id)}'></script>"
