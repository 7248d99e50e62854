"""The dashboard's files: static pages served as they are (no build step for anyone), and the
charting library's JavaScript, served from the installed ``plotly`` package (never a copy here).

The pages call the same ``/v1`` API as every client, with the bearer token the user types in:
nothing here reads platform state itself.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

STATIC = Path(__file__).parent / "static"
INDEX = STATIC / "index.html"
# The page may load code only from the gateway, and talk only to it: an injected script could
# otherwise read the token from the session's storage. Plotly sets inline styles. Videos play
# from blob: URLs of mp4s fetched with the token (a <video> cannot send the header).
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' "
                           "'unsafe-inline'; img-src 'self' data: blob:; media-src 'self' blob:; "
                           "connect-src 'self'; "
                           "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


def plotly_js() -> Path | None:
    """``plotly.min.js`` as the installed ``plotly`` wheel ships it (found without importing
    plotly, which the gateway never needs); None where plotly is not installed."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    return path if path.is_file() else None
