"""Imports inside functions only where they save a real import cost (issue 45): moved to the top of its module,
each would load a library the module does not load otherwise (TensorFlow, OpenCV, NumPy, PIL, YAML, pydantic,
Beam, Dask, ...: what `augd --help`, a spawned worker's start and the op registry stay free of), or a package's
worth of augd's own modules (HEAVY_COUNT or more), or its line says why. Anything else belongs at the top.

Measured, not listed: for each module, one process imports it, then forks once per function-level import and
runs that import alone in the child, reporting what it loaded beyond the module's own imports."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: libraries whose import is a real cost (tens of ms to seconds), by their top-level name
HEAVY = {"tensorflow", "keras", "cv2", "numpy", "PIL", "yaml", "pydantic", "apache_beam", "distributed", "dask",
         "prometheus_client", "watchdog", "tqdm", "jsonschema", "google_crc32c", "multiprocessing", "skimage"}
HEAVY_COUNT = 5

_CHILD = r"""
import importlib, json, os, sys
module, sites = sys.argv[1], json.loads(sys.argv[2])
importlib.import_module(module)
base = set(sys.modules)
out = {}
for key, statement in sites:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            exec(statement, {})
            new = sorted(set(sys.modules) - base)
        except BaseException as exc:
            new = ["<" + type(exc).__name__ + ": " + str(exc) + ">"]
        os.write(w, json.dumps(new).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out[key] = json.loads(data)
print(json.dumps(out))
"""


def function_imports() -> dict[str, list[tuple[str, str, bool]]]:
    """module -> [(file:line, the import statement, whether its lines carry a comment)] of imports in functions."""
    found: dict[str, list] = {}
    for path in sorted((REPO / "augd").rglob("*.py")):
        rel = path.relative_to(REPO)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)) and not getattr(sub, "level", 0):
                    seg = lines[sub.lineno - 1:sub.end_lineno]
                    found.setdefault(module, []).append(
                        (f"{rel}:{sub.lineno}", ast.unparse(sub), any("#" in s for s in seg)))
    return {m: sorted(set(s)) for m, s in found.items()}


def test_every_import_inside_a_function_saves_a_real_import_cost():
    sites = function_imports()
    assert sum(map(len, sites.values())) > 50   # the walk found them (augd defers TensorFlow, OpenCV, ...)
    idle = []

    def measure(module: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", _CHILD, module, json.dumps([(w, s) for w, s, _ in sites[module]])],
                              capture_output=True, text=True, cwd=REPO, timeout=300,
                              env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})

    with ThreadPoolExecutor(2) as pool:
        runs = dict(zip(sites, pool.map(measure, sites)))
    for module, rows in sites.items():
        p = runs[module]
        assert p.returncode == 0, (module, p.stderr[-2000:])
        loaded = json.loads(p.stdout.strip().splitlines()[-1])
        for where, statement, commented in rows:
            new = loaded[where]
            assert not (new and new[0].startswith("<")), f"{where}: {statement} fails on its own: {new[0]}"
            heavy = {m.split(".")[0] for m in new} & HEAVY
            if not heavy and len(new) < HEAVY_COUNT and not commented:
                idle.append(f"{where}: {statement} (loads {len(new)} module(s) the module does not: {new})")
    assert not idle, "imports inside functions that save nothing; move them to the top:\n" + "\n".join(idle)
