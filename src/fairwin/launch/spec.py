"""A role made concrete for one start: placeholders filled, its environment assembled, its host resolved."""

from __future__ import annotations

import os
import random
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from dotenv import dotenv_values

from fairwin.errors import InputError, LaunchError, PlanError
from fairwin.files import sha256_file
from fairwin.launch.scheduling import Scheduling
from fairwin.plan.container_settings import Container
from fairwin.plan.hosts import Host, Place, SlurmNode, resolved
from fairwin.plan.roles import Role
from fairwin.redaction import (
    HIDDEN,
    hide_url_passwords,
    is_secret_name,
    only_placeholders,
    redact_argv,
    remember,
    url_passwords,
)

#: Every container fairwin starts carries this label, its value the window's id.
WINDOW_LABEL = "fairwin.window"
#: How every container and remote run directory fairwin names begins: then the window's id, start, role, member.
RUN_PREFIX = "fairwin-"

PLACEHOLDER = re.compile(r"\{(port|python|plan_dir|head_address|env:[A-Za-z_][A-Za-z0-9_]*)\}")


#: The lowest port :func:`free_port` picks.
LOWEST_PICKED = 20000
_PICKS = random.SystemRandom()  # never the seeded module random: two processes seeded alike would pick alike


def _ephemeral_start() -> int:
    """Where the kernel's ephemeral ports begin (every outgoing connection's, every bind to port 0)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default, and near enough elsewhere


def free_port() -> int:
    """A port free here now, for a server to bind soon: drawn below the kernel's ephemeral range, so that nothing
    the kernel hands out between this pick and the server's bind (an outgoing connection's port, another bind to
    port 0) can be it. Where that range leaves no room below it, the kernel's own pick."""
    high = _ephemeral_start() - 1
    for _ in range(100 if high > LOWEST_PICKED else 0):
        port = _PICKS.randint(LOWEST_PICKED, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # taken: draw again
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill(text: str, values: dict[str, str], *, resolve_env: bool = True) -> str:
    """Replace {port}, {python}, {plan_dir}, {head_address} and {env:NAME}; other braces (JSON in an argument)
    are left alone. Without ``resolve_env``, {env:NAME} stays as written: the form receipts record."""

    def one(match: re.Match[str]) -> str:
        key = match.group(1)
        if key.startswith("env:"):
            name = key[4:]
            if not resolve_env:
                return match.group(0)
            if name not in os.environ:
                raise PlanError(f"the plan uses {{{key}}} but {name} is not set; export {name}=... and run again")
            if is_secret_name(name):
                remember(os.environ[name])
            return os.environ[name]
        return values[key]

    return PLACEHOLDER.sub(one, text)


@dataclass(frozen=True)
class LaunchSpec:
    """A role made concrete for one start: placeholders filled, env assembled."""

    role_name: str
    argv: list[str]
    env: dict[str, str]
    declared_env: dict[str, str]
    cwd: Path | None
    base_url: str
    health_url: str
    startup_timeout_s: float
    stop_timeout_s: float
    model: str
    base_role: str | None = None
    base_env: dict[str, str] | None = None  # the base role's effective env here, for the runtime check
    base_declared_env: dict[str, str] | None = None  # the base role's declared variables (a remote role's check)
    allowed_env_differences: tuple[str, ...] = ()
    allowed_mount_differences: tuple[str, ...] = ()  # compared with a container production: these destinations
    allowed_image_difference: bool = False
    scheduling: Scheduling = field(default_factory=Scheduling)
    host: str | None = None  # a [hosts.NAME] the server runs on over SSH; None: here
    remote: Place | None = None  # that host, its paths resolved (or the Slurm node it is bound to)
    inherit_env: bool = True
    member: str = "head"  # which of the role's processes: "head", or "worker N" of a role that spans hosts
    values: dict[str, str] = field(default_factory=dict)  # what its placeholders were filled with
    shown_argv: list[str] = field(default_factory=list)  # what receipts record: {env:NAME} as written
    shown_env: dict[str, str] = field(default_factory=dict)  # the plan's env as written, env files left out
    env_files: dict[str, str] = field(default_factory=dict)  # each env file's path and sha256, never its contents
    container: Container | None = None  # run as a container: env is then exactly the declared variables
    run_name: str | None = None  # its name for one start of one window (:func:`for_start`): a container's, a
    # remote server's run directory
    labels: dict[str, str] = field(default_factory=dict)  # the container's: its window, start, role and member

    def __post_init__(self) -> None:
        if not self.shown_argv:  # a spec made in code, not from a plan: its argv with secret flags' values hidden
            object.__setattr__(self, "shown_argv", redact_argv(self.argv))

    def for_start(self, window_id: str, start: str) -> LaunchSpec:
        """The spec as one start of one window launches it: named for both (a container's name, a remote server's
        run directory), and a container labelled with both."""
        member = self.member.replace(" ", "-")
        labels = {WINDOW_LABEL: window_id, "fairwin.start": start, "fairwin.role": self.role_name}
        return replace(
            self,
            run_name=f"{RUN_PREFIX}{window_id}-{start}-{self.role_name}-{member}",
            labels={**labels, "fairwin.member": self.member} if self.container is not None else {},
        )

    @property
    def container_name(self) -> str | None:
        return self.run_name if self.container is not None else None

    def over_ssh(self) -> Host | None:
        """The ``[hosts.NAME]`` it runs on over SSH (None: here). A process on a node of the window's Slurm job is a
        step of it, reached through srun (launch/slurm_step.py), never over SSH."""
        if isinstance(self.remote, SlurmNode):
            raise LaunchError(f"{self.label}: runs on Slurm node {self.remote.node}, reached through srun, not SSH")
        return self.remote

    @property
    def label(self) -> str:
        """How messages name it: "role B", "role B on host h1", "role B worker 1 on host w1"."""
        member = "" if self.member == "head" else f" {self.member}"
        where = f" on host {self.host}" if self.host else (" here" if member else "")
        return f"role {self.role_name}{member}{where}"


def _declared_env(role_name: str, roles: Mapping[str, Role], plan_dir: Path) -> dict[str, str]:
    """A role's declared variables: its base's (minus unset_env), then its env files, then its env."""
    role = roles[role_name]
    declared: dict[str, str] = {}
    if role.base is not None:
        declared = _declared_env(role.base, roles, plan_dir)
        for key in role.unset_env:
            declared.pop(key, None)
    for env_file in role.env_files:
        path = env_file if env_file.is_absolute() else plan_dir / env_file
        if not path.is_file():
            raise PlanError(f"roles.{role_name}.env_files: {path} does not exist; fix the path")
        declared.update({k: v or "" for k, v in dotenv_values(path).items()})
    declared.update(role.env)
    return declared


def _shown_env(role_name: str, roles: Mapping[str, Role], values: dict[str, str]) -> dict[str, str]:
    """A role's declared variables as the plan writes them (env files' contents are never shown)."""
    role = roles[role_name]
    shown = _shown_env(role.base, roles, values) if role.base is not None else {}
    for key in role.unset_env:
        shown.pop(key, None)
    for key, value in role.env.items():  # a plan that was loaded holds no literal secret; one built in code might
        literal = is_secret_name(key) and not only_placeholders(value)
        shown[key] = HIDDEN if literal else hide_url_passwords(fill(value, values, resolve_env=False))
    return shown


def _env_files(role_name: str, roles: Mapping[str, Role], plan_dir: Path) -> dict[str, str]:
    role = roles[role_name]
    files = _env_files(role.base, roles, plan_dir) if role.base is not None else {}
    for env_file in role.env_files:
        path = env_file if env_file.is_absolute() else plan_dir / env_file
        files[str(env_file)] = sha256_file(path) if path.is_file() else "missing"
    return files


def _shown_argv(argv: list[str], values: dict[str, str]) -> list[str]:
    return redact_argv([fill(arg, values, resolve_env=False) for arg in argv])


def _remember_secrets(argv: list[str], env: dict[str, str]) -> None:
    """Values in secret positions (after a secret flag, under a secret name, a URL's password) stay in memory
    only: every file fairwin writes is scrubbed of them."""
    for shown, real in zip(redact_argv(argv), argv, strict=True):
        if shown != real:
            remember(real)
    for key, value in env.items():
        remember(*([value] if is_secret_name(key) else url_passwords(value)))


def _effective_env(role: Role, declared: dict[str, str], values: dict[str, str], boxed: bool) -> dict[str, str]:
    if boxed:  # a container gets its declared variables, never fairwin's environment
        return {k: fill(v, values) for k, v in declared.items()}
    env = dict(os.environ) if role.inherit_env else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update({k: fill(v, values) for k, v in declared.items()})
    return env


def make_spec(
    role_name: str, roles: Mapping[str, Role], plan_dir: Path, hosts: Mapping[str, Place] | None = None
) -> LaunchSpec:
    """The role's head process (its only one, unless it spans hosts) for one start."""
    role = roles[role_name]
    port = free_port() if role.port == "auto" else role.port
    values = {
        "port": str(port),
        "plan_dir": str(plan_dir),
        "head_address": _place(role.host, hosts).address if role.host is not None and hosts else "127.0.0.1",
    }
    values["python"] = _python(role.host, hosts)
    declared = _declared_env(role_name, roles, plan_dir)
    base_env = base_declared = None
    if role.base is not None:  # on a host, the base's whole env is that host's login env plus these, not ours
        raw = _declared_env(role.base, roles, plan_dir)
        base_declared = {k: fill(v, values) for k, v in raw.items()}
        here = role.host is None and role.container is None
        base_env = _effective_env(roles[role.base], raw, values, False) if here else None
    base_url = fill(role.base_url, values)
    argv = [fill(arg, values) for arg in role.argv]
    declared_env = {k: fill(v, values) for k, v in declared.items()}
    _remember_secrets(argv, declared_env)
    return LaunchSpec(
        role_name=role_name,
        argv=argv,
        env=_effective_env(role, declared, values, role.container is not None),
        declared_env=declared_env,
        cwd=_cwd(role.cwd, values, plan_dir),
        base_url=base_url,
        health_url=base_url + role.health_path,
        startup_timeout_s=role.startup_timeout_s,
        stop_timeout_s=role.stop_timeout_s,
        model=role.served_model,
        base_role=role.base,
        base_env=base_env,
        base_declared_env=base_declared,
        allowed_env_differences=tuple(role.allowed_env_differences),
        allowed_mount_differences=tuple(role.allowed_mount_differences),
        allowed_image_difference=role.allowed_image_difference,
        scheduling=Scheduling(cpus=role.cpus, nice=role.nice),
        host=role.host,
        remote=_remote(role.host, hosts, plan_dir),
        inherit_env=role.inherit_env,
        values=values,
        shown_argv=_shown_argv(role.argv, values),
        shown_env=_shown_env(role_name, roles, values),
        env_files=_env_files(role_name, roles, plan_dir),
        container=role.container,
    )


def worker_specs(
    head: LaunchSpec, roles: Mapping[str, Role], plan_dir: Path, hosts: Mapping[str, Place] | None = None
) -> list[LaunchSpec]:
    """The role's workers, in launch order, with the head's placeholders ({port}, {head_address}) and each
    its own host's {python}; each runs with the role's environment plus its own ``env``."""
    role = roles[head.role_name]
    specs = []
    for number, worker in enumerate(role.workers, 1):
        values = {**head.values, "python": _python(worker.host, hosts)}
        declared = {**_declared_env(head.role_name, roles, plan_dir), **worker.env}
        argv, declared_env = (
            [fill(arg, values) for arg in worker.argv],
            {k: fill(v, values) for k, v in declared.items()},
        )
        _remember_secrets(argv, declared_env)
        shown_env = {
            **_shown_env(head.role_name, roles, values),
            **{k: fill(v, values, resolve_env=False) for k, v in worker.env.items()},
        }
        specs.append(
            replace(
                head,
                argv=argv,
                env=_effective_env(role, declared, values, worker.container is not None),
                declared_env=declared_env,
                shown_argv=_shown_argv(worker.argv, values),
                shown_env=shown_env,
                cwd=_cwd(worker.cwd, values, plan_dir),
                startup_timeout_s=worker.ready.timeout_s,
                base_role=None,
                base_env=None,
                base_declared_env=None,
                scheduling=Scheduling(),
                host=worker.host,
                remote=_remote(worker.host, hosts, plan_dir),
                member=f"worker {number}",
                values=values,
                container=worker.container,
            )
        )
    return specs


def _python(host: str | None, hosts: Mapping[str, Place] | None) -> str:
    return _place(host, hosts).python if host is not None and hosts else sys.executable


def _cwd(cwd: Path | None, values: dict[str, str], plan_dir: Path) -> Path | None:
    if cwd is None:
        return None
    filled = Path(fill(str(cwd), values))
    return filled if filled.is_absolute() else plan_dir / filled


def _remote(name: str | None, hosts: Mapping[str, Place] | None, plan_dir: Path) -> Place | None:
    if name is None or not hosts:
        return None
    place = _place(name, hosts)
    return resolved(place, plan_dir) if isinstance(place, Host) else place


def _place(name: str, hosts: Mapping[str, Place]) -> Place:
    """The host by name; a ``[cluster] hosts`` name is a node of the window's Slurm job, known only inside it."""
    if name not in hosts:
        raise InputError(f"host {name} is bound to a node of the window's Slurm job ([cluster] hosts): known only "
                         "inside it")  # fmt: skip
    return hosts[name]
