"""The folders are the architecture (README.md, "Layout"): storyeval/ (the runtime), training/ (installed as
storyeval_training) and benchmarks/ are each drawn in layers, imports go only downward, every command a document
cites runs, and one loop trains with accelerate."""
import ast
import graphlib
import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
RUNTIME = CHECKOUT / "storyeval"

# bottom first: a module may import its own layer and those before it, never one after it
LAYERS = (
    ("checkpoints", ("storyeval.version", "storyeval.checkpoints")),
    ("text", ("storyeval.inputs", "storyeval.text", "storyeval.files")),
    ("models", ("storyeval.models",)),
    ("scoring", ("storyeval.scoring",)),
    ("analysis", ("storyeval.analysis",)),
    ("public face", ("storyeval", "storyeval.api", "storyeval.metric_base")),
    ("cli", ("storyeval.cli",)),
)
MAX_TOP_LEVEL_ENTRIES = 12

# export/ holds both ends: what every layer records with (provenance, the cards), and the commands that act on a
# recipe's run (so they import the recipes); the plot generator in data/ trains on the loop
TRAINING_LAYERS = (
    ("paths, selection", ("storyeval_training", "storyeval_training.paths", "storyeval_training.selection")),
    ("export's records", ("storyeval_training.export", "storyeval_training.export.provenance", "storyeval_training.export.model_card")),
    ("loop", ("storyeval_training.loop",)),
    ("data", ("storyeval_training.data",)),
    ("recipes", ("storyeval_training.recipes",)),
    ("export's commands", ("storyeval_training.export.export_state", "storyeval_training.export.window_aggregation",
                           "storyeval_training.export.weight_mix")),
)
BENCHMARK_LAYERS = (
    ("shared helpers", ("benchmarks", "benchmarks.common", "benchmarks.correlation")),
    ("checkpoints", ("benchmarks.checkpoints",)),
    ("measurements", ("benchmarks.agreement", "benchmarks.speed", "benchmarks.reward")),
    ("report", ("benchmarks.report",)),
)


@dataclass(frozen=True)
class Package:
    name: str  # its import name
    folder: Path
    layers: tuple
    max_entries: int
    peers: tuple = ()  # subpackages of one layer that never import one another


# bottom first, as their layers: the runtime imports neither of the others, training never imports benchmarks
PACKAGES = (
    Package("storyeval", RUNTIME, LAYERS, MAX_TOP_LEVEL_ENTRIES),
    Package("storyeval_training", CHECKOUT / "training", TRAINING_LAYERS, 10),
    Package("benchmarks", CHECKOUT / "benchmarks", BENCHMARK_LAYERS, 10,
            peers=("benchmarks.agreement", "benchmarks.speed", "benchmarks.reward")),
)
RUNTIME_PACKAGE, TRAINING_PACKAGE, BENCHMARKS_PACKAGE = PACKAGES
by_name = pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.name)


def module_names(package: Package = RUNTIME_PACKAGE) -> dict[str, Path]:
    return {".".join((package.name, *path.relative_to(package.folder).with_suffix("").parts)).removesuffix(".__init__"): path
            for path in package.folder.rglob("*.py") if "__pycache__" not in path.parts}


