"""Writes tests/data/jinja_cases.json: Jinja constructs with the text jinja2 renders for
them under transformers' chat-template environment (jinja2_env.py), and templates that
jinja2 refuses. tests/cpp/test_jinja_cases.cpp renders every case with kiln and compares;
test_chat_template_jinja2.py checks that the file still agrees with jinja2.

    python3 tests/reference/make_jinja_cases.py        (needs python3-jinja2)
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import jinja2_env  # noqa: E402

# (name, template, variables)
RENDER = [
    # text and whitespace control
    ("text", "Hello, world!", {}),
    ("trailing_newline_dropped", "a\n", {}),
    ("output", "{{ x }}", {"x": "hi"}),
    ("strip_both", "a  {{- x -}}  b", {"x": 1}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "line\n    {% if true %}\n    body\n    {% endif %}\nend", {}),
    ("lstrip_not_after_text", "x {% if true %}y{% endif %}", {}),
    ("plus_disables_lstrip", "  {%+ if true %}a{% endif %}", {}),
    ("plus_disables_trim", "{% if true +%}\na{% endif %}", {}),
    ("minus_strips_newlines", "a\n\n  {%- if true -%}\n\n  b  {%- endif %}", {}),
    ("comment", "a {# note #} b\n{# whole line #}\nc", {}),
    ("comment_strip", "a {#- note -#} b", {}),
    ("raw", "{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("variable_tag_not_lstripped", "  {{ 'x' }}", {}),
    # literals and printing
    ("literals", "{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 'a' }} {{ \"b\" }} {{ true }} {{ none }} {{ True }} {{ None }}", {}),
    ("float_repr", "{{ 1e16 }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 2.5e-3 }} {{ 123456789.123 }}", {}),
    ("list_repr", "{{ [1, 'a', none, true, 2.5] }}", {}),
    ("dict_repr", "{{ {'k': 'v', 'n': [1, {'x': none}]} }}", {}),
    ("tuple_repr", "{{ (1,) }} {{ (1, 'b') }} {{ () }}", {}),
    ("string_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'a\\nb'] }}", {}),
    ("string_escapes", "{{ 'tab\\tnew\\nline \\u00e9 \\x41 back\\\\slash \\'q\\'' }}", {}),
    ("adjacent_strings", "{{ 'a' 'b' \"c\" }}", {}),
    ("undefined_prints_empty", "[{{ missing }}]", {}),
    ("none_prints_None", "{{ x }}", {"x": None}),
    ("integer_underscores", "{{ 1_000 + 1 }}", {}),
    # arithmetic
    ("arith", "{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}", {}),
    ("arith_negative", "{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** -1 }} {{ -2 ** 2 }}", {}),
    ("arith_float", "{{ 1 + 0.5 }} {{ 3 * 1.5 }} {{ 7.5 // 2 }} {{ 7.5 % 2 }} {{ 10 / 4 }}", {}),
    ("concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ missing }}", {}),
    ("string_plus", "{{ 'a' + 'b' }}", {}),
    ("string_times", "{{ 'ab' * 3 }} {{ 2 * 'x' }} {{ [1] * 2 }}", {}),
    ("list_plus", "{{ [1, 2] + [3] }}", {}),
    ("percent_format", "{{ '%s is %d' % ('x', 3) }} {{ '%s' % 'y' }} {{ '100%%' % () }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ 'a' ~ 2 * 3 }} {{ 'a' ~ 'b' + 'c' }}", {}),
    ("bool_ops", "{{ true and 'x' }} {{ false or 'y' }} {{ 0 or '' }} {{ not 1 }} {{ none and 1 }}", {}),
    # comparisons and membership
    ("compare", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", {}),
    ("compare_lists", "{{ [1, 2] < [1, 3] }} {{ [1] == [1] }} {{ {'a': 1} == {'a': 1} }}", {}),
    ("in", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 'x' in missing }}", {}),
    ("none_equality", "{{ none == none }} {{ x == none }} {{ missing == 'a' }} {{ missing != 'a' }}", {"x": None}),
    # tests
    ("tests_types", "{{ 'a' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} "
                    "{{ true is boolean }} {{ {} is mapping }} {{ [] is sequence }} {{ 'a' is iterable }} "
                    "{{ none is none }} {{ x is none }}", {"x": None}),
    ("tests_defined", "{{ x is defined }} {{ missing is defined }} {{ missing is undefined }} {{ d.k is defined }} "
                      "{{ d.nope is defined }}", {"x": 0, "d": {"k": 1}}),
    ("tests_values", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} "
                     "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} "
                     "{{ 'a' is in ['a'] }} {{ 'abc' is lower }} {{ 'ABC' is upper }}", {}),
    ("tests_negated", "{{ x is not none }} {{ x is not string }} {{ not x is defined }}", {"x": "s"}),
    ("tests_sequence_quirks", "{{ {} is sequence }} {{ missing is iterable }} {{ 'a' is sequence }} {{ 1 is iterable }}", {}),
    ("is_callable", "{{ range is callable }} {{ 'x'.upper is callable }} {{ 1 is callable }}", {}),
    # attribute and item access
    ("attr_and_item", "{{ m.role }} {{ m['content'] }} {{ l[0] }} {{ l[-1] }} {{ l.1 }}", {
        "m": {"role": "user", "content": "hi"}, "l": [10, 20, 30]}),
    ("missing_item_undefined", "[{{ l[5] }}] [{{ m.nope }}] [{{ m['nope'] }}] {{ l[5] is defined }}", {
        "l": [1], "m": {}}),
    ("string_index", "{{ s[0] }} {{ s[-1] }} {{ s[1] }}", {"s": "héllo"}),
    ("none_attr_is_undefined", "{{ x.y is defined }}", {"x": None}),
    # slicing
    ("slices", "{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[-2:] }} {{ l[::2] }} {{ l[1:-1] }} {{ l[5:] }} {{ l[3:1] }}",
     {"l": [1, 2, 3, 4]}),
    ("string_slices", "{{ s[:3] }} {{ s[::-1] }} {{ s[-2:] }} {{ s[1:4:2] }}", {"s": "héllo wörld"}),
    ("tuple_slice", "{{ (1, 2, 3)[1:] }}", {}),
    # conditional expression
    ("conditional", "{{ 'y' if x else 'n' }} {{ 'y' if not x else 'n' }} [{{ 'y' if false }}]", {"x": 1}),
    ("conditional_chain", "{{ 'a' if x == 1 else 'b' if x == 2 else 'c' }}", {"x": 2}),
    # statements
    ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} "
                     "{% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                      "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1, 2, 3] %}{{ loop.previtem is defined }}{{ loop.previtem }}-{{ loop.nextitem }};"
                      "{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}", {}),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("for_dict_keys", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("for_undefined_is_empty", "{% for x in missing %}x{% else %}none{% endfor %}", {}),
    ("for_reversed", "{% for m in l[::-1] %}{{ loop.index0 }}:{{ m }} {% endfor %}", {"l": ["a", "b", "c"]}),
    ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
                           "{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("loop_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("nested_loops", "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}"
                     "{{ loop.index }}|{% endfor %}", {}),
    ("set", "{% set x = 1 %}{% set y = x + 1 %}{{ x }}{{ y }}", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", {}),
    ("set_in_loop_scoped", "{% set y = 1 %}{% for x in [1, 2] %}{{ y }}{% set y = 5 %}{{ y }}{% endfor %}{{ y }}", {}),
    ("set_in_loop_fresh_per_iteration", "{% for x in [1, 2] %}{% if loop.first %}{% set y = 5 %}{% endif %}"
                                        "[{{ y }}]{% endfor %}", {}),
    ("set_in_if_leaks", "{% if true %}{% set y = 2 %}{% endif %}{{ y }}", {}),
    ("set_shadows_context", "{% set messages = messages[1:] %}{{ messages|length }}", {"messages": [1, 2, 3]}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}"
                  "{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("block_set", "{% set body %}\n  a {{ 1 + 1 }}\n{% endset %}[{{ body }}]", {}),
    ("with", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %}", {}),
    ("generation_block", "{% generation %}gen {{ 1 }}{% endgeneration %}", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
              "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }} [{{ greet() }}]", {}),
    ("macro_sees_top_level", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ x }}{% endmacro %}{{ m() }}", {"x": "X"}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1)|int) }}{% endif %}"
                        "{% endmacro %}{{ fact(6) }}", {}),
    ("macro_result_is_string", "{% macro m() %} x {% endmacro %}[{{ m()|trim }}] {{ m() is string }}", {}),
    ("macro_default_uses_param", "{% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('x') }}", {}),
    # str methods
    ("str_methods", "{{ s.startswith('He') }} {{ s.endswith('lo') }} {{ s.startswith(('x', 'H')) }} "
                    "{{ s.upper() }} {{ s.lower() }} {{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 1) }} "
                    "{{ s.find('l') }} {{ s.rfind('l') }} {{ s.count('l') }} {{ s.title() }} {{ s.capitalize() }}",
     {"s": "Hello"}),
    ("str_strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ t.strip('\\n') }}][{{ t.strip('x\\n') }}]",
     {"s": "  a b \n", "t": "\nxax\n"}),
    ("str_split", "{{ s.split() }} {{ s.split(' ') }} {{ s.split(' ', 1) }} {{ s.rsplit(' ', 1) }} "
                  "{{ p.split('</think>')[-1] }} {{ p.split('</think>')[0] }}",
     {"s": " a  b c ", "p": "<think>r</think>answer"}),
    ("str_join_format", "{{ ', '.join(['a', 'b']) }} {{ '{} and {}'.format('x', 'y') }} {{ '{n}!'.format(n=3) }}", {}),
    ("str_predicates", "{{ '123'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ ''.isdigit() }}", {}),
    ("unicode_strip", "[{{ s.strip() }}] [{{ s|trim }}]", {"s": "\u00a0\u3000 x \u2003"}),
    ("splitlines", "{{ 'a\\nb\\r\\nc'.splitlines() }}", {}),
    # dict methods
    ("dict_methods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} "
                     "{{ d.get('z') }} {{ d.get('z', 9) }}", {"d": {"a": 1, "b": 2}}),
    ("dict_key_named_like_method", "{{ d['items'] }} {{ d.items is callable }}", {"d": {"items": "x"}}),
    # filters
    ("filter_length", "{{ 'héllo'|length }} {{ [1, 2]|length }} {{ {'a': 1}|length }} {{ missing|length }} "
                      "{{ [1]|count }}", {}),
    ("filter_tojson", "{{ d|tojson }} {{ 'é\"\\n'|tojson }} {{ [1, 2.5, none, true]|tojson }}",
     {"d": {"b": 1, "a": [1, {"c": None}]}}),
    ("filter_tojson_options", "{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|"
                              "{{ d|tojson(separators=(',', ':')) }}|{{ 'é'|tojson(ensure_ascii=true) }}",
     {"d": {"b": 1, "a": [1, 2]}}),
    ("filter_tojson_empty", "{{ []|tojson }} {{ {}|tojson }} {{ [[]]|tojson(indent=2) }}", {}),
    ("filter_trim", "[{{ '  x \\n'|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ missing|trim }}]", {}),
    ("filter_string_safe", "{{ 1|string }} {{ none|string }} {{ [1]|string }} {{ 'a'|safe }}", {}),
    ("safe_plus_escapes", "{{ 'x'|safe + '<b>' }} {{ '<b>' + 'x'|safe }}", {}),
    ("filter_items", "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}[{{ missing|items|list }}]", {"d": {"a": 1}}),
    ("filter_default", "{{ missing|default('d') }} {{ x|default('d') }} {{ ''|default('d', true) }} "
                       "{{ missing|d('e') }} {{ none|default('n') }}", {"x": 0}),
    ("filter_join", "{{ [1, 2, 3]|join('-') }} {{ ['a', 'b']|join }} {{ l|join(', ', attribute='n') }}",
     {"l": [{"n": "x"}, {"n": "y"}]}),
    ("filter_first_last", "{{ [1, 2]|first }} {{ [1, 2]|last }} {{ 'abc'|first }} [{{ []|first }}]", {}),
    ("filter_case", "{{ 'hello world'|upper }} {{ 'HeLLo'|lower }} {{ 'hello world'|title }} "
                    "{{ 'hello World'|capitalize }}", {}),
    ("filter_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'ab'|replace('', '-') }}", {}),
    ("filter_list_reverse", "{{ 'ab'|list }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }}", {}),
    ("filter_sort", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A']|sort(case_sensitive=true) }} "
                    "{{ [3, 1]|sort(reverse=true) }} {{ l|sort(attribute='n')|map(attribute='n')|list }}",
     {"l": [{"n": 2}, {"n": 1}]}),
    ("filter_unique", "{{ [1, 2, 1, 3, 2]|unique|list }} {{ ['a', 'A', 'b']|unique|list }}", {}),
    ("filter_map_select", "{{ l|map(attribute='role')|list }} {{ [1, 2, 3, 4]|select('odd')|list }} "
                          "{{ [1, 2, 3, 4]|reject('odd')|list }} {{ l|selectattr('role', 'equalto', 'user')|list|length }} "
                          "{{ l|rejectattr('role', 'equalto', 'user')|map(attribute='role')|list }} "
                          "{{ ['a', 'b']|map('upper')|list }} {{ [0, 1, '']|select|list }}",
     {"l": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]}),
    ("filter_numbers", "{{ '42'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ -3|abs }} "
                       "{{ 2.567|round(2) }} {{ 2.5|round }} {{ [1, 2, 3]|sum }} {{ [3, 1, 2]|max }} {{ [3, 1, 2]|min }}",
     {}),
    ("filter_indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}", {}),
    ("filter_misc", "{{ 'a b  c'|wordcount }} {{ '<a>'|e }} {{ d|dictsort }} {{ 'x'|center(5) }}|{{ '%s-%s'|format(1, 2) }}",
     {"d": {"b": 1, "a": 2}}),
    ("filter_chain", "{{ ' A,b '|trim|lower|replace(',', ';') }}", {}),
    # globals
    ("range", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}", {}),
    ("dict_global", "{{ dict(a=1, b='x') }}", {}),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("joiner", "{% set j = joiner('|') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}", {}),
    # variables passed in
    ("nested_data", "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}{{ add_generation_prompt }}",
     {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
      "add_generation_prompt": True}),
    ("unicode_passthrough", "{{ s }}|{{ s|length }}|{{ s[1:3] }}|{{ s|tojson }}", {"s": "日本語🔥"}),
]

# (name, template, variables): jinja2 refuses these (at parse or render time).
ERRORS = [
    ("unclosed_if", "{% if x %}a", {}),
    ("unclosed_for", "{% for x in y %}a", {}),
    ("unclosed_tag", "{{ x ", {}),
    ("unclosed_string", "{{ 'abc }}", {}),
    ("unclosed_comment", "{# abc", {}),
    ("stray_endif", "{% endif %}", {}),
    ("unknown_tag", "{% frobnicate %}", {}),
    ("bad_expression", "{{ 1 + }}", {}),
    ("unknown_filter", "{{ 1|nosuchfilter }}", {}),
    ("unknown_test", "{{ 1 is nosuchtest }}", {}),
    ("include", "{% include 'x.html' %}", {}),
    ("raise_exception", "{{ raise_exception('Bad conversation') }}", {}),
    ("undefined_attribute", "{{ missing.attr }}", {}),
    ("undefined_arithmetic", "{{ missing + 1 }}", {}),
    ("str_plus_int", "{{ 'a' + 1 }}", {}),
    ("int_plus_str", "{{ 1 + 'a' }}", {}),
    ("division_by_zero", "{{ 1 / 0 }}", {}),
    ("modulo_by_zero", "{{ 1 % 0 }}", {}),
    ("not_callable", "{{ x() }}", {"x": 1}),
    ("not_iterable", "{% for a in 5 %}{% endfor %}", {}),
    ("macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("macro_unknown_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", {}),
    ("set_attr_on_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("break_outside_loop", "{% break %}", {}),
    ("tojson_undefined", "{{ missing|tojson }}", {}),
    ("compare_str_int", "{{ 'a' < 1 }}", {}),
    ("slice_step_zero", "{{ [1][::0] }}", {}),
    ("empty_separator", "{{ 'a'.split('') }}", {}),
    ("in_string_non_string", "{{ 1 in 'abc' }}", {}),
    ("range_too_big", "{{ range(1000000)|length }}", {}),
    ("unpack_mismatch", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    # A filter's missing required argument (a fuzzer found `attr` without one reading a
    # null undefined-name).
    ("attr_without_name", "{{ missing|attr }}", {}),
    ("attr_without_name_defined", "{{ 'a'|attr }}", {}),
]


def main():
    cases = []
    for name, template, variables in RENDER:
        try:
            expected = jinja2_env.render(template, variables)
        except Exception as e:
            raise SystemExit(f"case {name}: {type(e).__name__}: {e}") from e
        cases.append({"name": name, "template": template, "vars": variables, "expected": expected})
    for name, template, variables in ERRORS:
        try:
            jinja2_env.render(template, variables)
        except Exception as e:  # noqa: BLE001 - any refusal is what the case records
            cases.append({"name": name, "template": template, "vars": variables, "error": type(e).__name__})
        else:
            raise SystemExit(f"case {name}: jinja2 rendered it, expected an error")
    out = os.path.join(os.path.dirname(__file__), "..", "data", "jinja_cases.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
