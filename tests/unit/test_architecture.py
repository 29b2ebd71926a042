"""The package's house rules, checked on its source: import layers, no import loops, sizes.

Every import counts, also one inside a function or under ``TYPE_CHECKING``: a loop that only
type checkers or a late call walk is still a loop a reader has to untangle. Layers run from the
bottom (errors, checksums) to the top (the test-support package); a module may import its own
layer and those below it. README's "Where things are" draws the same map.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "streamer"

# Bottom first. A module belongs to the longest prefix that names it.
LAYERS: list[tuple[str, ...]] = [
    ("streamer", "streamer.errors", "streamer.checksums", "streamer.logs"),
    (
        "streamer.config",
        "streamer.events",
        "streamer.kafka",
        "streamer.metrics",
        "streamer.filesystems",
        "streamer.fs_options",
    ),
    ("streamer.hive",),
    ("streamer.metastore",),
    ("streamer.embedded_metastore",),
    ("streamer.warehouse", "streamer.replay"),
    ("streamer.source",),
    ("streamer.target", "streamer.target.state"),
    ("streamer.archive",),
    ("streamer.target.apply",),
    ("streamer.target.table_reader",),
    ("streamer.target.dr",),
    ("streamer.target.job",),
    # the command line: the commands, and the flags they share (declared once per settings group)
    ("streamer.target.commands", "streamer.target.dr.commands", "streamer.target.options"),
    ("streamer.archive.load", "streamer.archive.commands"),
    ("streamer.read", "streamer.demo", "streamer.cli"),
    ("streamer.testing",),
]

MAX_FILE_LINES = 600
MAX_BODY_LINES = 150


@dataclass(frozen=True)
class Import:
    module: str
    target: str
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> Iterator[Import]:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "streamer":
                    yield Import(name, _deepest(alias.name, known), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            if source.split(".")[0] != "streamer":
                continue
            for alias in node.names:  # `from streamer.x import y` may name the module x.y
                full = f"{source}.{alias.name}"
                yield Import(name, full if full in known else _deepest(source, known), node.lineno)


def _deepest(dotted: str, known: set[str]) -> str:
    parts = dotted.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts)


def _graph() -> list[Import]:
    modules = _modules()
    known = set(modules)
    edges = (imp for name, path in modules.items() for imp in _imports(name, path, known))
    return [imp for imp in edges if imp.target != imp.module]


def _layer(module: str) -> int:
    best, layer = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, layer = len(prefix), i
    return layer


def _cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.module, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer() -> None:
    assert [m for m in _modules() if _layer(m) < 0] == []


def test_no_import_runs_up_the_layers() -> None:
    """A package's ``__init__`` may re-export from inside its own tree (a facade, not a dependency)."""
    upward = [
        f"{e.module}:{e.line} imports {e.target} (layer {_layer(e.target)} > {_layer(e.module)})"
        for e in _graph()
        if _layer(e.target) > _layer(e.module) and not e.target.startswith(e.module + ".")
    ]
    assert upward == []


def test_no_import_loops() -> None:
    assert _cycles(_graph()) == []


def test_the_checks_see_a_loop_and_an_upward_import() -> None:
    """The walkers must be able to fail: a made-up loop and a made-up upward edge are found."""
    loop = [Import("streamer.a", "streamer.b", 1), Import("streamer.b", "streamer.a", 1)]
    assert _cycles(loop) == [["streamer.a", "streamer.b"]]
    assert _layer("streamer.testing.checker") > _layer("streamer.target.dr.verify")
    assert _layer("streamer.target.job.lanes") > _layer("streamer.target.apply.plan")


def test_nothing_outside_testing_imports_the_test_support_package() -> None:
    offenders = [
        f"{e.module}:{e.line}"
        for e in _graph()
        if e.target.startswith("streamer.testing") and not e.module.startswith("streamer.testing")
    ]
    assert offenders == []


def _bodies() -> Iterator[tuple[str, int]]:
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                assert node.end_lineno is not None
                yield f"{name}.{node.name} (line {node.lineno})", node.end_lineno - node.lineno + 1


class SizeWarning(UserWarning):
    """A file or a function/class past the house size: a prompt to look for a split by meaning,
    not a limit to code down to (a class trimmed to fit says less, not more)."""


def test_files_past_the_house_size_are_named() -> None:
    long = {n: c for n, p in _modules().items() if (c := p.read_text().count("\n")) > MAX_FILE_LINES}
    for name, lines in sorted(long.items()):
        warnings.warn(SizeWarning(f"{name}: {lines} lines (house size {MAX_FILE_LINES})"), stacklevel=1)
    assert all(lines < 2 * MAX_FILE_LINES for lines in long.values()), long  # twice it: split it now


def test_functions_and_classes_past_the_house_size_are_named() -> None:
    long = {where: lines for where, lines in _bodies() if lines > MAX_BODY_LINES}
    for where, lines in sorted(long.items()):
        warnings.warn(SizeWarning(f"{where}: {lines} lines (house size {MAX_BODY_LINES})"), stacklevel=1)
    assert all(lines < 2 * MAX_BODY_LINES for lines in long.values()), long


