"""Fixtures shared by the integration tests."""

from tests.integration.production import stop_production

__all__ = ["stop_production"]
