"""Runs every cases_*.py next to this file: `make bench-torch [FILTER=text]`.

Each cases module defines run(table, torch, kiln) and adds rows with table.compare.
"""
import importlib.util
import pathlib
import sys

import kiln
import torch

from harness import THREADS, Table


def main():
    wanted = sys.argv[1] if len(sys.argv) > 1 else ""
    torch.set_num_threads(THREADS)
    kiln.set_num_threads(THREADS)
    table = Table()
    here = pathlib.Path(__file__).parent
    for path in sorted(here.glob("cases_*.py")):
        if wanted not in path.stem:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.run(table, torch, kiln)
    print(f"{table.missed} target(s) missed")


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    main()
