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

test: $(VENV)/installed
	$(BIN)/python -m pytest
	rm -rf _build/solved
	$(BIN)/python scripts/solved-notebooks _build/solved
	ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 DPSIM_RANK_THREADS=2 $(BIN)/python -m pytest _build/solved

$(VENV)/installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

clean:
	rm -rf _build $(VENV)
