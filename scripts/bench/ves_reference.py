#!/usr/bin/env python3
"""Reference timing loop for scripts/bench/ves_bench.sh.

A REIMPLEMENTATION, written for this benchmark from the documented semantics of the official
scripts (BIRD dev's evaluation_ves.py for VES, BIRD mini-dev's evaluation_ves.py for R-VES); it
is not a copy of either. It times the way they do: one pair at a time; a pair is timed only when
set(prediction rows) == set(gold rows); each of `repeats` rounds opens a fresh connection for the
prediction, then one for gold, and times (VES) cursor.execute alone, i.e. up to the first row,
or (R-VES) cursor() + execute + fetchall + close; ratio = t_gold / t_pred; ratios outside mean +- 3 sigma
(numpy's population sigma, strict bounds) are dropped and the rest averaged (no ratio left: 0).
VES = mean of sqrt(ratio) * 100, R-VES = mean of sqrt(step reward) * 100 with the steps
1.25 (>= 2), 1 (>= 1), 0.75 (>= 0.5), 0.5 (>= 0.25), 0.25 (> 0), 0 (incorrect).
Left out: the per-pair timeout (the official scripts use the func_timeout package; the pairs
benchmarked here all finish), and the process pool (the official default is one process).

  ves_reference.py --questions dev.json --db-root dev_databases --pred predict_dev.json
                   --metric ves|rves --repeats 100 --out ratios.json

The output has, per question id, the ratio, the reward and a status: ok (the same set of rows,
timed), incorrect, or error (a query failed), so EX verdicts can be compared too.
"""
import argparse
import json
import math
import os
import sqlite3
import sys
import time


def clean_abnormal(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    return [v for v in values if mean - 3 * sd < v < mean + 3 * sd]


def timed(sql, db_path, whole):
    conn = sqlite3.connect(db_path)
    if whole:  # mini-dev: the clock covers cursor(), execute, fetchall and close
        start = time.time()
        cursor = conn.cursor()
        cursor.execute(sql)
        cursor.fetchall()
        conn.close()
        return time.time() - start
    cursor = conn.cursor()  # BIRD dev: execute alone (up to the first row)
    start = time.time()
    cursor.execute(sql)
    return time.time() - start


def pair_ratio(pred, gold, db_path, repeats, whole):
    conn = sqlite3.connect(db_path)
    cur = conn.cursor()
    try:
        cur.execute(pred)
        pred_rows = cur.fetchall()
        cur.execute(gold)
        gold_rows = cur.fetchall()
    except Exception:
        return 0.0, "error"
    finally:
        conn.close()
    if set(pred_rows) != set(gold_rows):
        return 0.0, "incorrect"
    ratios = []
    for _ in range(repeats):
        tp = timed(pred, db_path, whole)
        tg = timed(gold, db_path, whole)
        ratios.append(tg / tp)
    kept = clean_abnormal(ratios)
    return (sum(kept) / len(kept) if kept else 0.0), "ok"


def rves_reward(ratio):
    if ratio == 0:
        r = 0
    elif ratio >= 2:
        r = 1.25
    elif ratio >= 1:
        r = 1
    elif ratio >= 0.5:
        r = 0.75
    elif ratio >= 0.25:
        r = 0.5
    else:
        r = 0.25
    return math.sqrt(r) * 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", required=True)
    ap.add_argument("--db-root", required=True)
    ap.add_argument("--pred", required=True)
    ap.add_argument("--metric", choices=["ves", "rves"], required=True)
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    questions = json.load(open(a.questions))
    preds = json.load(open(a.pred))
    out, scores, by_diff = {}, [], {}
    for i, q in enumerate(questions):
        db_path = os.path.join(a.db_root, q["db_id"], q["db_id"] + ".sqlite")
        if not os.path.exists(db_path):
            continue  # nl2sql skips questions whose database is missing, and so do we
        pred = preds.get(str(i), " ").split("\t----- bird -----\t")[0]
        ratio, status = pair_ratio(pred, q["SQL"], db_path, a.repeats, a.metric == "rves")
        reward = rves_reward(ratio) if a.metric == "rves" else math.sqrt(ratio) * 100
        # status: ok (correct: same set of rows), incorrect, or error (either query failed)
        out[str(q["question_id"])] = {"ratio": ratio, "reward": reward, "status": status}
        scores.append(reward)
        by_diff.setdefault(q.get("difficulty", "unknown"), []).append(reward)
    json.dump({"questions": out,
               "score": sum(scores) / len(scores) if scores else 0.0,
               "by_difficulty": {k: sum(v) / len(v) for k, v in by_diff.items()}},
              open(a.out, "w"), indent=1)
    print(f"{a.metric}: {len(scores)} questions, score {sum(scores) / max(1, len(scores)):.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
