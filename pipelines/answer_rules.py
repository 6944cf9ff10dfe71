#!/usr/bin/env python3
"""A stand-in for a classifier of answers, for pipe's exec stage.

pipe writes one record a line on stdin (its JSON form, as write-jsonl
writes it); this program answers one line a record on stdout:

    {"id": ID, "accept": true}
    {"id": ID, "accept": false, "reason": CODE, "detail": TEXT}

It rejects answers that open with "As an AI" (as_an_ai) and answers
shorter than MIN_ANSWER_CHARS characters once trimmed (short_answer).
Only the standard library; each answer is flushed at once, since pipe
waits for it. Try it without pipe:

    python3 pipelines/answer_rules.py < testdata/completions/completions.jsonl
"""

import json
import sys

MIN_ANSWER_CHARS = 20


def judge(record):
    """Returns (accept, reason, detail) for one record."""
    answer = ((record.get("completion") or {}).get("answer") or "").strip()
    if answer.lower().startswith("as an ai"):
        return False, "as_an_ai", "the answer opens with " + repr(answer[:20])
    if len(answer) < MIN_ANSWER_CHARS:
        return False, "short_answer", "%d characters, fewer than %d" % (len(answer), MIN_ANSWER_CHARS)
    return True, "", ""


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        record = json.loads(line)
        accept, reason, detail = judge(record)
        answer = {"id": record["id"], "accept": accept}
        if not accept:
            answer["reason"] = reason
            answer["detail"] = detail
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
