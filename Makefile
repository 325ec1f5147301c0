# Two commands do everything on a fresh machine (they install what is missing first):
#   make eval [SUB=submission/<file>.py]   test + benchmark report (default: best submission that runs here)
#   make test                               the test suite (GPU tests skip without CUDA)
PY ?= python3
SUB ?=
ARGS ?=
A ?= submission/torch_ref.py
B ?=

.PHONY: setup test eval rank leaderboard compare sol check-cuda

setup:
	@$(PY) -m eval.deps

test: setup
	$(PY) -m pytest -q tests $(ARGS)

eval: setup
	$(PY) -m eval run $(SUB) $(ARGS)

rank: setup
	$(PY) -m eval rank $(ARGS)

leaderboard:
	@echo "make leaderboard is now make rank (local standings); the leaderboard's own mode is python -m eval leaderboard SUB" >&2; exit 2

compare: setup
	@test -n "$(B)" || { echo "usage: make compare A=submission/x.py B=submission/y.py" >&2; exit 2; }
	$(PY) -m eval compare $(A) $(B) $(ARGS)

sol: setup
	$(PY) -m eval sol $(ARGS)

# compile-check every CUDA kernel for Hopper and Blackwell (needs nvcc, no GPU)
check-cuda: setup
	$(PY) -m pytest -q tests/test_cuda_compile.py $(ARGS)
