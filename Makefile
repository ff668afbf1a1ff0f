# Two entry points for a fresh machine (see README.md):
#   make book   build the book into _build/html
#   make test   unit tests, nbval on every chapter, the book build with warnings as errors,
#               then nbval again on a second floating-point path (ATEN_CPU_CAPABILITY=default,
#               other thread counts) with every exercise answered by its written solution
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: book test clean

book: $(VENV)/installed
	$(BIN)/jupyter-book build --warningiserror --keep-going .
	@echo "The book is at _build/html/index.html"

# Two pytest workers, each taking whole files (a notebook's cells must run in order, in one
# kernel): the waits of one file (timeouts, rendezvous) overlap the work of the other.
PARALLEL := -n 2 --dist loadfile

test: $(VENV)/installed
	$(BIN)/python -m pytest $(PARALLEL)
	rm -rf _build/solved
	$(BIN)/python scripts/solved-notebooks _build/solved
	ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 DPSIM_RANK_THREADS=2 $(BIN)/python -m pytest $(PARALLEL) _build/solved

$(VENV)/installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

clean:
	rm -rf _build $(VENV)
