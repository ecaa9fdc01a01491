#!/usr/bin/env python3
"""Write docs/integrity.md's table of attacks x layers from the hostile tests' results.

tests/ingestion/confine/test_confinement.py writes one JSON per configuration (Landlock ABI cap,
namespaces lent or not, root or an unprivileged user; ``main-*.json``: the same attacks
against main's code, before issue 29). This script only formats them: the table between
the ``<!-- layers-table -->`` markers is replaced, nothing in it is written by hand.

    python scripts/integrity_table.py [RESULTS_DIR] [DOC]
"""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- layers-table:start -->", "<!-- layers-table:end -->"
ROWS = [("caps", "capabilities (CapEff/CapBnd)"), ("sethostname", "sethostname"),
        ("adjtimex", "adjtimex(ADJ_TICK)"), ("reboot", "reboot, wrong magic"),
        ("mknod", "mknod char device"), ("read_reference", "read reference_data"),
        ("write_output", "write the output folder"), ("kill0_ingestion", "kill(ingestion, 0)"),
        ("environ_ingestion", "/proc/<ingestion>/environ"),
        ("sched_setaffinity", "sched_setaffinity(ingestion threads)"),
        ("setpriority", "setpriority(ingestion threads)"), ("setown", "F_SETOWN(ingestion)"),
        ("setown_sigkill", "F_SETOWN+F_SETSIG(SIGKILL)+O_ASYNC"),
        ("tcp", "TCP connect 127.0.0.1"), ("udp", "UDP to 127.0.0.1"),
        ("unix", "pathname Unix socket"), ("processes", "processes seen")]


def cell(name: str, data: dict) -> str:
    value = data["attacks"].get(name)
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
    if name == "setown" and value == "set":
        return "owner set"
    return value.replace("refused ", "") if value.startswith("refused ") else value.upper()


def column(data: dict) -> str:
    ns = {True: "ns", False: "no ns"}.get(data["namespaces"], f"{data['namespaces']} ns only")
    if data["code"] == "main":
        ns = ""
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
    for name, label in ROWS:
        row = [label]
        for d in base:
            if name == "setown_sigkill":
                other = lethal.get((d["code"], d["tag"]))
                row.append(cell(name, other) if other else "(not run)")
            else:
                row.append(cell(name, d))
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
    doc.write_text(before + START + "\n\nBefore (main, the code before issue 29):\n\n"
                   + table(results, "main") + "\n\nAfter (this code):\n\n"
                   + table(results, "branch") + "\n\n" + END + after)
    print(f"{doc}: table of {len(list(results.glob('*.json')))} runs written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
