"""Time to build UNION's negative samples for a whole corpus, from a cold `datasets` cache.

    python -m benchmarks.speed.negatives_throughput --dataset roc

Runs ``storyeval-build-negatives`` in a fresh process with an empty cache, so
the builder, the POS tagging and the sampling are all included. Memory is the
peak of the proportional set size (PSS, shared pages counted once) summed over
the command and all its worker processes, sampled every 0.5 s; the largest
single process's peak RSS is recorded too.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psutil  # installed with accelerate (the train extra)

from ..common import command_line, machine, write_results


def tree_pss_mb(process: psutil.Process) -> float:
    """PSS of ``process`` and its descendants, in MB; processes that end while being read count 0."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total / 2**20


def run_sampling_memory(command: list[str], interval: float = 0.5) -> float:
    """Run ``command`` to completion; the peak of its process tree's summed PSS, in MB."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak, watched = 0.0, psutil.Process(child.pid)
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            try:
                peak = max(peak, tree_pss_mb(watched))
            except psutil.NoSuchProcess:
                return
            done.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = child.wait()
    done.set()
    sampler.join()
    if code:
        raise subprocess.CalledProcessError(code, command)
    return peak


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
        peak_pss = run_sampling_memory(command)
        seconds = time.perf_counter() - started
        stats = json.loads(Path(tmp, "pairs", "negatives_stats.json").read_text())
    stories = sum(v["pairs"] for k, v in stats.items() if isinstance(v, dict) and "pairs" in v)
    payload = {
        "machine": machine(),
        "command": command_line(__name__, argv),
        "dataset": args.dataset,
        "stories": stories,
        "seconds": round(seconds, 1),
        "stories_per_second": round(stories / seconds, 1),
        "peak_pss_mb_all_processes": round(peak_pss),
        # the peak of the largest single process only: ru_maxrss does not add processes up
        "peak_rss_mb_largest_process": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
        "leakage_dropped_stories": stats["leakage_dropped_stories_all_splits"],
        "per_split": {k: v for k, v in stats.items() if isinstance(v, dict) and "pairs" in v},
    }
    shown = ("dataset", "stories", "seconds", "stories_per_second", "peak_pss_mb_all_processes", "peak_rss_mb_largest_process")
    print(json.dumps({k: payload[k] for k in shown}))
    print("wrote", write_results(f"negatives_throughput_{args.dataset}", payload))


if __name__ == "__main__":
    main()
