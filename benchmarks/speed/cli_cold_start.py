"""Cold start of the command line: `storyeval score` on 3 stories, wall time and what the imports cost.

    python -m benchmarks.speed.cli_cold_start                 # float32, the bundled union-roc
    python -m benchmarks.speed.cli_cold_start --dtype int8    # the int8 path

Each run is a fresh process (`storyeval score stories.txt`, warm disk cache: one untimed run
first), timed from outside, ``--repeats`` times, the median kept, each followed by a fresh
``python -c "import torch"``, the yardstick the cold start is compared with (``ratio_to_import_torch``), and a fresh
``python -c "import torch, transformers.modeling_utils"``: what any transformers model in torch imports before it
can load, the float32 path's floor (``ratio_of_model_stack_to_import_torch``). A further run under
``python -X importtime`` attributes the import time to the packages that cost most (cumulative,
each package's own top-level import once). Run it on an otherwise idle machine: wall times on a
busy one say little.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..common import command_line, machine, results_name, write_results

STORIES = (
    "Tom went to the store. He bought milk. He went home.",
    "Anna lost her keys. She looked everywhere. She found them in her bag.",
    "The dog barked at night. The neighbours complained. Its owner bought it a bed.",
)
PACKAGES = ("torch", "transformers", "nltk", "scipy", "sklearn", "storyeval", "openvino", "ctranslate2", "tokenizers", "numpy")


def import_costs(importtime_log: str) -> dict[str, float]:
    """Seconds per top-level package: the largest cumulative time of any of its modules, which is its
    outermost import (so a package imported inside another counts for both)."""
    costs: dict[str, float] = {}
    for line in importtime_log.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line.split("|", 2)
        module = name.strip()
        package = module.split(".")[0]
        costs[package] = max(costs.get(package, 0.0), int(cumulative) / 1e6)
    return {package: round(costs[package], 3) for package in PACKAGES if package in costs}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="roc", help="union config to score with")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "int8"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", type=results_name, default=None, help="results file name (default: cli_cold_start[_<dtype>])")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be positive, got {args.repeats}")

    with tempfile.TemporaryDirectory() as tmp:
        stories = Path(tmp) / "stories.txt"
        stories.write_text("\n".join(STORIES) + "\n")
        command = ["score", str(stories), "--metric", "union", "--config", args.config, "--dtype", args.dtype]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}

        def run(*python_options: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, *python_options, "-m", "storyeval.cli.main", *command],
                                  capture_output=True, text=True, env=env, check=True)

        run()  # warm the disk cache (and make the int8 export, if needed)
        walls, torch_walls, stack_walls = [], [], []

        def timed(*python_command: str) -> float:
            started = time.perf_counter()
            subprocess.run([sys.executable, *python_command], check=True, env=env, capture_output=True)
            return time.perf_counter() - started

        for _ in range(args.repeats):
            walls.append(timed("-m", "storyeval.cli.main", *command))
            # the yardstick of issue 84's target (first score within 2x of it), in the same sitting
            torch_walls.append(timed("-c", "import torch"))
            stack_walls.append(timed("-c", "import torch, transformers.modeling_utils"))
        imports = import_costs(run("-X", "importtime").stderr)

    payload = {
        "command": command_line(__name__, argv),
        "cli": "storyeval " + " ".join(command[:1] + ["<3 stories>"] + command[2:]),
        "wall_seconds_median": round(statistics.median(walls), 3),
        "wall_seconds": [round(w, 3) for w in walls],
        "import_seconds_by_package": imports,
        "import_torch_seconds_median": round(statistics.median(torch_walls), 3),
        "import_torch_seconds": [round(w, 3) for w in torch_walls],
        "ratio_to_import_torch": round(statistics.median(walls) / statistics.median(torch_walls), 2),
        "import_model_stack_seconds_median": round(statistics.median(stack_walls), 3),
        "ratio_of_model_stack_to_import_torch": round(statistics.median(stack_walls) / statistics.median(torch_walls), 2),
        "target_seconds": 3.0,
        "machine": machine(),
    }
    name = args.output or ("cli_cold_start" if args.dtype == "float32" else f"cli_cold_start_{args.dtype}")
    print(f"{payload['cli']}: median {payload['wall_seconds_median']} s over {args.repeats} runs "
          f"({payload['ratio_to_import_torch']}x python -c 'import torch', {payload['import_torch_seconds_median']} s; "
          f"importing torch and transformers' modeling_utils alone {payload['import_model_stack_seconds_median']} s, "
          f"{payload['ratio_of_model_stack_to_import_torch']}x); imports {imports}")
    print(f"wrote {write_results(name, payload)}")


if __name__ == "__main__":
    main()
