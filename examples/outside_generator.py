#!/usr/bin/env python3
"""A zero-shot generator as an outside program of nl2sql (standard library only).

nl2sql starts it with a config entry {"name": "command", "argv": ["python3", "<this file>"]}
and writes one JSON request per line on its stdin; it answers each with one JSON line on
stdout. Its model calls go to nl2sql's local endpoint (request["base_url"], request["api_key"]),
so nl2sql caches, replays, retries and accounts them like its own.
Protocol: docs/bring-your-own-method.md.
"""
import json
import re
import sys
import urllib.error
import urllib.request

PROMPT = """You are an expert in SQLite. Write one SQL query that answers the question.

Database schema:
{schema}

Question: {question}
Hint: {evidence}

Think step by step, then give the final query in a ```sql fenced block."""


def ask_model(request, prompt, temperature):
    body = {"model": request["model"], "messages": [{"role": "user", "content": prompt}]}
    if temperature is not None:
        body["temperature"] = temperature
    http = urllib.request.Request(
        request["base_url"] + "/chat/completions",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + request["api_key"]},
    )
    with urllib.request.urlopen(http, timeout=600) as answer:
        return json.load(answer)["choices"][0]["message"]["content"]


def final_sql(text):
    fences = re.findall(r"```(?:sql)?\s*(.*?)```", text, flags=re.S | re.I)
    sql = fences[-1] if fences else text
    return sql.strip().rstrip(";").strip()


def answer(request):
    prompt = PROMPT.format(schema=request["schema"], question=request["question"],
                           evidence=request["evidence"] or "(none)")
    candidates = []
    for _ in range(request["samples"]):
        text = ask_model(request, prompt, request["temperature"])
        candidates.append({"sql": final_sql(text), "reasoning": text})
    return {"candidates": candidates}


def main():
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = answer(request)
        except (urllib.error.URLError, KeyError, ValueError) as e:
            reply = {"error": "%s: %s" % (type(e).__name__, e)}
        reply["question_id"] = request["question_id"]
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
