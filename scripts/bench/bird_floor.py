#!/usr/bin/env python3
"""A FLOOR for `nl2sql eval` on BIRD: the official rule with nothing else around it.

Not the official script and not part of nl2sql: a minimal stand-in written for the benchmark
(scripts/bench/eval_scale.sh). Like the official BIRD evaluation it runs, per question, the
prediction and then gold on one sqlite3 connection, scores set(pred_rows) == set(gold_rows),
scores any exception or a timeout 0, and spreads the questions over worker processes (2 by
default). It does nothing nl2sql does besides (no outcome codes, no tie check, no report):
the time any evaluator needs at least to execute both queries of every question in Python.

  bird_floor.py DEV_JSON DB_ROOT PREDICTIONS_JSON OUT_JSON [--procs 2] [--timeout 30]

PREDICTIONS_JSON is predict_dev.json-shaped ({"0": "SQL\\t----- bird -----\\tdb_id", ...}).
Questions whose database is not under DB_ROOT are left out. OUT_JSON receives
{"question_id": 0 or 1, ...}; the accuracy is printed.
"""
import argparse
import json
import multiprocessing as mp
import os
import sqlite3
import sys
import time

SEP = "\t----- bird -----\t"


def judge(job):
    qid, db_path, pred, gold, timeout = job
    deadline = time.monotonic() + timeout
    try:
        conn = sqlite3.connect(db_path)
        # Ends a query at the deadline (the official script uses func_timeout per pair).
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10000)
        cur = conn.cursor()
        cur.execute(pred)
        pred_rows = cur.fetchall()
        cur.execute(gold)
        gold_rows = cur.fetchall()
        conn.close()
        return qid, int(set(pred_rows) == set(gold_rows))
    except Exception:
        return qid, 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dev_json")
    ap.add_argument("db_root")
    ap.add_argument("predictions")
    ap.add_argument("out")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30.0)
    a = ap.parse_args()
    questions = json.load(open(a.dev_json))
    preds = json.load(open(a.predictions))
    jobs = []
    for i, q in enumerate(questions):
        db_path = os.path.join(a.db_root, q["db_id"], q["db_id"] + ".sqlite")
        if not os.path.exists(db_path):
            continue
        value = preds.get(str(i), " ")
        sql = value.split(SEP)[0] if isinstance(value, str) else " "
        jobs.append((q["question_id"], db_path, sql, q["SQL"], a.timeout))
    with mp.Pool(a.procs) as pool:
        verdicts = dict(pool.imap_unordered(judge, jobs, chunksize=1))
    json.dump({str(k): v for k, v in sorted(verdicts.items())}, open(a.out, "w"))
    correct = sum(verdicts.values())
    print(f"floor: {correct}/{len(verdicts)} correct", file=sys.stderr)


if __name__ == "__main__":
    main()
