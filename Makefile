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

# two test processes where pytest-xdist is installed (setup installs it where it can): the suite mostly
# waits on the processes it starts, so two fit a 2-core machine; a module's tests stay in one process
test: setup
	$(PY) -m pytest -q tests $$($(PY) -c "import xdist" 2>/dev/null && echo "-n 2 --dist loadfile") $(ARGS)

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
