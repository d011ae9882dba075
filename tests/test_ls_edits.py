"""Decorator rewrites for applying configs: exact expected text for every decorator form we support."""

from __future__ import annotations

import ast
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol.types import Position

from compiler.ir.config import Config, config_from_call
from helion_ls.rewrite.edits import EditError, apply_edit, set_config, set_configs
from helion_ls.wire.lsp import UTF8, offset_to_lsp

CFG = {"block_sizes": [1, 256], "pallas_loop_type": "unroll"}
CFG_TEXT = "helion.Config(block_sizes=[1, 256], pallas_loop_type='unroll')"
BODY = "def add(x, y):\n    return x + y\n"


def src(decorator: str, header: str = "import helion\n\n\n") -> str:
    return header + textwrap.dedent(decorator).lstrip("\n") + BODY


def edited(source: str, config=CFG, index=None) -> str:
    return apply_edit(source, set_config(source, "add", config, index))


def test_bare_decorator_gets_a_call():
    assert edited(src("@helion.kernel\n")) == src(f"@helion.kernel(config={CFG_TEXT})\n")


def test_empty_call():
    assert edited(src("@helion.kernel()\n")) == src(f"@helion.kernel(config={CFG_TEXT})\n")


def test_other_keywords_kept():
    assert edited(src("@helion.kernel(static_shapes=True)\n")) == src(
        f"@helion.kernel(static_shapes=True, config={CFG_TEXT})\n"
    )


@pytest.mark.parametrize("decorator", ["helion.aot_kernel(batched=[[0, None], None])", "helion.jit"])
def test_aot_kernel_and_jit_decorators_take_the_config(decorator):
    """The compiler compiles these (upstream aot_example, aot_compile_example), so Apply must find them."""
    call = decorator if "(" in decorator else f"{decorator}()"
    sep = "" if call.endswith("()") else ", "
    assert edited(src(f"@{decorator}\n")) == src(f"@{call[:-1]}{sep}config={CFG_TEXT})\n")


def test_imported_kernel_and_config_names():
    header = "from helion import Config, kernel\n\n\n"
    out = edited(src("@kernel(static_shapes=True)  # fast\n", header))
    assert out == src(
        "@kernel(static_shapes=True, config=Config(block_sizes=[1, 256], pallas_loop_type='unroll'))  # fast\n",
        header,
    )


def test_aliased_module_name():
    header = "import helion as hn\n\n\n"
    out = edited(src("@hn.kernel\n", header))
    assert out == src(
        "@hn.kernel(config=hn.Config(block_sizes=[1, 256], pallas_loop_type='unroll'))\n", header
    )


def test_multiline_trailing_comma_and_comments_kept():
    before = """
        @helion.kernel(
            static_shapes=True,  # shapes are fixed per shape set
            # autotune_effort="none",
        )
        """
    after = f"""
        @helion.kernel(
            static_shapes=True,  # shapes are fixed per shape set
            # autotune_effort="none",
            config={CFG_TEXT},
        )
        """
    assert edited(src(before)) == src(after)


def test_multiline_without_trailing_comma_keeps_comment_on_its_line():
    before = """
        @helion.kernel(
            static_shapes=True  # keep me here
        )
        """
    after = f"""
        @helion.kernel(
            static_shapes=True,  # keep me here
            config={CFG_TEXT}
        )
        """
    assert edited(src(before)) == src(after)


def test_multiline_closing_paren_on_last_argument_line():
    before = """
        @helion.kernel(
            static_shapes=True)
        """
    after = f"""
        @helion.kernel(
            static_shapes=True, config={CFG_TEXT})
        """
    assert edited(src(before)) == src(after)


def test_existing_config_value_replaced_only():
    before = """
        @helion.kernel(
            config=helion.Config(block_sizes=[8, 8]),  # old one
            static_shapes=True,
        )
        """
    after = f"""
        @helion.kernel(
            config={CFG_TEXT},  # old one
            static_shapes=True,
        )
        """
    assert edited(src(before)) == src(after)


def test_existing_configs_element_replaced_for_one_shape_set():
    before = "@helion.kernel(configs=[helion.Config(block_sizes=[8]), helion.Config(block_sizes=[16])])\n"
    after = f"@helion.kernel(configs=[helion.Config(block_sizes=[8]), {CFG_TEXT}])\n"
    assert edited(src(before), index=1) == src(after)


def test_configs_list_too_short_for_index_becomes_config():
    before = "@helion.kernel(static_shapes=True, configs=[helion.Config(block_sizes=[8])])\n"
    after = f"@helion.kernel(static_shapes=True, config={CFG_TEXT})\n"
    assert edited(src(before), index=3) == src(after)


