"""Writes tests/data/chat_template_cases.json: conversations rendered by jinja2 (in
transformers' environment, jinja2_env.py) through the real chat templates in
tests/data/chat_templates/. tests/cpp/test_jinja_chat_templates.cpp renders the same with
kiln and compares byte for byte; test_chat_template_jinja2.py checks the file against
jinja2 again.

    python3 tests/reference/make_chat_template_cases.py        (needs python3-jinja2)
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import jinja2_env  # noqa: E402

QWEN_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
LFM2_TOKENS = {"bos_token": "<|startoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|pad|>"}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city, in °C.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {"type": "object"}}},
]

USER = [{"role": "user", "content": "What is 2+2?"}]
SYSTEM_USER = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}]
MULTI_TURN = [
    {"role": "system", "content": "Be kind."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "Tell me a joke about ünïcode 🔥"},
]
THINKING_HISTORY = [
    {"role": "user", "content": "First?"},
    {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nThe first answer."},
    {"role": "user", "content": "Second?"},
    {"role": "assistant", "content": "<think>\nAgain.\n</think>\n\nThe second answer."},
]
REASONING_FIELD = [
    {"role": "user", "content": "Why?"},
    {"role": "assistant", "content": "Because.", "reasoning_content": "  The user asks why.  "},
]
TOOL_ROUND = [
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Paris and the time?"},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
        {"type": "function", "function": {"name": "now", "arguments": {}}},
    ]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "tool", "content": "12:00"},
    {"role": "assistant", "content": "It is 21 °C at noon."},
    {"role": "user", "content": "Thanks"},
]
TOOL_CALL_NO_CONTENT = [
    {"role": "user", "content": "List files in /tmp"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "ls", "arguments": {"path": "/tmp", "flags": ["-l", "-a"],
                                                                      "opts": {"all": True}}}}]},
    {"role": "tool", "content": "a.txt"},
]
STRING_ARGUMENTS = [
    {"role": "user", "content": "Call it"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
]
LFM2_TOOLS = [
    {"role": "system", "content": "Sys."},
    {"role": "user", "content": "What is the status of 12345?"},
    {"role": "assistant", "content": "<|tool_call_start|>[get_status(id=\"12345\")]<|tool_call_end|>Checking."},
    {"role": "tool", "content": [{"status": "open"}]},
    {"role": "user", "content": "ok"},
]
LFM25_CALLS = [
    {"role": "system", "content": [{"type": "text", "text": "Sys "}, {"type": "text", "text": "prompt"}]},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "<think>hmm</think> Let me check.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo", "n": 3,
                                                                               "o": {"u": "C"}}}}]},
    {"role": "tool", "content": "cold"},
    {"role": "assistant", "content": "It is cold.", "thinking": "short"},
    {"role": "user", "content": "More"},
]

# (template file, special tokens, [(case name, messages, add_generation_prompt, kwargs)])
SUITES = [
    ("qwen3.jinja", QWEN_TOKENS, [
        ("user", USER, True, {}),
        ("user_no_thinking", USER, True, {"enable_thinking": False}),
        ("system_user", SYSTEM_USER, True, {}),
        ("multi_turn", MULTI_TURN, True, {"enable_thinking": False}),
        ("thinking_history", THINKING_HISTORY, False, {}),
        ("thinking_history_prompt", THINKING_HISTORY[:3], True, {}),
        ("reasoning_field", REASONING_FIELD, False, {}),
        ("tools", TOOL_ROUND, True, {"tools": TOOLS}),
        ("tool_call_no_content", TOOL_CALL_NO_CONTENT, True, {"tools": TOOLS[:1]}),
        ("string_arguments", STRING_ARGUMENTS, False, {}),
    ]),
    ("qwen3_5.jinja", QWEN_TOKENS, [
        ("user", USER, True, {}),
        ("user_no_thinking", USER, True, {"enable_thinking": False}),
        ("system_user", SYSTEM_USER, True, {}),
        ("multi_turn", MULTI_TURN, True, {"enable_thinking": False}),
        ("thinking_history", THINKING_HISTORY, False, {}),
        ("reasoning_field", REASONING_FIELD, True, {}),
        ("tools", TOOL_ROUND, True, {"tools": TOOLS}),
        ("tool_call_no_content", TOOL_CALL_NO_CONTENT, True, {"tools": TOOLS[:1]}),
        ("multimodal_content", [{"role": "user", "content": [{"type": "text", "text": "Describe "},
                                                             {"type": "image"}, {"type": "text", "text": " please"}]}],
         True, {"add_vision_id": True}),
    ]),
    ("qwen3_next_instruct.jinja", QWEN_TOKENS, [
        ("user", USER, True, {}),
        ("system_user", SYSTEM_USER, True, {}),
        ("multi_turn", MULTI_TURN, True, {}),
        ("thinking_history", THINKING_HISTORY, False, {}),
        ("tools", TOOL_ROUND, True, {"tools": TOOLS}),
        ("tool_call_no_content", TOOL_CALL_NO_CONTENT, True, {"tools": TOOLS[:1]}),
        ("string_arguments", STRING_ARGUMENTS, False, {}),
    ]),
    ("qwen3_next_thinking.jinja", QWEN_TOKENS, [
        ("user", USER, True, {}),
        ("system_user", SYSTEM_USER, True, {}),
        ("multi_turn", MULTI_TURN, True, {}),
        ("thinking_history", THINKING_HISTORY, False, {}),
        ("thinking_history_prompt", THINKING_HISTORY[:3], True, {}),
        ("reasoning_field", REASONING_FIELD, False, {}),
        ("tools", TOOL_ROUND, True, {"tools": TOOLS}),
        ("tool_call_no_content", TOOL_CALL_NO_CONTENT, True, {"tools": TOOLS[:1]}),
        ("string_arguments", STRING_ARGUMENTS, False, {}),
    ]),
    ("lfm2.jinja", LFM2_TOKENS, [
        ("user", USER, True, {}),
        ("system_user", SYSTEM_USER, True, {}),
        ("multi_turn", MULTI_TURN, True, {}),
        ("tools", LFM2_TOOLS, True, {"tools": [TOOLS[0]["function"], "{\"name\": \"raw\"}"]}),
    ]),
    ("lfm2_5.jinja", LFM2_TOKENS, [
        ("user", USER, True, {}),
        ("system_user", SYSTEM_USER, True, {}),
        ("calls_and_thinking", LFM25_CALLS, True, {}),
        ("preserve_thinking", LFM25_CALLS, False, {"preserve_thinking": True}),
    ]),
]


def main():
    here = os.path.dirname(__file__)
    cases = []
    for template_file, tokens, conversations in SUITES:
        with open(os.path.join(here, "..", "data", "chat_templates", template_file), encoding="utf-8") as f:
            template = f.read()
        for name, messages, add_generation_prompt, kwargs in conversations:
            cases.append({
                "template": template_file, "name": name, "special_tokens": tokens, "messages": messages,
                "add_generation_prompt": add_generation_prompt, "kwargs": kwargs,
                "expected": jinja2_env.render_chat(template, messages, add_generation_prompt, kwargs, tokens),
            })
    out = os.path.join(here, "..", "data", "chat_template_cases.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