def test_every_exception_class_derives_from_the_root() -> None:
    """Errors streamer raises, signals it catches itself included, are ``StreamerError``s."""
    import importlib
    import inspect

    from streamer.errors import StreamerError

    strays = []
    for name in _modules():
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == name
                and not issubclass(obj, StreamerError)
            ):
                strays.append(f"{name}.{obj.__name__}")
    assert strays == []


# --- the door: one module changes the target's catalog ---------------------------------------------
CATALOG_WRITES = frozenset({
    "create_database", "alter_database", "drop_database", "create_table", "alter_table", "drop_table",
    "add_partitions", "alter_partitions", "drop_partitions", "create_function", "drop_function",
    "add_constraints", "drop_constraint", "update_column_statistics", "delete_column_statistics",
})
DOOR = "streamer.target.apply.door"
ON_NO_RECORDS_WORD = {  # modules that change a catalog, and why no record decides what they change
    "streamer.target.job.watermark": "streamer's own watermark database, never a replica",
    "streamer.target.dr.failover": "the operator's failover: removes this source's marks",
    "streamer.target.dr.failback": "the operator's failback: drops the old primary's databases",
}


def _catalog_writes(name: str, source: str) -> list[str]:
    """Calls of a catalog write method in ``source``, on anything but a module it imported (a handler
    module's function of the same name, e.g. ``tables.create_table(view, event)``, only decides)."""
    tree = ast.parse(source)
    modules = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "streamer.target.apply"
        for alias in node.names
    }
    return [
        f"{name}:{node.lineno} {ast.unparse(node.func)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr in CATALOG_WRITES
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id in modules)
    ]


def test_only_the_door_changes_the_targets_catalog() -> None:
    """Every catalog change a record decides passes ``streamer.target.apply.door.execute``, which checks
    ownership, names, places and bounds alike for every kind of change (docs/design/apply.md)."""
    offenders = [
        call
        for name, path in _modules().items()
        if name.startswith("streamer.target") and name != DOOR and name not in ON_NO_RECORDS_WORD
        for call in _catalog_writes(name, path.read_text())
    ]
    assert offenders == []
    for name in ON_NO_RECORDS_WORD:  # each exception still exists and still needs to be one
        assert _catalog_writes(name, _modules()[name].read_text()), name


def test_the_door_check_sees_a_write_past_it() -> None:
    bypass = "from streamer.target.apply import tables\ndef f(ctx):\n    ctx.catalog.drop_table('a', 'b')\n"
    through = "from streamer.target.apply import tables\ndef f(ctx, e):\n    tables.drop_table(ctx, e)\n"
    assert _catalog_writes("m", bypass) == ["m:3 ctx.catalog.drop_table"]
    assert _catalog_writes("m", through) == []


EXECUTOR = frozenset(  # the executor and its parts
    "streamer.target.apply." + m for m in ("executor", "writes", "markers"))


def _door_calls(name: str, source: str) -> list[str]:
    """Calls of ``.do(effect)``: an effect handed to the door by hand, not by the executor."""
    return [f"{name}:{node.lineno} {ast.unparse(node.func)}"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "do"]


def test_only_the_executor_hands_effects_to_the_door() -> None:
    """Every catalog effect reaches the door through the executor (``executor.run``: a handler's list, a
    bootstrap record's, a step's marker), so no path chooses which of its effects to check."""
    offenders = [
        call
        for name, path in _modules().items()
        if name.startswith("streamer.") and name not in EXECUTOR
        for call in _door_calls(name, path.read_text())
    ]
    assert offenders == []
    assert all(_door_calls(name, _modules()[name].read_text()) for name in EXECUTOR)  # still seen there
    assert _door_calls("m", "def f(ctx, e):\n    ctx.do(e)\n") == ["m:2 ctx.do"]


FILE_WRITES = frozenset({
    "stage_all", "copy_all", "publish_swapped", "clear_dir", "move_dir", "link_dir", "remove_tree",
    "remove_file", "sync_dir",
})
FILE_WRITES_PAST_THE_DOOR = {  # modules that call them not through the door, and why
    "streamer.target.apply.files": "defines the operations (copy_all stages then publishes)",
    "streamer.target.apply.dir_sync": "the door's directory sync (door.sync_dir) copying through its copier",
}


