"""Fixtures shared by the integration tests."""

from tests.integration.production import stop_production
from tests.integration.sshd import ssh_hosts

__all__ = ["ssh_hosts", "stop_production"]
