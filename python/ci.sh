#!/usr/bin/env bash
# The Python package's CI tier (issue 27), called by .ci/run; runs from the repository root.
#
# The binding crate (python/) is a workspace of its own, so the root's cargo commands never
# build PyO3; fmt and clippy run on it here. The wheel is built with maturin (release, abi3) in a
# virtual environment under target/, installed, and tested with pytest. torch and transformers
# come from PyPI for the adapters' tests: PyPI's Linux torch brings its CUDA libraries (about
# 4 GB, loaded but never used on a CPU); PyTorch's own CPU-only wheel index is not reachable
# here. SGLang and vLLM install without their dependencies (only their grammar/structured-output
# base modules are used).
# Tests that need ../shared/data or the SmolLM2 GGUF FAIL without them
# (STRICTLY_REQUIRE_DATA=1). llama-cpp-python has no prebuilt wheel on PyPI (building it takes
# about 7 minutes of two cores), so its adapter is tested here against its documented
# logits-processor contract; the tests against a real llama.cpp run where it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
export STRICTLY_REQUIRE_DATA="${STRICTLY_REQUIRE_DATA:-1}"
start=$SECONDS

echo "=== python: cargo fmt and clippy on the binding crate"
(cd python && cargo fmt --check && cargo clippy --all-targets -- -D warnings)

VENV=target/pyvenv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
echo "=== python: installing maturin, pytest, numpy, torch, transformers (from PyPI)"
"$VENV/bin/pip" install --quiet "maturin>=1.9.4,<2" pytest numpy torch==2.15.0 transformers==5.23.0
# SGLang without its GPU stack: its grammar-backend module imports on a CPU with these small
# packages, so the SGLang adapter is registered and run through SGLang's own classes.
"$VENV/bin/pip" install --quiet --no-deps sglang==0.5.23 orjson psutil pybase64 requests urllib3 certifi \
  pillow starlette msgspec pyzmq ipython traitlets aiohttp multidict attrs yarl propcache aiohappyeyeballs \
  aiosignal frozenlist openai sniffio partial_json_parser charset_normalizer
export STRICTLY_REQUIRE_SGLANG=1
# vLLM the same way (its wheel, 340 MB, without its GPU stack): its structured-output base
# classes import on a CPU, so the vLLM adapter subclasses vLLM's own abstract classes.
"$VENV/bin/pip" install --quiet --no-deps vllm==0.33.0 cbor2 openai_harmony fastapi opentelemetry-api \
  opentelemetry-sdk opentelemetry-semantic-conventions cachetools prometheus_client cloudpickle uvloop py-cpuinfo \
  xgrammar apache-tvm-ffi llguidance
export STRICTLY_REQUIRE_VLLM=1
echo "    ($((SECONDS - start)) s so far)"

echo "=== python: maturin build --release"
rm -rf python/target/wheels
"$VENV/bin/maturin" build --release --manifest-path python/Cargo.toml -o python/target/wheels
"$VENV/bin/pip" install --quiet --force-reinstall --no-deps python/target/wheels/strictly-*.whl
echo "    ($((SECONDS - start)) s so far)"

echo "=== python: pytest"
"$VENV/bin/pytest" -q -rs python/tests
echo "=== python tier: $((SECONDS - start)) s"