def _file_writes(name: str, source: str) -> list[str]:
    """Calls of a file-changing operation in ``source`` except through the door (``door.remove_tree``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            called = func.attr
            through_door = isinstance(func.value, ast.Name) and func.value.id == "door"
        else:
            called, through_door = (func.id if isinstance(func, ast.Name) else None), False
        if called in FILE_WRITES and not through_door:
            found.append(f"{name}:{node.lineno} {ast.unparse(func)}")
    return found


def test_only_the_door_changes_the_targets_files() -> None:
    """Every file change a handler makes passes the door's place check (``door.check_place``: inside a
    directory of a database this source owns, or an external one no other source holds)."""
    offenders = [
        call
        for name, path in _modules().items()
        if name.startswith("streamer.target") and name != DOOR and name not in FILE_WRITES_PAST_THE_DOOR
        for call in _file_writes(name, path.read_text())
    ]
    assert offenders == []
    for name in FILE_WRITES_PAST_THE_DOOR:
        assert _file_writes(name, _modules()[name].read_text()), name


def test_the_file_check_sees_a_write_past_the_door() -> None:
    bypass = ("from x import remove_tree\ndef f(ctx, d):\n    remove_tree(d, ctx.paths.roots)\n"
              "    door.remove_tree(ctx, d)\n")
    assert _file_writes("m", bypass) == ["m:3 remove_tree"]


_APPLY = "streamer.target.apply."
DECIDING = tuple(_APPLY + m for m in (  # the modules whose handlers decide (handlers.DECIDERS), and theirs
    "databases", "tables", "partitions", "data", "transactions", "catalog_objects", "effects", "view",
    "function_resources", "locations", "handlers", "step_effects"))
DOING = frozenset({  # modules that do I/O on the target: a deciding module imports none of them
    *(_APPLY + m for m in ("context", "door", "executor", "files", "swap", "dir_sync", "state_sync", "guard",
                           "external_owners", "journal", "writes")),
    "streamer.target.state", "streamer.filesystems", "streamer.metrics",
})


def _doing(imports: list[Import]) -> list[str]:
    return [f"{i.module}:{i.line} imports {i.target}" for i in imports
            if any(i.target == d or i.target.startswith(d + ".") for d in DOING)
            and not i.target.startswith("streamer.target.state.visibility")]  # (its pure table_key and
    # target_parameters; the store's I/O is the executor's)


def test_handlers_that_decide_import_nothing_that_does() -> None:
    """A deciding handler is a function of the event and the view (docs/design/apply.md): its module
    imports no module that writes the catalog, the files or the job's state."""
    edges = [e for e in _graph() if e.module in DECIDING]
    assert {e.module for e in edges} == set(DECIDING)  # each module is still there and still seen
    assert _doing(edges) == []


def test_the_deciding_check_sees_an_import_of_a_doer() -> None:
    found = _doing([Import("m", _APPLY + "door", 3), Import("m", _APPLY + "view", 4)])
    assert found == ["m:3 imports streamer.target.apply.door"]


def _deciders() -> set[str]:
    """Names of the deciding modules' functions that return effects (``-> list[Effect]``)."""
    modules = _modules()
    return {
        node.name
        for name in DECIDING
        for node in ast.walk(ast.parse(modules[name].read_text()))
        if isinstance(node, ast.FunctionDef) and node.returns is not None
        and ast.unparse(node.returns) == "list[Effect]"
    }


def _undone_decisions(name: str, source: str, deciders: set[str]) -> list[str]:
    """Calls of a decider in ``source`` (a deciding module's function, through its module or imported by
    name) whose effects nobody does: each must be the effects argument of ``executor.run`` (a decider
    called alone changes nothing, silently)."""
    tree = ast.parse(source)
    modules, names = set(), set()  # what names a deciding module, what names one of its deciders
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in DECIDING:
                    modules.add(alias.asname or alias.name)
                elif node.module in DECIDING and alias.name in deciders:
                    names.add(alias.asname or alias.name)
    done = {  # the effects argument of a run, and the rewrites of decisions inside it
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("executor.run", "run")
        and len(node.args) > 1
        for inner in ast.walk(node.args[1])
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in done:
            continue
        func = node.func
        via_module = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                      and func.value.id in modules and func.attr in deciders)
        if via_module or (isinstance(func, ast.Name) and func.id in names):
            found.append(f"{name}:{node.lineno} {ast.unparse(func)}")
    return found


def test_every_decision_outside_the_handlers_is_done() -> None:
    """Outside the deciding modules (which compose each other's lists), every call of a handler hands its
    effects to the executor: the repairs once called one for its side effects, which it no longer has."""
    deciders = _deciders()
    assert {"create_table", "add_partitions", "commit_txn", "insert"} <= deciders
    offenders = [
        call
        for name, path in _modules().items()
        if name.startswith("streamer.") and name not in DECIDING
        for call in _undone_decisions(name, path.read_text(), deciders)
    ]
    assert offenders == []


def test_the_decision_check_sees_one_left_undone() -> None:
    source = ("from streamer.target.apply import tables\ndef f(ctx, e):\n    tables.create_table(ctx, e)\n"
              "    executor.run(ctx, tables.create_table(ctx, e))\n    ctx.catalog.create_table(t)\n"
              "    executor.run(ctx, around(ctx, s, tables.create_table(ctx, e)))\n"
              "    around(ctx, s, tables.create_table(ctx, e))\n")
    found = _undone_decisions("m", source, {"create_table"})
    assert found == ["m:3 tables.create_table", "m:7 tables.create_table"]

