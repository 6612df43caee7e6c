#!/usr/bin/env bash
# Issue 84's speed figures, all in one sitting: run it from the checkout on a quiet machine (nothing else running; a
# busy one makes every rate wrong), with the project's environment active and NLTK_DATA set. Two threads, as the
# project's CI hosts have two cores. Each command writes benchmarks/results/<name>.json, which records the CPU, the
# commit and the load; compare rates only within this one sitting. About two hours on a two-core host.
#
#     NLTK_DATA=../shared/nltk_data bash benchmarks/speed/run_issue84.sh
#
# The int8 rows export each checkpoint by its measured scheme (storyeval.scoring.int8.runtime.MEASURED_FIDELITY),
# in an untimed run first. Fidelity (agreement) figures are not measured here: they do not depend on the machine's
# load and were measured apart (benchmarks/experiments/speed.md).
set -euo pipefail
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=2 TOKENIZERS_PARALLELISM=false
PYTHON=${PYTHON:-python}
run() { echo "== $*" >&2; "$PYTHON" -m "$@"; }

# 1. The default's tier on ROC (1,000 test stories, batch 32): torch float32 and bfloat16, int8 (its measured scheme),
#    OpenVINO float32 (the runtime without int8) and the BERT-base-sized scorer, each in three fresh processes.
run benchmarks.speed.int8_speed --checkpoint hub_cards/union-roc-base --backends openvino openvino-float32 \
    --num-threads 2 --repeats 3 --output union_roc_base_int8_speed
# 2. The same at WP length (100 WP test stories, about 200 words after their prompts), bfloat16 left out.
run benchmarks.speed.int8_speed --checkpoint hub_cards/union-roc-base --corpus wp --stories 100 --backends openvino openvino-float32 \
    --skip-bfloat16 --num-threads 2 --repeats 3 --output union_roc_base_int8_speed_wp
# 3. union wp-base at WP length (same architecture and window as roc-base; its own int8 scheme), and
#    plot_coherence roc-base on ROC (its own window of 128 tokens).
run benchmarks.speed.int8_speed --checkpoint hub_cards/union-wp-base --corpus wp --stories 100 --backends openvino \
    --skip-bfloat16 --skip-bert-base --num-threads 2 --repeats 3 --output union_wp_base_int8_speed_wp
run benchmarks.speed.int8_speed --metric plot_coherence --checkpoint hub_cards/plot-coherence-roc-base --backends openvino openvino-float32 \
    --skip-bfloat16 --skip-bert-base --num-threads 2 --repeats 3 --output plot_coherence_roc_base_int8_speed
# 4. The int8 schemes against each other in one process, back to back on the same 600 held-out validation stories:
#    which is fastest (the rule picks among those that hold it), static int8 included for its speed alone.
run benchmarks.speed.int8_layers --checkpoint hub_cards/union-roc-base --pairs 300 --num-threads 2 \
    --schemes float32 weights_int8 static_int8 --calibration wp_extra_breaks \
    --float-groups ffn_out4+ffn_out5 ffn_out3+ffn_out4+ffn_out5+ffn_out6 ffn_out --output union_roc_base_int8_schemes_speed
# 5. torch.compile against the plain float32 path (MPNet already runs torch's fused SDPA attention, issue 42).
run benchmarks.speed.scoring_speed --checkpoint hub_cards/union-roc-base --torch-compile --skip-bert-base \
    --output union_roc_base_speed_compile
run benchmarks.speed.scoring_speed --checkpoint hub_cards/union-roc-base --corpus wp --stories 100 --torch-compile \
    --skip-bert-base --output union_roc_base_speed_compile_wp
# 6. Batches at WP length: windows are sorted by length already (storyeval.scoring.windows.padded_batches);
#    whether a smaller or larger batch pays where windows are long.
for batch in 8 16 32; do
    run benchmarks.speed.scoring_speed --checkpoint hub_cards/union-roc-base --corpus wp --stories 100 --batch-size "$batch" \
        --skip-bert-base --output "union_roc_base_speed_wp_batch$batch"
done
# 7. Cold start: the first score of the default's tier from a fresh process, float32 and int8 (a cached export),
#    each beside a fresh `python -c "import torch"` in the same sitting.
run benchmarks.speed.cli_cold_start --config roc-base --output cli_cold_start_roc_base
run benchmarks.speed.cli_cold_start --config roc-base --dtype int8 --output cli_cold_start_roc_base_int8
# 8. Fewer windows at WP length for plot_coherence roc-base (128-token windows, 64 apart): its own stride against
#    longer ones, timed in one process (their fidelity was measured apart, untimed).
run benchmarks.speed.window_stride --metric plot_coherence --checkpoint hub_cards/plot-coherence-roc-base --corpus wp-held-out \
    --stories 300 --strides 96 126 --time --output plot_coherence_roc_base_window_stride_speed
