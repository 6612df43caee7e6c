"""Time to build UNION's negative samples for a whole corpus, from a cold `datasets` cache.

    python benchmarks/negatives_throughput.py --dataset roc

Runs ``storyeval-build-negatives`` in a fresh process with an empty cache, so
the builder, the POS tagging and the sampling are all included.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, write_results  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="roc", choices=["roc", "wp"])
    parser.add_argument("--num-proc", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "storyeval-build-negatives", "--dataset", args.dataset, "--output-dir", f"{tmp}/pairs",
            "--cache-dir", f"{tmp}/cache", "--num-proc", str(args.num_proc),
        ]
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
        stats = json.loads(Path(tmp, "pairs", "negatives_stats.json").read_text())
    stories = sum(v["pairs"] for k, v in stats.items() if isinstance(v, dict))
    payload = {
        "machine": machine(),
        "command": "python benchmarks/negatives_throughput.py " + " ".join(argv or sys.argv[1:]),
        "dataset": args.dataset,
        "stories": stories,
        "seconds": round(seconds, 1),
        "stories_per_second": round(stories / seconds, 1),
        "peak_rss_mb_children": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
        "leakage_dropped_stories": stats["leakage_dropped_stories_all_splits"],
        "per_split": {k: v for k, v in stats.items() if isinstance(v, dict)},
    }
    print(json.dumps({k: payload[k] for k in ("dataset", "stories", "seconds", "stories_per_second", "peak_rss_mb_children")}))
    print("wrote", write_results(f"negatives_throughput_{args.dataset}", payload))


if __name__ == "__main__":
    main()
