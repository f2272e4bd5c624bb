#!/usr/bin/env python3
"""A selector as an outside program of nl2sql (standard library only).

Groups the candidates by their execution result and takes the largest group; when the two
largest groups are as large, asks the model which of their queries answers the question.
Configured as select.external.<label> = {"argv": ["python3", "<this file>"]} and chosen by
its label in select.method or run.selectors. Protocol: docs/bring-your-own-method.md.
"""
import json
import sys
import urllib.error
import urllib.request

PROMPT = """Database schema:
{schema}

Question: {question}
Hint: {evidence}

Query A:
{a}

Query B:
{b}

Which query answers the question correctly? Answer with the single letter A or B."""


def ask_model(request, prompt):
    body = {"model": request["model"], "temperature": 0,
            "messages": [{"role": "user", "content": prompt}]}
    http = urllib.request.Request(
        request["base_url"] + "/chat/completions",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + request["api_key"]},
    )
    with urllib.request.urlopen(http, timeout=600) as answer:
        return json.load(answer)["choices"][0]["message"]["content"]


def groups_by_result(candidates):
    groups = {}
    for c in candidates:
        result = c["result"]
        if result["error"] is not None:
            continue
        key = json.dumps([result["columns"], sorted(map(json.dumps, result["rows"]))])
        groups.setdefault(key, []).append(c)
    return sorted(groups.values(), key=len, reverse=True)


def choose(request):
    groups = groups_by_result(request["candidates"])
    if not groups:
        return {"chosen": request["candidates"][0]["id"], "explanation": "nothing executed"}
    if len(groups) == 1 or len(groups[0]) > len(groups[1]):
        return {"chosen": groups[0][0]["id"], "explanation": "largest group of %d" % len(groups[0])}
    a, b = groups[0][0], groups[1][0]
    verdict = ask_model(request, PROMPT.format(schema=request["schema"], question=request["question"],
                                               evidence=request["evidence"] or "(none)",
                                               a=a["sql"], b=b["sql"]))
    winner = b if verdict.strip().upper().startswith("B") else a
    return {"chosen": winner["id"], "explanation": "tie of %d; the model said %s" % (len(groups[0]), verdict[:40])}


def main():
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = choose(request)
        except (urllib.error.URLError, KeyError, ValueError, IndexError) as e:
            reply = {"error": "%s: %s" % (type(e).__name__, e)}
        reply["question_id"] = request["question_id"]
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
