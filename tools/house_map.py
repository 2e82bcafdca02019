"""The shape of the house in numbers: files and lines per package, and the measures #26 and #50 track.

    python tools/house_map.py            # module map, `dict[str, Any]` (and as class fields), repeated module
                                         # names, `# fmt: skip`, long lines, long functions, cycles; functions
                                         # taking LoadedPlan, hand-written host resolutions, modules that run a
                                         # command, GateRefused's raises, WindowState's fields, long modules

An import cycle is a strongly connected group of modules (more than one) in the graph of every
`import fairwin...` in src, those inside functions and under TYPE_CHECKING included: a lazy import
still ties two modules together. Written by hand because it is thirty lines of ast walking; the
graph library it would need (networkx) is not otherwise a dependency.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "fairwin"


def _module(path: Path) -> str:
    return ".".join(("fairwin", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fairwin"):
                base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("fairwin")]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _long_functions(paths: list[Path], limit: int = 60) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({length} lines)")
    return found


def _loose_fields(paths: list[Path]) -> list[str]:
    """Fields of classes (models, dataclasses) annotated with ``dict[str, Any]``: data that left its type."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found += [
                    f"{path.relative_to(SRC)}:{item.lineno} {node.name}.{ast.unparse(item.target)}"
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and "dict[str, Any]" in ast.unparse(item.annotation)
                ]
    return found


def _repeated_names(paths: list[Path]) -> dict[str, list[str]]:
    """Module file names used more than once under src (``__init__`` aside)."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        if path.name != "__init__.py":
            by_name[path.name].append(str(path.relative_to(SRC)))
    return {name: where for name, where in sorted(by_name.items()) if len(where) > 1}


#: Where the plan is everyone's to read (#50): a function taking ``LoadedPlan`` elsewhere is counted.
PLAN_READERS = ("plan/", "gates/", "cli/", "window/admission.py")
#: Calls that start a process or open an SSH channel: a module making one runs a command itself.
COMMAND_CALLS = {
    "subprocess.run",
    "subprocess.Popen",
    "subprocess.check_output",
    "subprocess.check_call",
    "subprocess.call",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    "os.system",
    "os.popen",
    "os.posix_spawn",
    "os.execvp",
    "os.execv",
    "os.execvpe",
    "asyncssh.connect",
}
#: Methods of an SSH connection (``conn``, ``self.conn``, ``connection``) that open a channel.
CHANNEL_METHODS = ("conn.run", "conn.create_process", "connection.run", "connection.create_process")


def _functions_taking_plan(paths: list[Path]) -> tuple[int, int]:
    """Functions with a parameter annotated ``LoadedPlan``: all of them, and those outside :data:`PLAN_READERS`."""
    everywhere = outside = 0
    for path in paths:
        where = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                if any(a.annotation is not None and "LoadedPlan" in ast.unparse(a.annotation) for a in arguments):
                    everywhere += 1
                    outside += not where.startswith(PLAN_READERS)
    return everywhere, outside


def _nodes(paths: list[Path], match: Callable[[ast.AST], bool]) -> dict[str, int]:
    """Each module's count of the syntax nodes ``match`` accepts (modules with none left out)."""
    found: dict[str, int] = {}
    for path in paths:
        count = sum(1 for node in ast.walk(ast.parse(path.read_text())) if match(node))
        if count:
            found[str(path.relative_to(SRC))] = count
    return found


