"""kiln's chat-template evaluator against jinja2 (Debian's python3-jinja2) in transformers'
environment (jinja2_env.py): the committed fixture files still say what jinja2 renders,
kiln renders every fixture and thousands of random expressions the same way, and refuses
what jinja2 refuses. Not part of `make test` (jinja2 is a reference only):

    make test-chat-template-reference
"""

import json
import os
import random

import pytest

jinja2 = pytest.importorskip("jinja2")

import kiln  # noqa: E402

import jinja2_env  # noqa: E402  (tests/reference is on sys.path under pytest's rootdir-relative import)

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def load(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    path = tmp_path_factory.mktemp("chat_template_reference")
    kiln.llm.make_model(path, "qwen3_moe", "tiny", seed=0)
    return kiln.llm.load(path, "f32").tokenizer


def kiln_render(tok, template, variables):
    variables = dict(variables)
    messages = variables.pop("messages", [])
    add_generation_prompt = variables.pop("add_generation_prompt", False)
    return tok.apply_chat_template(messages, chat_template=template, add_generation_prompt=add_generation_prompt,
                                   tokenize=False, **variables)


def test_jinja_cases_file_is_current():
    for case in load("jinja_cases.json"):
        if "expected" in case:
            assert jinja2_env.render(case["template"], case["vars"]) == case["expected"], case["name"]
        else:
            with pytest.raises(Exception):
                jinja2_env.render(case["template"], case["vars"])


def test_chat_template_cases_file_is_current():
    for case in load("chat_template_cases.json"):
        with open(os.path.join(DATA, "chat_templates", case["template"]), encoding="utf-8") as f:
            template = f.read()
        got = jinja2_env.render_chat(template, case["messages"], case["add_generation_prompt"], case["kwargs"],
                                     case["special_tokens"])
        assert got == case["expected"], (case["template"], case["name"])


def test_kiln_renders_the_jinja_cases(tok):
    for case in load("jinja_cases.json"):
        if "expected" in case:
            assert kiln_render(tok, case["template"], case["vars"]) == case["expected"], case["name"]
        else:
            with pytest.raises((ValueError, TypeError)):
                kiln_render(tok, case["template"], case["vars"])


# Random expressions: atoms, operators, filters, tests, methods, slices, conditionals.
ATOMS = ["0", "1", "-3", "7", "2.5", "0.1", "'a'", "'Hello World'", "''", "' x '", "'héllo'", "none", "true",
         "false", "[]", "[1, 2, 3]", "['b', 'a']", "{}", "{'k': 1, 'j': [2]}", "(1, 'x')", "s", "n", "l", "d",
         "missing", "m.role", "m.content", "l[0]", "l[-1]", "d.k"]
BINARY = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
# Filters that return generators in jinja2 are listed with |list: a generator prints as
# its repr, which no other implementation reproduces.
FILTERS = ["length", "string", "trim", "tojson", "upper", "lower", "first", "last", "list", "reverse|list", "sort",
           "unique|list", "join(',')", "default('D')", "int", "float", "abs", "items|list", "title", "capitalize",
           "safe", "replace('l', 'L')", "wordcount", "map('string')|list", "select('odd')|list", "sum", "max",
           "min"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
         "odd", "even", "true", "false", "boolean", "lower", "upper", "divisibleby 2", "in [1, 'a']"]
# dict.items() / keys() are lists in kiln: printed bare, Python's views print as
# dict_items([...]), so they are listed first.
METHODS = [".upper()", ".strip()", ".split()", ".split('l')", ".startswith('H')", ".endswith('d')", ".items()|list",
           ".keys()|list", ".get('k')", ".replace('o', '0')", ".lstrip('H')", ".title()", ".find('o')"]


def random_expression(rng, depth=0):
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(ATOMS)
    kind = rng.randrange(8)
    a = random_expression(rng, depth + 1)
    if kind == 0:
        return f"({a} {rng.choice(BINARY)} {random_expression(rng, depth + 1)})"
    if kind == 1:
        return f"({a}|{rng.choice(FILTERS)})"
    if kind == 2:
        return f"({a} is {'not ' if rng.random() < 0.3 else ''}{rng.choice(TESTS)})"
    if kind == 3:
        return f"({a}{rng.choice(METHODS)})"
    if kind == 4:
        # Sliced values are strings or lists: jinja2 folds constant slices of anything else
        # into undefined at compile time but raises at run time, which kiln follows.
        start = rng.choice(["", "1", "-1", "0"])
        stop = rng.choice(["", "2", "-1"])
        step = rng.choice(["", ":-1", ":2"])
        target = rng.choice(["s", "l", "m.content", "[1, 2, 3]", f"({a}|string)", f"({a}|list)"])
        return f"({target}[{start}:{stop}{step}])"
    if kind == 5:
        return f"({a} if {random_expression(rng, depth + 1)} else {random_expression(rng, depth + 1)})"
    if kind == 6:
        return f"(not {a})"
    return f"[{a}, {random_expression(rng, depth + 1)}]"


VARIABLES = {"s": "Hello World", "n": 4, "l": [3, 1, 2], "d": {"k": "v", "a": [1]},
             "m": {"role": "user", "content": " hi "}}


@pytest.mark.parametrize("seed", [20240601, 1, 2, 3])
def test_random_expressions_match_jinja2(tok, seed):
    rng = random.Random(seed)
    checked = refused = 0
    for _ in range(3000):
        template = "{{ " + random_expression(rng) + " }}"
        try:
            expected = jinja2_env.render(template, VARIABLES)
        except Exception:  # noqa: BLE001 - jinja2 refuses it: kiln must refuse it too
            with pytest.raises((ValueError, TypeError)):
                kiln_render(tok, template, VARIABLES)
            refused += 1
            continue
        assert kiln_render(tok, template, VARIABLES) == expected, template
        checked += 1
    assert checked > 1000 and refused > 100
