#!/usr/bin/env python3
"""The floor under a separating-instance duel's time: each real-style pair's two queries run by
plain SQLite (Python's sqlite3 module, no nl2sql), CPU seconds for both, on one database file.

No construction of an instance can make a duel cheaper than running its two candidates, which the
issue-38 target ("p95 <= 0.5 s at x300 including both candidates' executions") counts in.

  scripts/bench/separating_exec_floor.py DB_FILE [DB_ID=superhero] [PAIRS=scripts/bench/fixtures/separating_pairs.jsonl]

Prints one line per pair of that database (id, class, CPU for both queries), then the p50/p95/max
and how many pairs exceed 0.5 s before any search.
"""
import json
import os
import sqlite3
import sys
import time


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    db = sys.argv[1]
    db_id = sys.argv[2] if len(sys.argv) > 2 else "superhero"
    here = os.path.dirname(os.path.abspath(__file__))
    pairs_file = sys.argv[3] if len(sys.argv) > 3 else os.path.join(here, "fixtures", "separating_pairs.jsonl")
    pairs = [json.loads(line) for line in open(pairs_file) if line.strip()]
    pairs = [p for p in pairs if p["db"] == db_id]
    if not pairs:
        sys.exit(f"no pair of database {db_id} in {pairs_file}")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    costs = []
    for p in pairs:
        cpu = 0.0
        for sql in (p["a"], p["b"]):
            t0 = time.process_time()
            try:
                conn.execute(sql).fetchall()
            except sqlite3.Error as e:
                print(f"{p['id']}: {e}", file=sys.stderr)
            cpu += time.process_time() - t0
        costs.append(cpu)
        print(f"{p['id']} {p['class']:<16} {cpu:6.3f} s CPU for both queries")
    s = sorted(costs)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]
    over = sum(1 for c in costs if c > 0.5)
    print(f"{len(s)} pairs: p50 {pick(0.5):.3f} s, p95 {pick(0.95):.3f} s, max {s[-1]:.3f} s; "
          f"{over} pairs over 0.5 s before any search")


if __name__ == "__main__":
    main()
