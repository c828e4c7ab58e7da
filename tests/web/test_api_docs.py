"""``/docs`` without a browser: the page names only the store's own files, each is served with
its media type, and the vendored Swagger UI is the release its ``VERSION`` file records.
(``tests/browser/test_api_docs.py`` renders it in Chromium with the network cut off.)"""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from pathlib import PurePosixPath
from urllib.parse import urljoin, urlsplit

from tests.support.html_tags import Tags

#: The media type each kind of file must be served with (Starlette adds a charset to text/ ones).
MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".png": "image/png"}
_URL = re.compile(r"""(?:https?:)?//[^\s"'<>]+""", re.IGNORECASE)


def test_the_docs_page_loads_only_the_stores_own_files_each_with_its_media_type(store) -> None:
    page = store.http.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert "/openapi.json" in page.text
    tags = Tags(page.text)
    loaded = [attrs.get("src") for attrs in tags.all("script")] + [attrs.get("href") for attrs in tags.all("link")]
    # Swagger UI's script and style, its icon, the start-up script; no inline script (the CSP allows none).
    assert len(loaded) == 4 and None not in loaded, loaded
    origin = urlsplit(store.base).netloc
    for url in loaded:
        absolute = urljoin(store.base + "/docs", url)
        assert urlsplit(absolute).netloc == origin, url
        served = store.http.get(absolute)
        assert served.status_code == 200, url
        assert served.headers["content-type"] == MEDIA_TYPES[PurePosixPath(urlsplit(url).path).suffix], url
        assert served.headers["x-content-type-options"] == "nosniff"
        assert "immutable" in served.headers["cache-control"]
    # No other URL anywhere in the page (a CDN's, FastAPI's icon): an absolute one would be another host.
    assert [url for url in _URL.findall(page.text) if urlsplit(urljoin(store.base, url)).netloc != origin] == []
    assert "script-src 'self';" in page.headers["content-security-policy"]


def test_an_asset_url_changes_with_its_content_and_an_unknown_name_is_404(store) -> None:
    from haggler.web import api_docs

    bundle = api_docs.assets()["swagger-ui-bundle.js"]
    assert bundle.url.endswith("?v=" + hashlib.sha256(bundle.body).hexdigest()[:16])
    missing = store.http.get("/docs/assets/VERSION")
    assert missing.status_code == 404 and "no such file" in missing.json()["error"]


def test_no_redoc_page_or_other_docs_page_is_served(store) -> None:
    """ReDoc would load itself from a CDN; FastAPI's OAuth2 redirect page belongs to its own /docs."""
    for path in ("/redoc", "/docs/oauth2-redirect"):
        assert store.http.get(path).status_code == 404, path
    paths = store.http.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith("/docs")]


def test_the_vendored_swagger_ui_is_the_release_its_version_file_records() -> None:
    """``scripts/vendor-swagger-ui`` writes the files and their sha256s together: a file edited,
    added or dropped by hand since shows here."""
    folder = resources.files("haggler.web").joinpath("swagger_ui")
    first, _, *sums = folder.joinpath("VERSION").read_text("utf-8").splitlines()
    assert re.fullmatch(r"swagger-ui-dist \d+\.\d+\.\d+", first)
    recorded = dict(reversed(line.split("  ", 1)) for line in sums)
    assert {"LICENSE", "NOTICE", "swagger-ui-bundle.js", "swagger-ui.css"} <= recorded.keys()
    assert {entry.name for entry in folder.iterdir()} == recorded.keys() | {"VERSION"}
    for name, digest in recorded.items():
        assert hashlib.sha256(folder.joinpath(name).read_bytes()).hexdigest() == digest, name
