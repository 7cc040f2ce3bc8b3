#!/usr/bin/env bash
# What needs the GPU machine (BENCHMARKS.md, "CUDA"): a batch's masks across its 16 cores, the
# embedded model on the GPU against the CPU's text, and throughput on a CUDA GPU, constrained
# against unconstrained, at batch 1 and through the server. Runs on the GPU machine, from the
# repository root, with
#   BIN          a `strictly` built with `--features cuda` (see ../shared/cuda/prepare.sh),
#   MODEL        a model directory or GGUF file; with MODEL=llama-3-8b, random bf16 weights of
#                Llama-3-8B's shape are written first (scripts/random_llama.py, PyTorch) with
#                TOKENIZER (the real Llama 3.2 tokenizer.json); empty: no model steps,
#   BATCH_MASKS  (optional) the benches/batch_masks binary, with STRICTLY_SHARED_DATA holding
#                its cases (tokenizers/llama-3.2, jsonschemabench),
#   PASS_BENCH   (optional) the benches/batch binary: one batched pass against its batch size on
#                MODEL, one-token rows attended together and row by row, and one at a time,
#   BASE_BIN     (optional) a baseline `strictly` whose server runs after BIN's, the same way
#                (CLIENTS_BASE, default "1,16", mode none), for a same-run comparison,
#   EXPECT       (optional) a folder with embedded_greedy.txt and embedded_person.txt, the CPU's
#                output of the commands in step 2, and person.json,
#   OUT          where the logs go,
#   DEVICE       cuda (the default; cpu tries the script out on a small model),
#   ROUNDS       server rounds (default 3),
#   STEPS        which steps run (default "masks embedded pass b1 server"),
#   CLIENTS      the server's concurrent clients (default 1,8).
# The CUDA 13 libraries come from the machine's Python packages (nvidia-cublas & co.). A step
# that fails is reported and the next one runs.
set -uo pipefail
: "${BIN:?}" "${MODEL:=}" "${OUT:=/tmp}" "${DEVICE:=cuda}" "${ROUNDS:=3}"
N=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$N:${LD_LIBRARY_PATH:-}"
step() { echo "== $* ($(date +%T))"; }
has() { [[ " ${STEPS:-masks embedded pass b1 server} " == *" $1 "* ]]; }
step machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "cores: $(nproc)"
# 1. A batch's masks across every core.
if [ -n "${BATCH_MASKS:-}" ] && has masks; then
  step batch masks
  timeout 240 "$BATCH_MASKS" 1 2 4 8 16 2>&1 | tee "$OUT/batch_masks.log"
fi
# 2. The embedded model on the device: the same greedy text as the CPU's, and a schema.
if [ -n "${EXPECT:-}" ] && has embedded; then
  step embedded model on $DEVICE
  "$BIN" generate --device "$DEVICE" --dtype f32 --prompt "" --greedy --max-tokens 256 >"$OUT/embedded_greedy.txt" 2>"$OUT/embedded.err"
  cmp "$OUT/embedded_greedy.txt" "$EXPECT/embedded_greedy.txt" && echo "embedded greedy f32: the CPU's text"
  "$BIN" generate --device "$DEVICE" --dtype f32 --prompt "Once upon a time" --greedy --max-tokens 128 \
    --schema "$EXPECT/person.json" --verbose >"$OUT/embedded_person.txt" 2>>"$OUT/embedded.err"
  cmp "$OUT/embedded_person.txt" "$EXPECT/embedded_person.txt" && echo "embedded person schema f32: the CPU's text"
  "$BIN" generate --device "$DEVICE" --prompt "Once upon a time" --greedy --max-tokens 64 --schema "$EXPECT/person.json" \
    2>>"$OUT/embedded.err" | tee "$OUT/embedded_person_bf16.txt"; echo
  tail -n 20 "$OUT/embedded.err"
fi
[ -n "$MODEL" ] || exit 0
if [ "$MODEL" = llama-3-8b ]; then
  step random weights
  MODEL=/tmp/llama-3-8b-random
  [ -f "$MODEL/model.safetensors" ] || python3 scripts/random_llama.py "$MODEL" --preset llama-3-8b --tokenizer "${TOKENIZER:?}"
fi
if [ -n "${PASS_BENCH:-}" ] && has pass; then
  step one batched pass against its batch size
  timeout 300 "$PASS_BENCH" "$MODEL" --device "$DEVICE" --max-batch 32 2>&1 | tee "$OUT/pass.log"
fi
has b1 && step batch 1
cat > /tmp/story.json <<'J'
{"type":"object","properties":{"title":{"type":"string","maxLength":40},"story":{"type":"string","minLength":50,"maxLength":400}},"required":["title","story"],"additionalProperties":false}
J
# Batch 1, one process per run (load excluded: --verbose reports prefill, decode and masks apart).
for round in $(seq "${ROUNDS1:-1}"); do
  has b1 || break
  for mode in free regex schema person; do
    case $mode in free) c=();; regex) c=(--regex '[a-z ]{64,}');; schema) c=(--schema /tmp/story.json);;
      person) [ -n "${EXPECT:-}" ] || continue; c=(--schema "$EXPECT/person.json");; esac
    "$BIN" generate --model "$MODEL" --device "$DEVICE" --prompt "Once upon a time" --max-tokens 128 --verbose "${c[@]}" \
      2>&1 >/dev/null | grep -E 'tokens/s|mask|loaded|rror' | sed "s/^/b1 $mode round $round: /" || true
  done
done 2>&1 | tee "$OUT/batch1.log"
# Batch 1 and 8 through the server (continuous batching), each mode in turn, three rounds; the
# first two requests alone first (the first after start pays what the warm-up did not).
has server || exit 0
serve() { # BIN LABEL CLIENTS MODES
  step "server $2"
  "$1" serve --model "$MODEL" --device "$DEVICE" --port 8099 --max-concurrent 16 --max-batch 16 >"$OUT/serve-$2.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 600); do curl -sf localhost:8099/health >/dev/null && break; sleep 1; done
  echo "server $2 ready: $(date +%T)"
  for first in 1 2; do
    python3 scripts/bench_batch.py --url http://127.0.0.1:8099 --clients 1 --requests 1 --max-tokens 128 --constraint none |
      sed "s/^/$2 request $first alone: /"
  done
  for round in $(seq "$ROUNDS"); do
    for mode in $4; do
      python3 scripts/bench_batch.py --url http://127.0.0.1:8099 --clients "$3" --requests 2 --max-tokens 128 --constraint $mode |
        sed "s/^/$2: /"
    done
  done 2>&1 | tee -a "$OUT/batch.log"
  curl -s localhost:8099/metrics | grep -E 'strictly_(mask|batch|forward)' | head -40 >"$OUT/metrics-$2.txt" || true
  kill $SERVER; wait $SERVER 2>/dev/null
  grep -E 'WARN|ERROR|failed|panick' "$OUT/serve-$2.log" | sort | uniq -c | sort -rn | head -20
}
serve "$BIN" new "${CLIENTS:-1,8}" "${MODES:-none regex schema}"
[ -n "${BASE_BIN:-}" ] && serve "$BASE_BIN" base "${CLIENTS_BASE:-1,16}" none
exit 0
