#!/usr/bin/env bash
# Issue 84's speed figures in one sitting: run it from the checkout on a quiet machine (nothing else running; a busy
# one makes every rate wrong), with the project's environment active. Two threads, as the project's CI hosts have two
# cores. Each command writes benchmarks/results/<name>.json, which records the CPU, the commit and the load; compare
# rates only within one sitting. Part A (the README's figures) takes about 35 minutes on a two-core host, part B (the
# other speed-ups) about 30 more:
#
#     NLTK_DATA=../shared/nltk_data bash benchmarks/speed/run_issue84.sh        # both parts
#     NLTK_DATA=../shared/nltk_data bash benchmarks/speed/run_issue84.sh A      # one
#
# The int8 rows export each checkpoint by its measured scheme (storyeval.scoring.int8.runtime.MEASURED_FIDELITY) in an
# untimed run first; a scheme is timed whether or not its checkpoint is offered int8 yet (the rule's agreement figures
# do not depend on the machine's load and were measured apart: benchmarks/experiments/speed.md).
set -euo pipefail
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=2 TOKENIZERS_PARALLELISM=false
PYTHON=${PYTHON:-python}
PARTS=${1:-AB}
run() { echo "== $(date -u +%H:%M:%S) $*" >&2; "$PYTHON" -m "$@"; }

if [[ $PARTS == *A* ]]; then
# A1. The default (union wp-base) on ROC test stories (1,000, batch 32) and at WP length (100 WP test stories, about
#     200 words after their prompts; at the default batch of 16, which CPU_BATCH_TOKENS caps at WP length): torch float32,
#     int8 by its scheme, OpenVINO float32 (the int8 runtime without int8) and the BERT-base-sized scorer, each in fresh
#     processes, the median kept.
run benchmarks.speed.int8_speed --checkpoint hub_cards/union-wp-base --backends openvino openvino-float32 \
    --skip-bfloat16 --num-threads 2 --repeats 3 --output union_wp_base_int8_speed
run benchmarks.speed.int8_speed --checkpoint hub_cards/union-wp-base --corpus wp --stories 100 --batch-size 16 \
    --backends openvino openvino-float32 --skip-bfloat16 --num-threads 2 --repeats 2 --output union_wp_base_int8_speed_wp_batch16
# A2. union roc-base, the int8 target (>= 2x its float32 on ROC), and plot_coherence roc-base.
run benchmarks.speed.int8_speed --checkpoint hub_cards/union-roc-base --backends openvino \
    --skip-bfloat16 --skip-bert-base --num-threads 2 --repeats 3 --output union_roc_base_int8_speed
run benchmarks.speed.int8_speed --metric plot_coherence --checkpoint hub_cards/plot-coherence-roc-base --backends openvino \
    --skip-bfloat16 --skip-bert-base --num-threads 2 --repeats 3 --output plot_coherence_roc_base_int8_speed
# A3. Cold start: the first score from a fresh process (`storyeval score`, 3 stories), beside a fresh
#     `python -c "import torch"` each time: the default in float32, and roc-base in int8 (a cached export).
run benchmarks.speed.cli_cold_start --config wp-base --repeats 5 --output cli_cold_start_wp_base
run benchmarks.speed.cli_cold_start --config roc-base --repeats 5 --output cli_cold_start_roc_base
run benchmarks.speed.cli_cold_start --config roc-base --dtype int8 --repeats 5 --output cli_cold_start_roc_base_int8
fi

if [[ $PARTS == *B* ]]; then
# B1. torch.compile against the plain float32 path, on ROC and at WP length (MPNet already runs torch's fused SDPA
#     attention, issue 42).
run benchmarks.speed.scoring_speed --checkpoint hub_cards/union-wp-base --torch-compile --skip-bert-base \
    --repeats 2 --output speed/union_wp_base_speed_compile
run benchmarks.speed.scoring_speed --checkpoint hub_cards/union-wp-base --corpus wp --stories 100 --torch-compile \
    --skip-bert-base --repeats 2 --output speed/union_wp_base_speed_compile_wp
# B2. Batches at WP length: windows are sorted by length already (storyeval.scoring.windows.padded_batches); whether a
#     smaller or larger batch pays where windows are long.
for batch in 8 16 64; do
    run benchmarks.speed.scoring_speed --checkpoint hub_cards/union-wp-base --corpus wp --stories 100 --batch-size "$batch" \
        --skip-bert-base --repeats 2 --output "speed/union_wp_base_speed_wp_batch$batch"
done
# B3. Fewer windows at WP length for plot_coherence roc-base (128-token windows, 64 apart): its own stride against
#     longer ones, timed in one process.
run benchmarks.speed.window_stride --metric plot_coherence --checkpoint hub_cards/plot-coherence-roc-base --corpus wp-held-out \
    --stories 300 --strides 96 126 --time --output speed/plot_coherence_roc_base_window_stride_speed
# B4. Batches capped by padded tokens (storyeval.scoring.windows.CPU_BATCH_TOKENS), timed in one process, settings
#     alternating: at WP length in float32 and int8, and on ROC.
run benchmarks.speed.batch_tokens --checkpoint hub_cards/union-wp-base --corpus wp --stories 60 --rounds 3 \
    --settings 32:none 16:none 8:none 4:none 16:2048 16:4096 32:4096 16:8192 --output speed/union_wp_base_batch_tokens_wp
run benchmarks.speed.batch_tokens --checkpoint hub_cards/union-wp-base --corpus roc --stories 500 --rounds 3 \
    --settings 32:none 16:none 16:4096 32:4096 --output speed/union_wp_base_batch_tokens_roc
run benchmarks.speed.batch_tokens --checkpoint hub_cards/union-wp-base --corpus wp --stories 60 --rounds 3 --dtype int8 \
    --settings 32:none 16:none 16:2048 16:4096 --output speed/union_wp_base_batch_tokens_wp_int8
fi
