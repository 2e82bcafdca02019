"""A window's open: the plan copied and ``window.json`` written, before anything is measured.

:class:`Opening` is mixed into :class:`~fairwin.window.machine.Window`, which shares its state
(:class:`~fairwin.window.state.WindowState`). ``window.json`` (:class:`~fairwin.directory.manifest.WindowManifest`) says
what is about to run and under which rule, gates, production and telemetry; the journal's ``open``
row keeps production's declaration, which is what a recovery restores.
"""

from __future__ import annotations

import shutil
import time

from pydantic import BaseModel, ConfigDict

from fairwin.archive.window_rows import archive_key_record
from fairwin.directory.declaration import ProductionDeclaration
from fairwin.directory.manifest import FamilyPins, ManifestTelemetry, PlannedStart, PlanOverride, WindowManifest
from fairwin.records import write_record
from fairwin.window.state import WindowState


class OpenEnd(BaseModel):
    """The open step's journaled end: the plan's sha256 and production's declaration as the window opened (what
    a recovery restores)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plan_sha256: str
    production: ProductionDeclaration | None


class Opening(WindowState):
    """The open step; the window's state it reads is the window's own."""

    async def open(self) -> OpenEnd:
        """Copy the plan and write window.json: what is about to run, and under which rule and gates."""
        self.measured.opened_at = time.monotonic()
        shutil.copyfile(self.loaded.path, self.directory.plan_copy)
        write_record(self.directory.manifest, self._manifest())
        seed = self.fixed.round_seed
        order = self.fixed.order if seed is None else f"the rounds' orders drawn by seed {seed}"
        self.say(f"window {self.directory.window_id} opened at {self.directory.path} ({order})")
        self.feed.opened(
            self.directory.path,
            self.fixed.order,
            self.fixed.starts,
            self.gate_summary.budget,
            sum(len(waves) for waves in self.context.schedule.values()),
            self.measuring.looks,  # a sequential rule's looks; a many-arm window's, at the end of its rounds
        )
        # Into the journal too: what a recovery restores is the declaration as it was when the window opened.
        return OpenEnd(
            plan_sha256=self.loaded.sha256, production=self.custody.hold.snapshot if self.custody.hold else None
        )

    def _manifest(self) -> WindowManifest:
        """window.json: what is about to run, and under which rule, gates, production and telemetry."""
        mode, rule = self.checked.mode, self.checked.rule
        return WindowManifest(
            window_id=self.directory.window_id,
            mode=self.checked.mode_name,
            control_role=mode.control,
            candidate_role=", ".join(mode.arms),
            order=self.fixed.order,
            candidates=list(mode.candidates),
            round_seed=self.fixed.round_seed,
            starts=[PlannedStart(start=s.name, kind=s.kind, role=s.role, round=s.round) for s in self.fixed.starts],
            plan_path=str(self.loaded.path),
            plan_sha256=self.loaded.sha256,
            plan_file_sha256=self.loaded.file_sha256,
            plan_overrides=[
                PlanOverride(key=change.key, value=change.value, variable=change.variable)
                for change in self.loaded.overrides
            ],
            rule_id=rule.id,
            rule_sha256=rule.sha256,
            archive=self.archive_store.location,  # never a password: the store redacts it
            archive_key=archive_key_record(self.site),
            archive_snapshot=self.archive_snapshot.record(),
            power_warnings=self.fixed.power_warnings,
            gates=self.gate_summary,
            coordinator=self.directory.coordinator,
            families={
                name: FamilyPins(prompts_sha256=fam.prompts_sha256, order_sha256=fam.order_sha256)
                for name, fam in self.loaded.families.items()
            },
            environment=self.fixed.environment,
            production=self.custody.hold.snapshot if self.custody.hold is not None else None,
            chain=self.custody.chain.record(with_last=True) if self.custody.chain is not None else None,
            cluster=self.admission.allocation,
            telemetry=ManifestTelemetry(
                gpu=self.gpu.name if self.gpu is not None else None,
                production_cap_mhz=self.production_cap[0],
                production_cap_from=self.production_cap[1],
                production_caps_by_host=self.fixed.node_caps,
            ),
        )
