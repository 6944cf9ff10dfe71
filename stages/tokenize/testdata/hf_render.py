"""Reference chat-template renderer for the tests: Python jinja2 configured as
Hugging Face transformers' apply_chat_template configures it.

Usage: python3 hf_render.py TEMPLATE_FILE INPUT_JSONL
Each input line: {"messages": [...], "tools": [...] | null,
"add_generation_prompt": bool, "kwargs": {...}, "special": {...},
"parse_arguments": bool}. With parse_arguments, each assistant tool call's
function.arguments given as a string is json.loads'ed first, as SGLang's chat
API (normalize_assistant_tool_call_arguments) and SpecForge's parser
(Parser._sanitize_message) do; a string that is not a JSON object fails.
Prints one line per input: {"rendered": str} or {"error": str}.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def parse_arguments(messages):
    for m in messages:
        if m.get("role") != "assistant" or not isinstance(m.get("tool_calls"), list):
            continue
        for call in m["tool_calls"]:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                args = json.loads(fn["arguments"])
                if not isinstance(args, dict):
                    raise ValueError("arguments must be a JSON object")
                fn["arguments"] = args


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    with open(sys.argv[1], encoding="utf-8") as f:
        template = env.from_string(f.read())
    out = []
    with open(sys.argv[2], encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            try:
                if row.get("parse_arguments"):
                    parse_arguments(row["messages"])
                rendered = template.render(
                    messages=row["messages"],
                    tools=row.get("tools"),
                    documents=None,
                    add_generation_prompt=row.get("add_generation_prompt", False),
                    **row.get("special", {}),
                    **row.get("kwargs", {}),
                )
                out.append(json.dumps({"rendered": rendered}, ensure_ascii=False))
            except Exception as e:  # the Go side must fail on the same rows
                out.append(json.dumps({"error": str(e)}, ensure_ascii=False))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
