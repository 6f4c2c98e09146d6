"""Run Tickwork's Argo CD health check the way Argo CD does: in gopher-lua.

Argo CD hands a resource health script the object as the global ``obj`` (JSON
objects as tables, arrays as 1-based tables, null as nil) and reads ``status``
and ``message`` from the table it returns. Here the object becomes a Lua table
literal, the script the body of a function, and ``glua`` (gopher-lua's own
interpreter, built from the Go module proxy) runs both.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tickwork_dev.devcluster import build

ROOT = Path(__file__).resolve().parents[2]
HEALTH_SCRIPT = ROOT / "manifests" / "argocd" / "scheduledjob-health.lua"
#: What Argo CD accepts as a health status.
STATUSES = frozenset({"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"})


def lua_literal(value: Any) -> str:
    """``value`` (parsed JSON) as a Lua expression, the shape Argo CD gives ``obj``."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON escapes are valid Lua string escapes for this text
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(item) for item in value) + "}"
    if isinstance(value, dict):
        fields = (f"[{json.dumps(str(k))}] = {lua_literal(v)}" for k, v in value.items())
        return "{" + ", ".join(fields) + "}"
    raise TypeError(f"not JSON: {value!r}")


def health(obj: dict[str, Any], script: Path = HEALTH_SCRIPT) -> tuple[str, str]:
    """(status, message) the health ``script`` gives ``obj``."""
    glua = build.ensure_built(build.lua_bundle(), log=False) / "glua"
    program = (
        f"obj = {lua_literal(obj)}\n"
        f"local function check()\n{script.read_text()}\nend\n"
        "local hs = check()\n"
        'io.write(hs.status or "", "\\n", hs.message or "")\n'
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as file:
        file.write(program)
        file.flush()
        result = subprocess.run(
            [str(glua), file.name], capture_output=True, text=True, timeout=30, check=False
        )
    if result.returncode != 0 or result.stderr:
        raise RuntimeError(f"the health script failed: {result.stderr or result.stdout}")
    status, _, message = result.stdout.partition("\n")
    if status not in STATUSES:
        raise RuntimeError(f"the health script returned {status!r}, not an Argo CD status")
    return status, message
