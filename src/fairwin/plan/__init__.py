"""Plans: the typed plan file, its loading and validation, and the dry schedule."""

from fairwin.plan.loading import LoadedFamily, LoadedPlan, Prompt, load_plan, parse_plan
from fairwin.plan.models import BudgetSettings, Cell, Family, Plan, WindowSettings
from fairwin.plan.modes import REGISTERED_MODES, Mode, Sweep
from fairwin.plan.roles import Role
from fairwin.plan.schedule import StartSpec, WaveSpec, resolve_mode, starts_for, waves_for

__all__ = [
    "REGISTERED_MODES",
    "BudgetSettings",
    "Cell",
    "Family",
    "LoadedFamily",
    "LoadedPlan",
    "Mode",
    "Plan",
    "Prompt",
    "Role",
    "StartSpec",
    "Sweep",
    "WaveSpec",
    "WindowSettings",
    "load_plan",
    "parse_plan",
    "resolve_mode",
    "starts_for",
    "waves_for",
]
