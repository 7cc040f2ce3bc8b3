#!/usr/bin/env bash
# Throughput on a CUDA GPU, constrained against unconstrained, at batch 1 and 8: the numbers in
# BENCHMARKS.md ("CUDA"). Runs on the GPU machine, from the repository root, with
#   BIN    a `strictly` built with `--features cuda` (see ../shared/cuda/prepare.sh),
#   MODEL  a model directory or GGUF file; with MODEL=llama-3-8b, random bf16 weights of
#          Llama-3-8B's shape are written first (scripts/random_llama.py, PyTorch) with
#          TOKENIZER (the real Llama 3.2 tokenizer.json),
#   OUT    where the logs go,
#   DEVICE cuda (the default; cpu tries the script out on a small model).
# The CUDA 13 libraries come from the machine's Python packages (nvidia-cublas & co.).
set -euo pipefail
: "${BIN:?}" "${MODEL:?}" "${OUT:=/tmp}" "${DEVICE:=cuda}"
N=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$N:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if [ "$MODEL" = llama-3-8b ]; then
  MODEL=/tmp/llama-3-8b-random
  [ -f "$MODEL/model.safetensors" ] || python3 scripts/random_llama.py "$MODEL" --preset llama-3-8b --tokenizer "${TOKENIZER:?}"
fi
cat > /tmp/story.json <<'J'
{"type":"object","properties":{"title":{"type":"string","maxLength":40},"story":{"type":"string","minLength":50,"maxLength":400}},"required":["title","story"],"additionalProperties":false}
J
# Batch 1, one process per run (load excluded: --verbose reports prefill, decode and masks apart).
for round in $(seq "${ROUNDS1:-1}"); do
  for mode in free regex schema; do
    case $mode in free) c=();; regex) c=(--regex '[a-z ]{64,}');; schema) c=(--schema /tmp/story.json);; esac
    "$BIN" generate --model "$MODEL" --device "$DEVICE" --prompt "Once upon a time" --max-tokens 128 --verbose "${c[@]}" \
      2>&1 >/dev/null | grep -E 'tokens/s|mask' | sed "s/^/b1 $mode round $round: /" || true
  done
done 2>&1 | tee "$OUT/batch1.log"
# Batch 1 and 8 through the server (continuous batching), each mode in turn, three rounds.
echo "server start: $(date +%T)"
"$BIN" serve --model "$MODEL" --device "$DEVICE" --port 8099 --max-concurrent 16 --max-batch 16 >"$OUT/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 600); do curl -sf localhost:8099/health >/dev/null && break; sleep 1; done
echo "server ready: $(date +%T)"
for round in 1 2 3; do
  for mode in none regex schema; do
    python3 scripts/bench_batch.py --url http://127.0.0.1:8099 --clients 1,8 --requests 2 --max-tokens 128 --constraint $mode
  done
done 2>&1 | tee "$OUT/batch.log"
curl -s localhost:8099/metrics | grep -E 'strictly_(mask|batch|forward)' | head -40 >"$OUT/metrics.txt" || true
kill $SERVER
