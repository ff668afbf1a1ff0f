# Two entry points for a fresh machine (see README.md):
#   make book   build the book into _build/html
#   make test   unit tests, nbval on every chapter (each exercise answered by its written
#               solution), the book build with warnings as errors, and nbval again on a
#               second floating-point path (ATEN_CPU_CAPABILITY=default, other thread counts)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: book test clean

book: $(VENV)/installed
	$(BIN)/jupyter-book build --warningiserror --keep-going .
	@echo "The book is at _build/html/index.html"

# Three pytest workers, each taking whole files (a notebook's cells must run in order, in one
# kernel): the waits of one file (timeouts, rendezvous, sleeping loaders) overlap the work of
# the others. On this 2-core machine, from clean clones of the same commit: 588 s of pytest
# with 3 workers against 597 s with 2 (2026-11-25). Four workers: 11 min 49 s against
# 12 min 21 s with three on one commit, but 12 min 33 s against 12 min 23 s on a later one
# (every file slower, and chapter 13's speed orderings failed under the load), so three.
# The longest files go first (conftest.py); --no-loadscope-reorder keeps that order.
PARALLEL := -n 3 --dist loadfile --no-loadscope-reorder

# One pytest run, so that the workers stay busy to the end (each file's waits overlap the
# other's work). It runs the unit tests; the solved copies (scripts/solved-notebooks): they
# differ from chapters/ only in the `answer_N = ...` lines and the check message, and the
# script refuses a chapter whose stored exercise output is not dpsim.check's "No answer
# yet"; and the same copies once more on a second floating-point path. conftest.py starts
# the kernels of _build/float-path/ with the settings in DPSIM_FLOAT_PATH (their ranks
# inherit them): another SIMD path and other thread counts.
#
# The second path repeats only the chapters whose compared outputs come from float
# arithmetic. Chapters 1 (sums of small integers), 7 (sampler indices), 9 (launchers) and
# 10 (failures) print messages, exit codes, indices and sums of small integers, which are
# exact on every float path (tests/test_make.py checks that they print no long decimals).
# Chapters 6 (bucket order, gradient sync) and 8 (checkpoints) print True/False from
# comparing two runs made on the same path with the same operations in the same order
# (bit-identical resume), or with a different order (False): the path does not change that.
# Chapter 13 (profiling) compares only event counts, byte counts, ranks and orderings of
# times that differ several-fold; its timings are in cells whose output nbval ignores.
# Chapter 14 (Accelerate) prints sample indices, batch sizes, hooks and log lines.
NO_FLOATS := 01_ranks_and_world.ipynb 06_when_sync_happens.ipynb 07_data_across_ranks.ipynb \
             08_checkpoints_and_restarts.ipynb 09_from_notebook_to_cluster.ipynb \
             10_hangs_crashes_and_drift.ipynb 13_why_is_my_job_slow.ipynb \
             14_accelerate_lightning_trainer.ipynb
FLOAT_PATH := $(filter-out $(addprefix _build/solved/,$(NO_FLOATS)),\
                $(patsubst chapters/%,_build/solved/%,$(wildcard chapters/*.ipynb)))

test: $(VENV)/installed
	rm -rf _build/solved _build/float-path
	$(BIN)/python scripts/solved-notebooks _build/solved
	mkdir -p _build/float-path && cp $(FLOAT_PATH) _build/float-path/
	DPSIM_FLOAT_PATH="ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 DPSIM_RANK_THREADS=2" \
	  $(BIN)/python -m pytest $(PARALLEL) tests _build/solved _build/float-path

# No bytecode at install (pip would compile every file, on one core): Python compiles each
# module the first time a process imports it and keeps the .pyc, about a third of the
# venv's files. Compiling all of them on both cores took 31 s of the test budget.
$(VENV)/installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -r requirements.txt
	touch $@

# Some machines set PYTHONDONTWRITEBYTECODE=1 (this project's do): every process would then
# compile the modules it imports again: `import torch` takes 5.5 s of CPU instead of 2.5 s.
unexport PYTHONDONTWRITEBYTECODE

clean:
	rm -rf _build $(VENV)
