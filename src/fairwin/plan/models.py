"""The plan file's typed models.

A plan is TOML; these pydantic models are its schema. Unknown keys are rejected
everywhere (``extra="forbid"``) so that a misspelt key is an error, not a silent
default. Paths are kept as written; :mod:`fairwin.plan.loading` resolves them
against the plan's own directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, JsonValue, field_validator, model_validator

from fairwin.errors import InputError
from fairwin.plan.base import StrictModel, check_names
from fairwin.plan.chain_settings import ChainSettings
from fairwin.plan.checks import GatesSettings, Qualification, RehearsalSettings, Runtime
from fairwin.plan.cluster import ClusterSettings
from fairwin.plan.cpus import CpuList
from fairwin.plan.custody import CustodySettings
from fairwin.plan.diagnostics import Diagnostics
from fairwin.plan.hosts import Host
from fairwin.plan.modes import REGISTERED_MODES, Mode, expand_sweeps, mode_rule
from fairwin.plan.production import ProductionSettings
from fairwin.plan.roles import SHA256_RE, Role
from fairwin.plan.secrets import SecretsSettings
from fairwin.plan.telemetry import TelemetrySettings
from fairwin.profiles import CountersSetting
from fairwin.rules.spec import RuleSpec


class Family(StrictModel):
    """A prompt family: prompts (JSONL of {id, text}) and a frozen order of their ids."""

    prompts: Path
    prompts_sha256: str | None = None
    order: Path
    order_sha256: str

    @field_validator("order_sha256", "prompts_sha256")
    @classmethod
    def _hex_digest(cls, value: str | None) -> str | None:
        if value is not None and not SHA256_RE.match(value):
            raise ValueError("must be 64 lowercase hex digits (run `sha256sum FILE`)")
        return value


class Cell(StrictModel):
    """A workload: which prompts, how long, how many at once, how sampled."""

    families: list[str] = Field(min_length=1)
    prompt_tokens: int = Field(gt=0, description="Target prompt length, counted by the server's /tokenize.")
    prompt_tokens_tolerance: int = Field(8, ge=0, description="A cut prompt may be this many tokens short.")
    concurrency: int = Field(1, ge=1)
    streams_per_wave: int = Field(3, ge=1)
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    #: A million tokens a stream is past any served context today; a typo of a few digits more is caught here, not
    #: by a budget of years or by the server's 400 after production went down.
    max_tokens: int = Field(512, ge=2, le=1_000_000)
    endpoint: Literal["completions", "chat"] = "completions"
    decision: bool = Field(True, description="False: measured and reported, never deciding.")
    extra_body: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _concurrency_within_the_wave(self) -> Cell:
        if self.concurrency > self.streams_per_wave:
            raise ValueError(
                f"concurrency {self.concurrency} is more than the {self.streams_per_wave} streams a wave sends "
                "(streams_per_wave): at most that many run at once; raise streams_per_wave or lower concurrency"
            )
        return self

    @field_validator("extra_body")
    @classmethod
    def _no_overrides(cls, value: dict[str, Any]) -> dict[str, Any]:
        owned = {"model", "prompt", "messages", "max_tokens", "stream", "seed", "cache_salt", "ignore_eos"}
        clash = sorted(owned & value.keys())
        if clash:
            raise ValueError(f"sets {', '.join(clash)}, which fairwin controls; use the cell's own keys")
        return value


#: What an archived control start may be matched on: what is known before any start ran (a start's GPU model
#: and count, and each host's own cap, are seen only by the start, so a gate could not count the rows its looks
#: will use).
ArchiveKeyField = Literal[
    "cell",
    "role",
    "mode",
    "production_commit",
    "prompt_tokens",
    "max_tokens",
    "concurrency",
    "temperature",
    "clock_cap_mhz",
    "hosts",
]
#: The default match (``window.archive_key``): the runbook's key (cell, ``max_tokens``, production's commit, the
#: clock cap every host agreed on), with the control role and mode (a runbook names its cells per mode) and the
#: cell's shape; not the hosts (one team, one fleet: add "hosts" where one archive serves several).
DEFAULT_ARCHIVE_KEY: tuple[ArchiveKeyField, ...] = tuple(k for k in get_args(ArchiveKeyField) if k != "hosts")


#: The kernel's own filesystems: a window's directory there is refused when the plan is read, not when the window
#: writes its first file after production went down.
KERNEL_FILESYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))


def kernel_filesystem_problem(path: Path) -> str | None:
    """Why windows cannot be kept at ``path`` (under /proc, /sys or /dev), or None."""
    for root in KERNEL_FILESYSTEMS:
        if path.is_absolute() and path.is_relative_to(root):
            return f"{path} is under {root}, the kernel's own files: keep windows on a disk"
    return None


class WindowSettings(StrictModel):
    output_dir: Path = Path("windows")
    rule: str | None = Field(None, description="A registered decision rule (`fairwin rules list`); unset: the default.")
    expected_commit: str | None = Field(
        None, description="The commit [qualification] repo must be at, with no uncommitted change, for a window to run."
    )
    repeats: int = Field(3, ge=1)
    #: Stream i of a cell is seeded base_seed + i, and llama.cpp's seed is 32 bits: a seed under two billion leaves
    #: room for every stream, where a longer one would be refused by the server at the first request.
    base_seed: int = Field(42, ge=0, le=2_000_000_000)
    warmup_max_tokens: int = Field(16, ge=1)
    warmup_waves_max: int = Field(
        4, ge=0, le=20, description="Uncounted waves at most, until two consecutive server rates agree (0: none)."
    )
    warmup_tolerance_pct: float = Field(3.0, gt=0, description="How close two warm-up waves' rates must be.")
    request_timeout_s: float = Field(900.0, gt=0)
    settle_timeout_s: float = Field(10.0, gt=0, description="How long counters may lag a finished wave.")
    production_clock_cap_mhz: float | None = Field(
        None, gt=0, description="Production's GPU clock cap; every start must have run at it."
    )
    archive: str | None = Field(
        None,
        description="The control archive: a JSONL file (relative to the plan) or a postgresql:// URL "
        "(default: $FAIRWIN_ARCHIVE_URL, else OUTPUT_DIR/control-archive.jsonl).",
    )
    archive_key: list[ArchiveKeyField] = Field(
        default_factory=lambda: list(DEFAULT_ARCHIVE_KEY),
        min_length=1,
        description="What an archived control start must share with this window to count in its noise "
        "(the gates, every look and the decision count the same rows); 'cell' is always matched.",
    )
    idle_check_s: float = Field(
        0.5, ge=0, le=10, description="Before and after each start, sample the host's CPU use this long (0: off)."
    )
    client_cpus: CpuList | None = Field(
        None, description="CPU list fairwin's client (its event loop) runs on during the window, e.g. '1'."
    )
    lock: Path | None = Field(
        None, description="The hardware's lock: one window at a time (default: OUTPUT_DIR/.window.lock)."
    )
    counters: CountersSetting = Field(
        "vllm",
        description=(
            "The server's counters fairwin pools: vllm, llamacpp, none (any OpenAI-compatible server, "
            "client-only), or auto (the profile the first start's /metrics exports)."
        ),
    )
    report_html: bool = Field(
        True,
        description="Write report.html at the close (about a second of CPU: matplotlib's figures); false: "
        "`fairwin report WINDOW` writes it when wanted. summary.md and the decision are written either way.",
    )

    @field_validator("output_dir")
    @classmethod
    def _on_a_disk(cls, value: Path) -> Path:
        problem = kernel_filesystem_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class BudgetSettings(StrictModel):
    """Assumed costs for the dry estimate (calibration from history comes later)."""

    startup_s: float = Field(60.0, ge=0)
    role_startup_s: dict[str, float] = Field(
        default_factory=dict, description="A role's own start-up seconds, where it differs from startup_s."
    )
    stop_s: float = Field(10.0, ge=0)
    decode_ms_per_token: float = Field(20.0, gt=0)
    prefill_ms_per_token: float = Field(0.5, ge=0)
    limit_min: float = Field(85.0, gt=0, description="The dry upper bound must fit this.")
    measurement_limit_min: float = Field(73.0, gt=0, description="The measurement must end by this.")
    pair_reserve_s: float = Field(333.0, ge=0, description="Reserve for restarting a pair of servers.")
    dry_reserve_s: float = Field(600.0, ge=0, description="The reserve's upper bound for the dry bound.")
    restore_s: float = Field(0.0, ge=0, description="Closing the window: restoring production and watching it.")
    max_starts: int | None = Field(
        None,
        ge=1,
        description=(
            "The most starts the window runs: a sequential window that no look has settled by then stops at the "
            "budget (its verdict NEUTRAL for an open cell). At least the rule's first look."
        ),
    )


class Plan(StrictModel):
    window: WindowSettings = Field(default_factory=WindowSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    hosts: dict[str, Host] = Field(default_factory=dict, description="Machines roles run on over SSH.")
    roles: dict[str, Role] = Field(min_length=1)
    modes: dict[str, Mode] = Field(default_factory=dict)
    families: dict[str, Family] = Field(min_length=1)
    cells: dict[str, Cell] = Field(min_length=1)
    qualification: Qualification = Field(default_factory=Qualification)
    runtime: Runtime = Field(default_factory=Runtime)
    gates: GatesSettings = Field(default_factory=GatesSettings)
    rehearsal: RehearsalSettings = Field(default_factory=RehearsalSettings)
    production: ProductionSettings | None = Field(
        None, description="How production is taken down for a window and restored after (docs/production.md)."
    )
    cluster: ClusterSettings | None = Field(
        None, description="The scheduler that owns the hardware (docs/cluster.md); unset: fairwin's own locks."
    )
    telemetry: TelemetrySettings = Field(
        default_factory=TelemetrySettings, description="GPU telemetry through every start (docs/telemetry.md)."
    )
    chain: ChainSettings = Field(
        default_factory=ChainSettings, description="Windows that leave production down between them (docs/chain.md)."
    )
    custody: CustodySettings = Field(
        default_factory=CustodySettings, description="A team's own hold on the hardware, beside fairwin's (plan.md)."
    )
    diagnostics: Diagnostics = Field(
        default_factory=Diagnostics, description="Correctness diagnostics run beside the measurement (docs/greedy.md)."
    )
    secrets: SecretsSettings = Field(
        default_factory=SecretsSettings, description="More secret names and flags (docs/security.md)."
    )

    @model_validator(mode="before")
    @classmethod
    def _sweeps(cls, data: Any) -> Any:
        """Each mode's sweep made into its roles and candidates before any table is read."""
        return expand_sweeps(data)

    @field_validator("hosts", "roles", "modes", "families", "cells")
    @classmethod
    def _names(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_names(value)

    @model_validator(mode="after")
    def _references(self) -> Plan:
        for mode_name, mode in self.modes.items():
            named = [("control", mode.control)]
            named += [("candidate", arm) for arm in mode.arms] if not mode.many else []
            named += [("candidates", arm) for arm in mode.candidates]
            for which, arm in named:
                if arm not in self.roles:
                    raise ValueError(
                        f"modes.{mode_name}.{which} names role {arm!r}, which is not declared; "
                        f"declared roles: {', '.join(sorted(self.roles))}"
                    )
            try:
                self.rule_for(mode_name, mode)
            except InputError as exc:
                raise ValueError(str(exc)) from None
        for cell_name, cell in self.cells.items():
            for family in cell.families:
                if family not in self.families:
                    raise ValueError(
                        f"cells.{cell_name}.families names {family!r}, which is not declared; "
                        f"declared families: {', '.join(sorted(self.families))}"
                    )
        for role_name, role in self.roles.items():
            if role.base is not None and role.base not in self.roles:
                raise ValueError(f"roles.{role_name}.base names role {role.base!r}, which is not declared")
            if role.base == role_name:
                raise ValueError(f"roles.{role_name}.base names the role itself")
            if role.base is not None and self.roles[role.base].base is not None:
                raise ValueError(f"roles.{role_name}.base: {role.base!r} is derived itself; derive from one level only")
            if role.base is None and role.unset_env:
                raise ValueError(f"roles.{role_name}: unset_env needs a base role")
            compared = role.base is not None or role.compare_live
            if not compared and (role.allowed_env_differences or role.allowed_mount_differences):
                raise ValueError(
                    f"roles.{role_name}: allowed_env_differences and allowed_mount_differences need a base role or "
                    "compare_live = true"
                )
        self._production_role()
        self._remote_roles()
        self._placeholders()
        if self.custody.host is not None and self.custody.host not in self.hosts:
            raise ValueError(f"custody.host names {self.custody.host!r}, which [hosts] does not declare")
        for host in self.telemetry.watchdog_logs:
            if host != "here" and host not in self.hosts:
                raise ValueError(f"telemetry.watchdog_logs names host {host!r}; use 'here' or a [hosts] name")
        greedy = self.diagnostics.greedy
        for name in (greedy.cells or []) if greedy is not None else []:
            if name not in self.cells:
                raise ValueError(f"diagnostics.greedy.cells names {name!r}, which [cells] does not declare")
        if not any(cell.decision for cell in self.cells.values()):
            raise ValueError("no cell has decision = true; a window needs at least one decision cell")
        return self

    def _remote_roles(self) -> None:
        bound = set(self.cluster.hosts) if self.cluster is not None else set()
        if self.cluster is not None:
            self.cluster.check_bound(self.roles, set(self.hosts), self.production)
        for role_name, role in self.roles.items():
            where = [role.host, *(w.host for w in role.workers)]
            for i, host in enumerate(where):
                if host is not None and host not in self.hosts and host not in bound:
                    key = "host" if i == 0 else f"workers[{i - 1}].host"
                    raise ValueError(f"roles.{role_name}.{key} names {host!r}, which [hosts] does not declare")
            if len(set(where)) < len(where):
                raise ValueError(f"roles.{role_name}: the head and its workers each need a host of their own")
            if role.host is None:
                continue
            if role.port == "auto":
                raise ValueError(f"roles.{role_name}: a role on a remote host needs a fixed port, not 'auto'")
            if role.cpus is not None or role.nice is not None:
                raise ValueError(f"roles.{role_name}: cpus and nice apply on this host only; remove them")

    def _placeholders(self) -> None:
        bound = set(self.cluster.hosts) if self.cluster is not None else set()
        for name, placeholder in self.chain.placeholders.items():
            key = f"chain.placeholders.{name}"
            if placeholder.host is not None and placeholder.host not in {*self.hosts, *bound}:
                raise ValueError(f"{key}.host names {placeholder.host!r}, which neither [hosts] nor [cluster] hosts "
                                 "declares")  # fmt: skip
            if placeholder.host is not None and placeholder.port is not None:
                raise ValueError(f"{key}: port is a port here; a placeholder on a host has none")
            if placeholder.host not in self.hosts and placeholder.tmux_socket is not None:
                raise ValueError(f"{key}: tmux_socket goes with a [hosts] host (a placeholder here runs detached, and "
                                 "one on a Slurm node as a step, not in tmux)")  # fmt: skip

    def _live_production(self) -> None:
        """Production's live processes name declared hosts; a role compared with them has a production to read."""
        live = self.production.live if self.production is not None else None
        found = [("live.head", live.head)] if live is not None and live.head is not None else []
        found += [(f"live.workers[{i}]", w) for i, w in enumerate(live.workers if live is not None else [])]
        for key, process in found:
            if process.host is not None and process.host not in self.hosts:
                raise ValueError(f"production.{key}.host names {process.host!r}, which [hosts] does not declare")
        for role_name in (n for n, r in self.roles.items() if r.compare_live):
            if self.production is None or (self.production.role is None and live is None):
                raise ValueError(
                    f"roles.{role_name}.compare_live: there is no live production to compare with; "
                    "declare [production] with a role, or [production.live] where it runs"
                )

    def _production_role(self) -> None:
        host = self.production.host if self.production is not None else None
        if host is not None and host not in self.hosts:
            raise ValueError(f"production.host names {host!r}, which [hosts] does not declare")
        self._live_production()
        if self.production is not None and self.production.slurm_job is not None and self.cluster is None:
            raise ValueError("production.slurm_job: production runs as a Slurm job; declare the [cluster] it runs on")
        role_name = self.production.role if self.production is not None else None
        if role_name is None:
            return
        role = self.roles.get(role_name)
        if role is None:
            raise ValueError(f"production.role names role {role_name!r}, which is not declared")
        if role.workers:
            raise ValueError(
                f"production.role {role_name} has workers: fairwin launches a one-host production only; manage a "
                "multi-host production with up, down and production.host"
            )
        if not isinstance(role.port, int) and "{port}" in role.base_url:
            raise ValueError(
                f"production.role {role_name}: production answers on a fixed port; set roles.{role_name}.port"
            )

    @property
    def first_decision_cell(self) -> str:
        """The cell warm-ups use: the first that decides (the plan guarantees one)."""
        return next(name for name, cell in self.cells.items() if cell.decision)

    def rule_for(self, mode_name: str, mode: Mode | None = None) -> RuleSpec:
        """The registered rule that decides a mode's windows (plan/modes.py's :func:`mode_rule`)."""
        return mode_rule(mode_name, mode or self.all_modes()[mode_name], self.window.rule)

    def all_modes(self) -> dict[str, Mode]:
        """Declared modes plus the registered defaults whose roles this plan declares."""
        modes = {
            name: Mode(control=control, candidate=candidate)
            for name, (control, candidate) in REGISTERED_MODES.items()
            if control in self.roles and candidate in self.roles
        }
        modes.update(self.modes)
        return modes
