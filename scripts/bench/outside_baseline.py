#!/usr/bin/env python3
"""The built-in `baseline` generator rebuilt as an outside program (scripts/bench/outside_overhead.sh):
the same template (prompts/generate_baseline.txt) filled with the schema nl2sql renders, one call
per sample through nl2sql's local endpoint, the last ```sql block of the answer."""
import json
import os
import re
import sys
import urllib.request

TEMPLATE = open(os.path.join(os.path.dirname(__file__), "..", "..", "prompts", "generate_baseline.txt")).read()


def call(request, prompt):
    body = {"model": request["model"], "messages": [{"role": "user", "content": prompt}]}
    if request["temperature"] is not None:
        body["temperature"] = request["temperature"]
    http = urllib.request.Request(request["base_url"] + "/chat/completions", data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json",
                                           "Authorization": "Bearer " + request["api_key"]})
    with urllib.request.urlopen(http, timeout=600) as r:
        return json.load(r)["choices"][0]["message"]["content"]


for line in sys.stdin:
    req = json.loads(line)
    prompt = (TEMPLATE.replace("{{schema}}", req["schema"]).replace("{{question}}", req["question"])
              .replace("{{evidence}}", req["evidence"] or "(none)"))
    out = []
    for _ in range(req["samples"]):
        text = call(req, prompt)
        fences = re.findall(r"```(?:sql)?\s*(.*?)```", text, flags=re.S | re.I)
        out.append({"sql": (fences[-1] if fences else text).strip(), "reasoning": text})
    print(json.dumps({"question_id": req["question_id"], "candidates": out}), flush=True)
