"""A pod's program for the tests: prints one JSON line with its env and the files named by its args."""

from __future__ import annotations

import json
import os
import sys

files = {}
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        files[path] = f.read()
print(json.dumps({"env": dict(os.environ), "files": files, "cwd": os.getcwd()}), flush=True)