def test_set_configs_replaces_config_keyword():
    source = src("@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))\n")
    out = apply_edit(source, set_configs(source, "add", [{"block_sizes": [1]}, {"block_sizes": [2]}]))
    assert out == src(
        "@helion.kernel(static_shapes=True, configs=[helion.Config(block_sizes=[1]), helion.Config(block_sizes=[2])])\n"
    )


def test_long_configs_are_one_per_line():
    source = src("@helion.kernel(\n    static_shapes=True,\n)\n")
    many = [{"block_sizes": [1, 512, 512 + i], "pallas_loop_type": "emit_pipeline"} for i in range(2)]
    out = apply_edit(source, set_configs(source, "add", many))
    item = "helion.Config(block_sizes=[1, 512, {}], pallas_loop_type='emit_pipeline')"
    assert out == src(
        "@helion.kernel(\n    static_shapes=True,\n    configs=[\n"
        f"        {item.format(512)},\n        {item.format(513)},\n    ],\n)\n"
    )


def test_double_quote_style_and_unknown_keys_round_trip():
    source = src("@helion.kernel(static_shapes=True)\n", 'import helion\n\nNAME = "x"\n\n\n')
    out = edited(source, {"pallas_loop_type": "fori_loop", "my_key": [[1, 2], "a"], "flag": True})
    assert (
        '@helion.kernel(static_shapes=True, config=helion.Config(flag=True, my_key=[[1, 2], "a"], pallas_loop_type="fori_loop"))'
        in out
    )


def test_non_ascii_before_the_keyword():
    source = src('@helion.kernel(static_shapes=True, note="größe", config=helion.Config(block_sizes=[8]))\n')
    out = edited(source)
    assert out == src(
        f'@helion.kernel(static_shapes=True, note="größe", config={CFG_TEXT.replace(chr(39), chr(34))})\n'
    )


def test_other_decorators_untouched():
    source = src("@functools.wraps(f)\n@helion.kernel\n@other\n", "import functools\nimport helion\n\n\n")
    out = edited(source)
    assert out == src(
        f"@functools.wraps(f)\n@helion.kernel(config={CFG_TEXT})\n@other\n",
        "import functools\nimport helion\n\n\n",
    )


def test_missing_kernel_and_bad_source():
    with pytest.raises(EditError, match="no @helion.kernel function named 'nope'"):
        set_config(src("@helion.kernel\n"), "nope", CFG)
    with pytest.raises(EditError, match="does not parse"):
        set_config("def (:\n", "add", CFG)
    with pytest.raises(EditError):
        set_config(src("@functools.cache\n"), "add", CFG)


def test_offsets_to_lsp_positions_count_code_units():
    text = "a\n😀b = 1\n"
    assert offset_to_lsp(text, text.index("b")) == Position(line=1, character=2)
    assert offset_to_lsp(text, text.index("b"), UTF8) == Position(line=1, character=4)
    assert offset_to_lsp(text, 0) == Position(line=0, character=0)


DECORATORS = [
    "@helion.kernel\n",
    "@helion.kernel()\n",
    "@helion.kernel(static_shapes=True)\n",
    "@helion.kernel(static_shapes=True,)\n",
    "@helion.kernel(\n    static_shapes=True,  # c\n)\n",
    "@helion.kernel(\n    static_shapes=True  # c\n)\n",
    "@helion.kernel(\n    static_shapes=True,\n    dot_precision='tf32',\n)\n",
    "@helion.kernel(config=helion.Config(block_sizes=[2]), static_shapes=True)\n",
    "@helion.kernel(\n    static_shapes=True,\n    configs=[helion.Config(block_sizes=[2]), helion.Config(block_sizes=[4])],\n)\n",
]
values = st.one_of(
    st.integers(-5, 4096), st.booleans(), st.sampled_from(["unroll", "emit_pipeline", "fori_loop"])
)
configs = st.dictionaries(
    st.sampled_from(["block_sizes", "pallas_loop_type", "pallas_load_buffer_count", "x_key"]),
    st.one_of(values, st.lists(values, max_size=4)),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(DECORATORS), configs, st.one_of(st.none(), st.integers(0, 2)))
def test_any_decorator_any_config_keeps_the_rest(decorator, config, index):
    source = src(decorator)
    out = edited(source, config, index)
    tree = ast.parse(out)
    deco = tree.body[1].decorator_list[0]
    assert isinstance(deco, ast.Call)
    kws = {k.arg: k.value for k in deco.keywords}
    before = ast.parse(source).body[1].decorator_list[0]
    before_kws = {k.arg: ast.dump(k.value) for k in getattr(before, "keywords", [])}
    for name, dump in before_kws.items():  # every other keyword unchanged
        if name not in ("config", "configs"):
            assert ast.dump(kws[name]) == dump
    if "configs" in kws:
        assert index is not None and index < 2
        assert config_from_call(kws["configs"].elts[index]) == Config(config)
    else:
        assert config_from_call(kws["config"]) == Config(config)
    assert out.count("#") == source.count("#")  # comments survive