def layer_of(module: str, layers: tuple = LAYERS) -> int:
    """The index in ``layers`` of the longest prefix that names ``module`` or a package holding it."""
    matches = [(len(prefix), index) for index, (_, prefixes) in enumerate(layers) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise AssertionError(f"{module} is in no layer of tests/test_layout.py's layers: add it to one")
    return max(matches)[1]


def imported_names(path: Path, module: str) -> set[str]:
    """Every module ``path`` (the module ``module``) imports, function-level and relative imports included, as
    absolute names: ``from a.b import c`` gives ``a.b.c``, whether c is a module or a name in a.b."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            names |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def imports_of(path: Path, modules: dict[str, Path], package: Package = RUNTIME_PACKAGE, module: str | None = None) -> set[str]:
    """The modules of ``package`` that ``path`` imports (``from storyeval.x import y`` counts as ``storyeval.x.y``
    where that is a module, else ``storyeval.x``)."""
    module = module or next((name for name, file in modules.items() if file == path), f"{package.name}.probe")
    targets = set()
    for name in imported_names(path, module):
        if name.split(".")[0] == package.name:
            targets.add(name if name in modules else name.rpartition(".")[0] if name.rpartition(".")[0] in modules else name)
    return targets


def import_graph(package: Package = RUNTIME_PACKAGE) -> dict[str, set[str]]:
    modules = module_names(package)
    return {name: imports_of(path, modules, package, name) - {name} for name, path in modules.items()}


@by_name
def test_every_module_has_a_layer(package):
    for module in module_names(package):
        layer_of(module, package.layers)


@by_name
def test_imports_only_go_down(package):
    layers = package.layers
    climbing = [f"{module} ({layers[layer_of(module, layers)][0]}) imports {target} ({layers[layer_of(target, layers)][0]})"
                for module, targets in import_graph(package).items() for target in sorted(targets)
                if layer_of(target, layers) > layer_of(module, layers)]
    assert not climbing, "imports that climb a layer:\n" + "\n".join(climbing)


def peer_of(module: str, peers: tuple) -> str | None:
    return next((peer for peer in peers if module == peer or module.startswith(peer + ".")), None)


@by_name
def test_peer_groups_never_import_one_another(package):
    crossing = [f"{module} imports {target}" for module, targets in import_graph(package).items() for target in sorted(targets)
                if peer_of(module, package.peers) and peer_of(target, package.peers) not in (None, peer_of(module, package.peers))]
    assert not crossing, "imports between groups of one layer:\n" + "\n".join(crossing)


def test_the_packages_import_only_those_below_them():
    rank = {package.name: index for index, package in enumerate(PACKAGES)}
    climbing = [f"{module} imports {name}" for package in PACKAGES for module, path in module_names(package).items()
                for name in sorted(imported_names(path, module)) if rank.get(name.split(".")[0], -1) > rank[package.name]]
    assert not climbing, "\n".join(climbing)


def test_layer_check_catches_a_climb(tmp_path):
    climbing = tmp_path / "probe.py"
    climbing.write_text("def f():\n    from storyeval.cli import main\n")
    targets = imports_of(climbing, module_names())
    assert targets == {"storyeval.cli.main"} and layer_of("storyeval.cli.main") > layer_of("storyeval.scoring.sequence")


def test_layer_check_catches_a_climb_in_training_and_a_relative_import_across_benchmark_groups(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from storyeval_training.recipes import train_union\n")
    targets = imports_of(probe, module_names(TRAINING_PACKAGE), TRAINING_PACKAGE, "storyeval_training.data.probe")
    assert targets == {"storyeval_training.recipes.train_union"}
    assert layer_of("storyeval_training.recipes.train_union", TRAINING_LAYERS) > layer_of("storyeval_training.data.probe", TRAINING_LAYERS)
    probe.write_text("from ..agreement import union_correlation\nfrom ..common import write_results\n")
    targets = imports_of(probe, module_names(BENCHMARKS_PACKAGE), BENCHMARKS_PACKAGE, "benchmarks.speed.probe")
    assert targets == {"benchmarks.agreement.union_correlation", "benchmarks.common"}
    peers = BENCHMARKS_PACKAGE.peers
    assert peer_of("benchmarks.agreement.union_correlation", peers) != peer_of("benchmarks.speed.probe", peers)


# the one cycle allowed, older than the grouping of training/, through an import inside a function: WritingPrompts'
# `extra` config reads wp_extra's human stories, and wp_extra splits stories by the plot-guided ones wp reads
DEFERRED_IMPORTS = {("storyeval_training.data.builders.wp_extra", "storyeval_training.data.builders.wp")}


@by_name
def test_no_import_cycles(package):
    graph = import_graph(package)
    for module, target in DEFERRED_IMPORTS:
        if module in graph:
            assert target in graph[module], f"{module} no longer imports {target}: drop it from DEFERRED_IMPORTS"
            graph[module] = graph[module] - {target}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


def test_every_import_of_the_three_packages_names_a_module_that_exists():
    """A function-level import of a module that moved (a benchmark's lazy ``from storyeval_training.builders ...``)
    fails only when that code path runs; here it fails at once, in any package, test or example."""
    modules = {name: path for package in PACKAGES for name, path in module_names(package).items()}
    files = [path for folder in (RUNTIME, CHECKOUT / "training", CHECKOUT / "benchmarks", CHECKOUT / "tests", CHECKOUT / "examples")
             for path in folder.rglob("*.py") if "__pycache__" not in path.parts]
    missing = []
    for path in files:
        for name in imported_names(path, "probe.probe"):
            if name.split(".")[0] in {package.name for package in PACKAGES} and name not in modules \
                    and name.rpartition(".")[0] not in modules:
                missing.append(f"{path.relative_to(CHECKOUT)}: {name}")
    assert not missing, missing


@by_name
def test_the_top_level_reads_like_the_architecture(package):
    entries = sorted(entry.name for entry in package.folder.iterdir() if entry.name != "__pycache__" and not entry.name.startswith("."))
    assert len(entries) <= package.max_entries, entries
    for folder in (path.parent for path in package.folder.rglob("__init__.py") if path.parent != package.folder):
        docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert docstring, f"{folder.relative_to(CHECKOUT)}/__init__.py says nowhere what lives there and what it may import"


def test_one_training_loop_calls_accelerator_backward():
    callers = sorted(path.relative_to(CHECKOUT).as_posix() for path in (CHECKOUT / "training").rglob("*.py")
                     if "accelerator.backward(" in path.read_text(encoding="utf-8"))
    assert callers == ["training/loop.py"]


# ---- the commands the documents cite ----

# python -m X and accelerate launch -m X; a module name that goes on as ".<" is a placeholder (benchmarks.<group>.<name>),
# and as '."' a name a card template completes
CITED_COMMAND = re.compile(r"-m ((?:storyeval_training|benchmarks)(?:\.[A-Za-z_]\w*)+)")
PLACEHOLDERS = (".<", '."')
DOCUMENTS = ("README.md", "BENCHMARKS.md", "CHANGELOG.md", "docs/*.md", "benchmarks/experiments/*.md", "hub_cards/**/README.md",
             "metrics/**/README.md", "training/export/card_templates/*.md")
# Python sources: their docstrings, comments and messages (the tests' own probes are not citations)
SOURCES = ("storyeval/**/*.py", "training/**/*.py", "benchmarks/**/*.py", "examples/**/*.py", "setup.py")


def cited_modules(text: str) -> set[str]:
    return {match.group(1) for match in CITED_COMMAND.finditer(text) if text[match.end():match.end() + 2] not in PLACEHOLDERS}


def cited_commands(root: Path = CHECKOUT, patterns=DOCUMENTS + SOURCES) -> dict[str, list[str]]:
    """Each module a ``-m`` command names -> the files that cite it."""
    cited = {}
    for path in sorted({path for pattern in patterns for path in root.glob(pattern) if "__pycache__" not in path.parts}):
        for module in cited_modules(path.read_text(encoding="utf-8")):
            cited.setdefault(module, []).append(path.relative_to(root).as_posix())
    return cited


def runs_as_main(module: str) -> bool:
    """Whether ``python -m module`` finds something to run: a module, or a package with ``__main__``."""
    try:
        spec = importlib.util.find_spec(module)
    except ImportError:  # a parent that is missing, or a module where a package should be
        return False
    if spec is None:
        return False
    return spec.submodule_search_locations is None or runs_as_main(f"{module}.__main__")


def test_every_cited_command_runs_a_module():
    cited = cited_commands()
    assert len(cited) > 30, sorted(cited)  # the scan found the documents' commands
    unresolved = {module: files for module, files in cited.items() if not runs_as_main(module)}
    assert not unresolved, "commands that name no runnable module:\n" + "\n".join(f"{m}: {', '.join(f)}" for m, f in unresolved.items())


def test_a_cited_command_that_no_longer_resolves_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "old.md").write_text(
        "Run `python -m benchmarks.union_correlation --sets roc`, then\n"
        "`accelerate launch -m storyeval_training.train_union --dataset roc` and `python -m storyeval_training.recipes`.\n"
        "These run: `python -m benchmarks.agreement.union_correlation`, `python -m storyeval_training.data.plots.generator`.\n"
        "A placeholder is no command: python -m benchmarks.<group>.<name>, python -m storyeval_training.recipes.<name>.\n")
    cited = cited_commands(tmp_path, ("docs/*.md",))
    assert sorted(cited) == ["benchmarks.agreement.union_correlation", "benchmarks.union_correlation",
                             "storyeval_training.data.plots.generator", "storyeval_training.recipes", "storyeval_training.train_union"]
    assert sorted(module for module in cited if not runs_as_main(module)) == [
        "benchmarks.union_correlation", "storyeval_training.recipes", "storyeval_training.train_union"]  # a package without __main__


def console_scripts() -> dict[str, str]:
    """setup.py's console scripts: name -> ``module:function``."""
    tree = ast.parse((CHECKOUT / "setup.py").read_text(encoding="utf-8"))
    entry_points = next(node for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "entry_points").value
    scripts = ast.literal_eval(entry_points)["console_scripts"]
    return dict(script.split("=", 1) for script in scripts)


def test_every_console_script_names_a_function():
    scripts = console_scripts()
    assert {"storyeval", "storyeval-train-union", "storyeval-build-negatives"} <= set(scripts)
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function, None)), f"{name}={target}: no such function"
