"""The dashboard at ``/ui/`` (``/`` leads there): its page, its static files and the charting
library. Outside ``/v1`` and without auth, as they hold no data: the page asks for the token
and calls the API with it."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, HTTPException
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from faasrl.gateway.ui import CONTENT_SECURITY_POLICY, INDEX, STATIC, plotly_js

router = APIRouter(include_in_schema=False)
_PAGE_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY,
                 "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                 "Cache-Control": "no-cache"}


def install(app: FastAPI) -> None:
    """The static files, mounted (a router cannot carry a mount)."""
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("ui/")


@router.get("/ui")
async def ui_without_slash() -> RedirectResponse:
    """The page's relative links need the trailing slash."""
    return RedirectResponse("ui/")


@router.get("/ui/")
async def page() -> FileResponse:
    return FileResponse(INDEX, media_type="text/html", headers=_PAGE_HEADERS)


@router.get("/ui/vendor/plotly.min.js")
async def plotly() -> FileResponse:
    path = plotly_js()
    if path is None:
        raise HTTPException(404, "plotly is not installed on the gateway "
                                 "(pip install plotly): the dashboard shows no charts")
    return FileResponse(path, media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})