def _runs_a_command(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    called = ast.unparse(node.func)
    return called in COMMAND_CALLS or called.endswith(CHANNEL_METHODS)


def _resolves_a_host(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("resolved")
        and any(".hosts[" in ast.unparse(a) for a in node.args)
    )


def _raises_gate_refused(node: ast.AST) -> bool:
    """``raise GateRefused(...)``, or ``raise refusal(...)`` (gates/refusal.py's builder of the same error)."""
    raised = node.exc if isinstance(node, ast.Raise) else None
    return isinstance(raised, ast.Call) and ast.unparse(raised.func) in ("GateRefused", "refusal")


def _class_fields(path: Path, name: str) -> int:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return sum(1 for item in node.body if isinstance(item, ast.AnnAssign))
    return 0


def _house_measures(src: list[Path]) -> None:
    """The measures #50 set: where the plan goes, who resolves hosts and runs commands, where refusals live."""
    everywhere, outside = _functions_taking_plan(src)
    print(f"functions taking LoadedPlan: {everywhere} ({outside} outside {', '.join(PLAN_READERS)})")
    hand = _nodes(src, _resolves_a_host)
    print(f"hand-written host resolutions (resolved(...hosts[...])): {sum(hand.values())} in {len(hand)} files")
    commands = _nodes(src, _runs_a_command)
    print(f"modules that run a command directly (spawn a process, open an SSH channel): {len(commands)}")
    for where, count in sorted(commands.items()):
        print(f"  {where}: {count}")
    refused = _nodes(src, _raises_gate_refused)
    print(f"GateRefused raised: {sum(refused.values())} places in {len(refused)} files")
    print(f"WindowState fields: {_class_fields(SRC / 'window' / 'state.py', 'WindowState')}")
    long_modules = [(len(p.read_text().splitlines()), p) for p in src]
    over = sorted(((n, p) for n, p in long_modules if n > 300), reverse=True)
    print(f"modules over 300 lines: {len(over)}")
    for lines, path in over:
        print(f"  {path.relative_to(SRC)}: {lines}")


def _count(pattern: str, paths: list[Path]) -> int:
    return sum(p.read_text().count(pattern) for p in paths)


def main() -> None:
    src = sorted(SRC.rglob("*.py"))
    tests = sorted((ROOT / "tests").rglob("*.py"))
    packages: dict[str, list[Path]] = defaultdict(list)
    for path in src:
        parts = path.relative_to(SRC).parts
        packages[parts[0] + "/" if len(parts) > 1 else "(top) " + parts[0]].append(path)
    print(f"{'package':28} {'files':>5} {'lines':>6} {'largest':>8}")
    for name, paths in sorted(packages.items()):
        lines = [len(p.read_text().splitlines()) for p in paths]
        print(f"{name:28} {len(paths):5} {sum(lines):6} {max(lines):8}")
    total = sum(len(p.read_text().splitlines()) for p in src)
    print(f"{'all of src':28} {len(src):5} {total:6}")
    long_lines = sum(1 for p in src for line in p.read_text().splitlines() if len(line) > 100)
    print(
        f"\ndict[str, Any] in src: {_count('dict[str, Any]', src)} in "
        f"{sum(1 for p in src if 'dict[str, Any]' in p.read_text())} files"
    )
    # Said beside it, so the count above cannot fall by renaming: JSON trees typed as JSON (pydantic validates
    # them, mypy checks every use), where Any checked nothing.
    print(f"dict[str, JsonValue] in src: {_count('dict[str, JsonValue]', src)}")
    loose = _loose_fields(src)
    print(f"class fields typed dict[str, Any]: {len(loose)}")
    for line in loose:
        print("  " + line)
    repeated = _repeated_names(src)
    print(f"module names used twice: {len(repeated)}")
    for name, where in repeated.items():
        print(f"  {name}: {', '.join(where)}")
    print(f"# fmt: skip: {_count('# fmt: skip', src)} in src, {_count('# fmt: skip', tests)} in tests")
    print(f"src lines over 100 characters: {long_lines}")
    long_functions = _long_functions(src)
    print(f"functions over 60 lines: {len(long_functions)}")
    for line in long_functions:
        print("  " + line)
    cycles = _cycles(_graph())
    inside = [c for c in cycles if len({m.split(".")[1] for m in c}) == 1]
    print(f"import cycles: {len(cycles)} ({len(inside)} inside one package)")
    for group in cycles:
        print("  " + " <-> ".join(m.removeprefix("fairwin.") for m in group))
    _house_measures(src)


if __name__ == "__main__":
    main()
