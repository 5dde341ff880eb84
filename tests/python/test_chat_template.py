"""kiln.llm chat templates from Python: Tokenizer.apply_chat_template (transformers'
signature), chat_prompt through the folder's template, the ChatML fallback, errors."""

import json
import os
import shutil

import pytest

import kiln

TEMPLATES = os.path.join(os.path.dirname(__file__), "..", "data", "chat_templates")


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen3_moe_chat")
    kiln.llm.make_model(path, "qwen3_moe", "tiny", seed=3)
    return path


def with_template(src, dst, template_file):
    """A copy of the model folder src whose tokenizer_config names the template file's text."""
    shutil.copytree(src, dst)
    config_path = os.path.join(dst, "tokenizer_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    if template_file is None:
        del config["chat_template"]
    else:
        with open(os.path.join(TEMPLATES, template_file), encoding="utf-8") as f:
            config["chat_template"] = f.read()
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return kiln.llm.load(dst, "f32")


def test_synthetic_template_matches_chat_prompt(qwen_dir):
    model = kiln.llm.load(qwen_dir, "f32")
    tok = model.tokenizer
    assert tok.has_chat_template
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert text == tok.chat_prompt("Hi", "S")
    no_think = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    assert no_think == tok.chat_prompt("Hi", "S", enable_thinking=False) == text + "<think>\n\n</think>\n\n"
    # transformers' defaults: no generation prompt, token ids.
    ids = tok.apply_chat_template(messages)
    assert ids == tok.encode(text[: -len("<|im_start|>assistant\n")], add_special_tokens=False)


def test_qwen3_template_from_the_folder(qwen_dir, tmp_path):
    model = with_template(qwen_dir, tmp_path / "m", "qwen3.jinja")
    tok = model.tokenizer
    assert tok.chat_prompt("Hi", enable_thinking=False) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    text = tok.apply_chat_template(
        [{"role": "user", "content": "go"},
         {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": "é"}}}]}],
        tools=tools, tokenize=False)
    assert '<tools>\n{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}\n</tools>' in text
    assert text.endswith('<tool_call>\n{"name": "f", "arguments": {"x": "é"}}\n</tool_call><|im_end|>\n')
    # generate(chat=True) uses the same prompt.
    out = model.generate("Hi", max_new_tokens=2, chat=True, enable_thinking=False, return_details=True)
    assert out["prompt_tokens"] == len(tok.encode(tok.chat_prompt("Hi", enable_thinking=False), False))


def test_qwen35_template_thinking_switch(qwen_dir, tmp_path):
    tok = with_template(qwen_dir, tmp_path / "m", "qwen3_5.jinja").tokenizer
    assert tok.chat_prompt("Hi").endswith("<|im_start|>assistant\n<think>\n")
    assert tok.chat_prompt("Hi", enable_thinking=False).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    batch = tok.apply_chat_template([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]],
                                    tokenize=False)
    assert batch == ["<|im_start|>user\na<|im_end|>\n", "<|im_start|>user\nb<|im_end|>\n"]


def test_chatml_fallback_and_override(qwen_dir, tmp_path):
    tok = with_template(qwen_dir, tmp_path / "m", None).tokenizer
    assert not tok.has_chat_template
    assert tok.chat_prompt("Hi") == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    with pytest.raises(ValueError, match="has no chat template"):
        tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    assert tok.apply_chat_template([{"role": "user", "content": "x"}], chat_template="{{ messages[0].content }}!",
                                   tokenize=False) == "x!"


def test_template_errors(qwen_dir):
    tok = kiln.llm.load(qwen_dir, "f32").tokenizer
    with pytest.raises(ValueError, match=r"line 1, column 4: the template raised an exception: nope"):
        tok.apply_chat_template([], chat_template="{{ raise_exception('nope') }}", tokenize=False)
    with pytest.raises(ValueError, match="'if' is never closed"):
        tok.apply_chat_template([], chat_template="{% if x %}", tokenize=False)
    with pytest.raises(ValueError, match="steps"):
        tok.apply_chat_template([], chat_template="{% for a in range(99999) %}{% for b in range(99999) %}"
                                                  "{% endfor %}{% endfor %}", tokenize=False)
    with pytest.raises(TypeError):
        tok.apply_chat_template([{"role": "user", "content": object()}], tokenize=False)
    with pytest.raises(NotImplementedError):
        tok.apply_chat_template([{"role": "user", "content": "x"}], continue_final_message=True)
