"""The runtime's folders are its layers (README.md, "Layout"): imports go only downward, and one loop trains with accelerate."""
import ast
import graphlib
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


def module_names() -> dict[str, Path]:
    return {".".join(("storyeval", *path.relative_to(RUNTIME).with_suffix("").parts)).removesuffix(".__init__"): path
            for path in RUNTIME.rglob("*.py") if "__pycache__" not in path.parts}


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix that names ``module`` or a package holding it."""
    matches = [(len(prefix), index) for index, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise AssertionError(f"{module} is in no layer of tests/test_layout.py's LAYERS: add it to one")
    return max(matches)[1]


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The storyeval modules ``path`` imports, function-level imports included (``from storyeval.x import y``
    counts as ``storyeval.x.y`` where that is a module, else ``storyeval.x``)."""
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level and node.module.split(".")[0] == "storyeval":
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                targets.add(submodule if submodule in modules else node.module)
        elif isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names if alias.name.split(".")[0] == "storyeval"}
    return targets


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(path, modules) - {name} for name, path in modules.items()}


def test_every_module_has_a_layer():
    for module in module_names():
        layer_of(module)


def test_imports_only_go_down():
    climbing = [f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
                for module, targets in import_graph().items() for target in sorted(targets)
                if layer_of(target) > layer_of(module)]
    assert not climbing, "imports that climb a layer:\n" + "\n".join(climbing)


def test_layer_check_catches_a_climb(tmp_path):
    climbing = tmp_path / "probe.py"
    climbing.write_text("def f():\n    from storyeval.cli import main\n")
    targets = imports_of(climbing, module_names())
    assert targets == {"storyeval.cli.main"} and layer_of("storyeval.cli.main") > layer_of("storyeval.scoring.sequence")


def test_no_import_cycles():
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


def test_the_top_level_reads_like_the_architecture():
    entries = sorted(entry.name for entry in RUNTIME.iterdir() if entry.name != "__pycache__")
    assert len(entries) <= MAX_TOP_LEVEL_ENTRIES, entries
    for package in (path.parent for path in RUNTIME.rglob("__init__.py") if path.parent != RUNTIME):
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
        assert docstring, f"{package.relative_to(CHECKOUT)}/__init__.py says nowhere what lives there and what it may import"


def test_one_training_loop_calls_accelerator_backward():
    callers = sorted(path.relative_to(CHECKOUT).as_posix() for path in (CHECKOUT / "training").rglob("*.py")
                     if "accelerator.backward(" in path.read_text(encoding="utf-8"))
    assert callers == ["training/loop.py"]
