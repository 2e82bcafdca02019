"""Fixtures shared by the integration tests."""

from tests.integration.containers import container_engine, docker_engine
from tests.integration.postgres import postgres_server, postgres_url
from tests.integration.production import stop_production
from tests.integration.slurm import slurm_cluster
from tests.integration.sshd import ssh_hosts

__all__ = [
    "container_engine",
    "docker_engine",
    "postgres_server",
    "postgres_url",
    "slurm_cluster",
    "ssh_hosts",
    "stop_production",
]
