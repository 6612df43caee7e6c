"""Every Python block of README.md runs, in order, as a reader would paste them into one session,
and then those of the docs pages whose examples came out of it (docs/distributed.md).

The blocks run in a fresh process after `storyeval register` (step 1 of the README), with
evaluate's caches and the Hugging Face cache in this test's folder, so `evaluate.load("union")`
works by name as it does for a user. Names a block leaves to the reader (``stories``,
``batches``, ``my_shard``, ``scores_a`` ...) get tiny definitions first; the distributed block runs
as a single process (RANK=0, WORLD_SIZE=1). Only the MiniLM configs are loaded.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import subprocess_env

CHECKOUT = Path(__file__).resolve().parent.parent

# what the README leaves to the reader, as small as will do
PLACEHOLDERS = '''
stories = ["Ken went to the bar. He found a phone and gave it back.", "Ann baked a cake. She shared it with her friends."]
more_stories = ["Tom lost his keys. He found them in his coat."]
batches = [{"generated": ["He found a phone. He gave it back."], "prompt": ["Ken went to the bar."]}]
scores_a = [0.61, 0.72, 0.55, 0.80, 0.67, 0.74, 0.59, 0.70, 0.66, 0.77, 0.63, 0.71]
scores_b = [0.52, 0.70, 0.49, 0.71, 0.60, 0.69, 0.58, 0.61, 0.62, 0.70, 0.55, 0.64]


def my_shard(rank, world):
    return [stories[rank::world]]
'''

RUNNER = '''
import json, sys, traceback
from storyeval.checkpoints.registration import register

register()
blocks = json.loads(sys.argv[1])
namespace = {"__name__": "__readme__"}
exec(compile(sys.argv[2], "placeholders", "exec"), namespace)
for number, (line, code) in enumerate(blocks, 1):
    try:
        exec(compile(code, f"block {number} ({line})", "exec"), namespace)
    except BaseException:
        print(json.dumps({"failed": number, "line": line, "code": code, "error": traceback.format_exc()}))
        raise SystemExit(1)
print(json.dumps({"ran": len(blocks)}))
'''


# run after the README, in this order: pages whose examples moved out of it
DOCS = ("docs/distributed.md",)


def python_blocks(text: str, name: str = "README.md") -> list[tuple[str, str]]:
    """(where, code) of each ```python block: the file and the line the code starts on."""
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        blocks.append((f"{name} line {text.count(chr(10), 0, match.start()) + 2}", match.group(1)))
    return blocks


def all_blocks() -> list[tuple[str, str]]:
    return [block for name in ("README.md", *DOCS) for block in python_blocks((CHECKOUT / name).read_text(encoding="utf-8"), name)]


def test_the_readme_and_docs_have_python_blocks_to_run():
    assert len(python_blocks((CHECKOUT / "README.md").read_text(encoding="utf-8"))) >= 5
    assert all(python_blocks((CHECKOUT / name).read_text(encoding="utf-8"), name) for name in DOCS)


def test_every_python_block_of_the_readme_runs(tmp_path):
    blocks = all_blocks()
    env = subprocess_env({
        **os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_EVALUATE_CACHE": str(tmp_path / "evaluate"),
        "HF_HUB_CACHE": str(tmp_path / "hub"), "STORYEVAL_CACHE": str(tmp_path / "storyeval"), "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1", "RANK": "0", "WORLD_SIZE": "1",
    })
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), env.get("PYTHONPATH")]))  # this checkout's package
    outside = tmp_path / "elsewhere"  # not the checkout, so nothing is found by a relative path
    outside.mkdir()
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(blocks), PLACEHOLDERS], cwd=outside, env=env,
                          capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {"error": done.stderr[-3000:]}
    assert done.returncode == 0 and report.get("ran") == len(blocks), (
        f"the block at {report.get('line')} failed:\n{report.get('code')}\n{report.get('error')}"
    )
