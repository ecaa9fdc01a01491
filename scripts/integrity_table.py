#!/usr/bin/env python3
"""Write docs/integrity.md's table of attacks x layers from the hostile tests' results.

tests/ingestion/confine/test_confinement.py writes one JSON per configuration (Landlock ABI cap,
namespaces lent or not, root or an unprivileged user; ``main-*.json``: the same attacks
against main's code, before issue 29; ``before-user-*.json``: against the code before the
user of its own at install and without a mount namespace). This script only formats them: the table between
the ``<!-- layers-table -->`` markers is replaced, nothing in it is written by hand.

    python scripts/integrity_table.py [RESULTS_DIR] [DOC]
"""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- layers-table:start -->", "<!-- layers-table:end -->"
ROWS = [("ids", "uid / gid seen"), ("caps", "capabilities (CapEff/CapBnd)"),
        ("sethostname", "sethostname"),
        ("adjtimex", "adjtimex(ADJ_TICK)"), ("reboot", "reboot, wrong magic"),
        ("mknod", "mknod char device"), ("read_reference", "read reference_data"),
        ("write_output", "write the output folder"), ("kill0_ingestion", "kill(ingestion, 0)"),
        ("environ_ingestion", "/proc/<ingestion>/environ"),
        ("sched_setaffinity", "sched_setaffinity(ingestion threads)"),
        ("setpriority", "setpriority(ingestion threads)"), ("setown", "F_SETOWN(ingestion)"),
        ("setown_sigkill", "F_SETOWN+F_SETSIG(SIGKILL)+O_ASYNC"),
        ("tcp", "TCP connect 127.0.0.1"), ("udp", "UDP to 127.0.0.1"),
        ("unix", "pathname Unix socket (0777)"),
        ("unix_root", "root's 0600 Unix socket in /tmp"), ("write_uv_cache", "write uv's cache"),
        ("write_env_cache", "write the environments' cache"), ("processes", "processes seen")]
# setup.py runs the same attacks at install (tests/ingestion/confine/test_confinement.py): these rows
INSTALL_ROWS = [("ids", "setup.py: uid / gid seen"), ("caps", "setup.py: CapEff/CapBnd"),
                ("read_reference", "setup.py: read reference_data"),
                ("write_output", "setup.py: write the output folder"),
                ("kill0_ingestion", "setup.py: kill(ingestion, 0)"),
                ("unix_root", "setup.py: root's 0600 Unix socket"),
                ("write_uv_cache", "setup.py: write uv's cache"),
                ("write_env_cache", "setup.py: write the environments' cache")]
# the tables: (code, title); "main": before issue 29; "before-user": before the user of its
# own at install and without a mount namespace (CW_CONFINE_LABEL=before-user)
TABLES = [("main", "Before (main, the code before issue 29)"),
          ("before-user", "Before the user of its own at install and without a mount namespace "
                          "(the code of 317e1dc; root, the new rows and configurations)"),
          ("branch", "After (this code)")]


def cell(name: str, data: dict, install: bool = False) -> str:
    value = data["attacks"].get(name)
    if install:
        value = (data["attacks"].get("install") or {}).get(name)
        data = {**data, "received": {}}  # counts at the listeners are install and run's
    if name == "ids" and isinstance(value, list):
        if data["code"] == "branch" and 64290 <= value[0] <= 65289:  # leased for the run
            return f"leased uid / {value[1]}" + (f" +{len(value[2])} groups" if value[2] else "")
        return f"{value[0]} / {value[1]}" + (f" +{len(value[2])} groups" if value[2] else "")
    if name == "caps" and isinstance(value, dict):
        return f"{value['CapEff'].lstrip('0') or '0'} / {value['CapBnd'].lstrip('0') or '0'}"
    if name == "processes" and isinstance(value, dict):
        return f"{value['count']}" + (" (the test's too)" if value["sees_test"] else "")
    if name == "setown_sigkill" and data["exit"] < 0:
        return f"INGESTION KILLED ({data['exit']})"
    if name == "setown_sigkill" and value == "done" and data["exit"] == 0:
        return "sent, not delivered (ingestion ran on)"
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"READ ({value} B)"
    recv = data.get("received", {})
    if name in recv and recv[name]:
        return "RECEIVED"
    if value == "connected":
        return "CONNECTED"
    if name == "setown" and value == "set":
        return "owner set"
    return value.replace("refused ", "") if value.startswith("refused ") else value.upper()


def column(data: dict) -> str:
    ns = {True: "ns", False: "no ns"}.get(data["namespaces"], f"{data['namespaces']} ns only")
    if data["code"] == "main":
        ns = ""
    elif data["tag"].endswith("-sys"):  # the system's Python: another user may reach it
        ns += ", Python in /usr"
    elif data["namespaces"] is False and data["user"] == "root":
        ns += ", Python in /root"
    return f"{data['code']}: {data['user']}, ABI {data['abi']}" + (f", {ns}" if ns else "")


def table(results: Path, code: str) -> str:
    runs = [json.loads(p.read_text()) for p in sorted(results.glob("*.json"))]
    runs = [d for d in runs if d["code"] == code]
    if code == "main":  # main knows no namespace: its "mount"/"no ns" runs repeat "ns"
        runs = [d for d in runs if d["namespaces"] is True or d["tag"].startswith("user-")
                and d["namespaces"] is False]
    runs.sort(key=lambda d: (d["code"] != "main", d["user"], str(d["namespaces"]), d["abi"],
                             d["tag"]))
    # the lethal runs differ only in the F_SETOWN+SIGKILL row: folded into their base column
    base = [d for d in runs if not d["tag"].endswith(("-setown", "-refused", "-unsafe"))]
    lethal = {(d["code"], d["tag"][:-len("-setown")]): d for d in runs
              if d["tag"].endswith("-setown")}
    head = ["attack"] + [column(d).split(": ", 1)[1] for d in base]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (name, label), install in [(r, False) for r in ROWS] + [(r, True) for r in INSTALL_ROWS]:
        row = [label]
        for d in base:
            if name == "setown_sigkill":
                other = lethal.get((d["code"], d["tag"]))
                row.append(cell(name, other) if other else "(not run)")
            else:
                row.append(cell(name, d, install))
        if any(c not in ("-", "(not run)") for c in row[1:]):  # no run of this code measured it
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv) -> int:
    results = Path(argv[1]) if len(argv) > 1 else REPO / "tests/ingestion/confine/confinement_results"
    doc = Path(argv[2]) if len(argv) > 2 else REPO / "docs/integrity.md"
    text = doc.read_text()
    if START not in text or END not in text:
        print(f"{doc}: no {START} ... {END} markers; add them where the table goes",
              file=sys.stderr)
        return 2
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    body = "".join(f"\n\n{title}:\n\n{table(results, code)}" for code, title in TABLES)
    doc.write_text(before + START + body + "\n\n" + END + after)
    print(f"{doc}: table of {len(list(results.glob('*.json')))} runs written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
