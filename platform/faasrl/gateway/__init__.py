"""The REST gateway (FastAPI): functions, invocations, cluster; auth, schemas, errors."""

from faasrl.gateway.app import create_app

__all__ = ["create_app"]
