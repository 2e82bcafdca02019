"""The host's condition around each start, and whether it was idle before it.

Across the starts of one window the server's rate falls on a shared machine (e2e A/A
short-b1: s1 about 1,300 tok/s, s3 about 900), with no process of an earlier start
left running. Bracketing cancels a linear drift but not its noise, so each start
records what the host looked like (load, CPU frequency, free memory, CPU sets) and
whether anything else was busy before it began: the same idea as production's quiet
proof, for the machine fairwin itself measures on.
"""

from __future__ import annotations

import asyncio
import os

import psutil

from fairwin.directory.start_receipt import BusyProcess, HostCondition

#: Before a start, the host counts as idle when all CPUs together are at most this busy.
IDLE_CPU_PCT = 20.0
BUSIEST = 3


def _busiest(processes: list[psutil.Process]) -> list[BusyProcess]:
    readings: list[tuple[float, int, str]] = []
    for process in processes:
        try:
            readings.append((process.cpu_percent(None), process.pid, process.name()))
        except psutil.Error:
            continue
    readings.sort(reverse=True)
    return [BusyProcess(pid=pid, name=name, cpu_pct=pct) for pct, pid, name in readings[:BUSIEST] if pct > 0]


async def condition(sample_s: float) -> HostCondition:
    """A reading over ``sample_s`` seconds: CPU busy %, load, frequency, memory, and the busiest processes.

    With ``sample_s`` 0 nothing is sampled: the busy share and the busiest processes are null.
    """
    mine = os.getpid()
    processes = [p for p in psutil.process_iter() if p.pid != mine] if sample_s > 0 else []
    for process in processes:
        try:
            process.cpu_percent(None)  # the first call only starts the process's clock
        except psutil.Error:
            continue
    psutil.cpu_percent(None)
    await asyncio.sleep(sample_s)
    busy = psutil.cpu_percent(None) if sample_s > 0 else None
    frequencies = psutil.cpu_freq(percpu=True) or []
    memory = psutil.virtual_memory()
    return HostCondition(
        cpu_busy_pct=busy,
        cpus=psutil.cpu_count(),
        load_average=[round(x, 2) for x in psutil.getloadavg()],
        cpu_mhz=[round(f.current) for f in frequencies],
        memory_available_gib=round(memory.available / 2**30, 2),
        client_cpus=sorted(os.sched_getaffinity(0)),
        busiest=_busiest(processes) if sample_s > 0 else None,
        idle=None if busy is None else busy <= IDLE_CPU_PCT,
    )


#: How a finding about the host begins: the one kind of line ``--quiet`` never hides.
HOST_FINDING = "the host was not idle before "


def not_idle_warning(start: str, reading: HostCondition) -> str | None:
    if reading.idle is not False:
        return None
    busiest = ", ".join(f"{p.name} (pid {p.pid}) {p.cpu_pct:.0f} %" for p in reading.busiest or [])
    # No process stood out (short-lived ones, or another container's): say so rather than "n/a".
    who = f"busiest: {busiest}" if busiest else "no single process stood out (short-lived processes, or outside view)"
    return (
        f"{HOST_FINDING}{start}: {reading.cpu_busy_pct or 0:.0f} % of its CPUs busy (idle is at most "
        f"{IDLE_CPU_PCT:g} %); {who}. Stop what else runs here, or the start's rate carries its noise"
    )
