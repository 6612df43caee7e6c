"""The command line starts without importing what its path does not need (issue: cold start)."""
import json
import subprocess
import sys

# never needed to parse a command line: plots, statistics, data loading, training code, and the model stack
HEAVY = ("scipy", "matplotlib", "datasets", "storyeval_training", "sklearn", "nltk", "torch", "transformers", "evaluate")


def imported_by(code: str) -> list[str]:
    """Which HEAVY top-level packages ``code`` leaves in sys.modules, run in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{name.split('.')[0] for name in sys.modules}} & set({HEAVY!r}))))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_building_the_parser_imports_nothing_heavy():
    assert imported_by("import storyeval.cli.main\nstoryeval.cli.main.build_parser()") == []


def test_help_imports_nothing_heavy():
    code = "import storyeval.cli.main\ntry:\n    storyeval.cli.main.main(['score', '--help'])\nexcept SystemExit:\n    pass"
    assert imported_by(code) == []
