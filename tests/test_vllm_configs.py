"""vLLM's per-platform config files (compiler/ir/vllm_configs.py): TPU platform names as vLLM derives them,
vLLM's lookup (case key, else the default entry), and writing one entry while the rest of the file stays as
it was, byte for byte."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from compiler.ir import vllm_configs as vc
from compiler.ir.config import Config

# A GPU platform file as vLLM's ConfigManager writes it (json.dump(indent=2) and a newline)
H100 = [
    {"key": {}, "config": {"block_sizes": [2048, 16], "num_warps": 8, "indexing": ["pointer", "tensor_descriptor"]}},
    {"key": {"hidden_size": 4096, "num_tokens": 128}, "config": {"block_sizes": [1, 4096], "num_warps": 4}},
]
H100_TEXT = json.dumps(H100, indent=2) + "\n"
TUNED = {"block_sizes": [8, 4096], "pallas_loop_type": "unroll"}


def test_tpu_platform_names_are_vllms_canonical_device_names() -> None:
    # vLLM's TPU platform says `TPU {tpu_info TpuChip member}`; utils.canonicalize_gpu_name lowercases it and
    # makes runs of spaces, '/' and '-' one '_'
    assert vc.device_name("v5e") == "TPU V5E"
    assert {c: vc.platform_name(c) for c in ("v4", "v5e", "v5p", "v6e", "v7x")} == {
        "v4": "tpu_v4", "v5e": "tpu_v5e", "v5p": "tpu_v5p", "v6e": "tpu_v6e", "v7x": "tpu_v7x"}
    assert vc.platform_name("ironwood") == "tpu_v7x"
    assert vc.canonical_platform("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3"
    assert vc.canonical_platform("NVIDIA A100-SXM4 / 80GB") == "nvidia_a100_sxm4_80gb"


def test_case_keys_compare_as_vllms_casekey_string() -> None:
    assert vc.case_key_text({"num_tokens": 128, "hidden_size": 4096}) == '{"hidden_size":4096,"num_tokens":128}'
    assert vc.case_key_text(None) == vc.case_key_text({}) == "{}"
    assert vc.describe_key({"num_tokens": 128, "hidden_size": 4096}) == "hidden_size=4096, num_tokens=128"
    assert vc.describe_key({}) == "default entry"


def test_a_shape_sets_case_key_is_its_origins() -> None:
    class Origin:  # what the input generator reader sets on a ShapeOrigin: a dict, or a key written as a string
        def __init__(self, key: object) -> None:
            self.case_key = key

    assert vc.case_key_of(Origin({"num_tokens": 128, "hidden_size": 4096})) == {"hidden_size": 4096, "num_tokens": 128}
    assert vc.case_key_of(Origin('{"hidden_size":4096}')) == {"hidden_size": 4096}  # CaseKey's string form
    assert vc.case_key_of(Origin("4096")) is None and vc.case_key_of(Origin({})) is None
    assert vc.case_key_of(None) is None  # a shape line


def test_op_name_is_register_kernels_name_else_the_functions() -> None:
    def name(decorators: str) -> str:
        return vc.op_name(ast.parse(f"{decorators}\ndef f(x):\n    pass\n").body[0])

    assert name('@register_kernel("my_op", config_picker=p)') == "my_op"
    assert name('@vllm.register_kernel(op_name="other")') == "other"
    assert name("@register_kernel(config_picker=p)") == "f"
    assert name("@register_kernel") == "f"
    assert name("@helion.kernel(config=c)") == "f"


def test_lookup_takes_the_case_keys_entry_else_the_default(tmp_path: Path) -> None:
    path = tmp_path / "nvidia_h100.json"
    assert vc.lookup(path, {"hidden_size": 4096}) is None  # no file
    path.write_text(H100_TEXT)
    exact = vc.lookup(path, {"num_tokens": 128, "hidden_size": 4096})
    assert exact is not None and exact.config == H100[1]["config"] and not exact.is_default
    fallback = vc.lookup(path, {"hidden_size": 5120, "num_tokens": 128})
    assert fallback is not None and fallback.is_default and fallback.config == H100[0]["config"]
    path.write_text(json.dumps(H100[1:]))
    assert vc.lookup(path, {"hidden_size": 5120}) is None  # neither the key nor a default


def test_writing_an_entry_adds_it_and_keeps_the_file_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "configs" / "rms" / "tpu_v5e.json"
    path.parent.mkdir(parents=True)
    path.write_text(H100_TEXT)
    assert vc.write_entry(path, {"num_tokens": 1, "hidden_size": 2048}, TUNED) is False
    text = path.read_text()
    assert text.startswith(H100_TEXT.rstrip().removesuffix("]").rstrip())  # what was there, unchanged
    assert json.loads(text) == [*H100, {"key": {"hidden_size": 2048, "num_tokens": 1}, "config": TUNED}]
    assert text == json.dumps(json.loads(text), indent=2) + "\n"  # the new entry in the file's own format
    found = vc.lookup(path, {"hidden_size": 2048, "num_tokens": 1})
    assert found is not None and Config(found.config) == Config(TUNED)


def test_writing_an_existing_key_replaces_only_that_entry(tmp_path: Path) -> None:
    path = tmp_path / "tpu_v5e.json"
    path.write_text(H100_TEXT)
    vc.write_entry(path, {"hidden_size": 4096, "num_tokens": 128}, TUNED)
    vc.write_entry(path, None, {"block_sizes": [16, 1024]})  # the default entry
    data = json.loads(path.read_text())
    assert [e["key"] for e in data] == [e["key"] for e in H100]  # same entries, same order
    assert data[1]["config"] == TUNED and data[0]["config"] == {"block_sizes": [16, 1024]}
    assert path.read_text() == json.dumps(data, indent=2) + "\n"


def test_other_formatting_is_kept_tabs_and_one_line(tmp_path: Path) -> None:
    tabbed = tmp_path / "tabs.json"
    tabbed.write_text(json.dumps(H100, indent="\t"))  # no newline at the end either
    vc.write_entry(tabbed, {"hidden_size": 1}, TUNED)
    data = json.loads(tabbed.read_text())
    assert tabbed.read_text() == json.dumps(data, indent="\t") and len(data) == 3

    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(H100) + "\n")
    vc.write_entry(compact, {"hidden_size": 1}, TUNED)
    text = compact.read_text()
    assert text.startswith(json.dumps(H100)[:-1] + ", {") and text.count("\n") == 1


def test_a_missing_file_and_folder_are_made_in_vllms_format(tmp_path: Path) -> None:
    path = tmp_path / "configs" / "k" / "tpu_v6e.json"
    assert vc.write_entry(path, {"n": 8}, TUNED) is True
    assert path.read_text() == json.dumps([{"key": {"n": 8}, "config": TUNED}], indent=2) + "\n"
    empty = tmp_path / "empty.json"
    empty.write_text("[]\n")
    vc.write_entry(empty, None, TUNED)
    assert json.loads(empty.read_text()) == [{"key": {}, "config": TUNED}] and empty.read_text().endswith("]\n")


def test_a_file_not_in_vllms_format_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "tpu_v5e.json"
    for text in ('{"tpu_v5e": {}}', "[{", '[{"key": {}}]'):
        path.write_text(text)
        with pytest.raises(vc.VllmConfigError):
            vc.write_entry(path, None, TUNED)
        assert path.read_text() == text


def test_the_configs_folder_is_found_beside_the_file_or_above_it(tmp_path: Path) -> None:
    helion = tmp_path / "vllm" / "kernels" / "helion"
    (helion / "ops" / "rocm").mkdir(parents=True)
    (helion / "configs" / "rms_norm").mkdir(parents=True)
    assert vc.kernel_configs_dir(helion / "ops" / "rms.py", "rms_norm") == helion / "configs" / "rms_norm"
    assert vc.kernel_configs_dir(helion / "ops" / "rocm" / "rms.py", "rms_norm") == helion / "configs" / "rms_norm"
    assert vc.kernel_configs_dir(helion / "ops" / "rms.py", "silu") is None
    assert vc.platform_file(helion / "configs" / "rms_norm", "v5e") == helion / "configs" / "rms_norm" / "tpu_v5e.json"


# our own kernel, laid out as vLLM keeps its Helion ops (helion/ops/<op>.py, helion/configs/<kernel>/)
OP = '''import helion
import helion.language as hl
import torch


# helion: args(x=bf16[128, 4096], weight=bf16[4096], epsilon=1e-6)
@helion.kernel()
def rms_norm_tpu(x: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        var = torch.mean(row * row, dim=-1, keepdim=True)
        out[tile_m, :] = (row * torch.rsqrt(var + epsilon) * weight[None, :].to(torch.float32)).to(out.dtype)
    return out
'''


def test_tune_write_configs_writes_the_tpu_entry_vllm_reads(tmp_path: Path, capsys) -> None:
    from compiler.cli import main

    helion_dir = tmp_path / "helion"
    (helion_dir / "ops").mkdir(parents=True)
    op = helion_dir / "ops" / "rms_norm.py"
    op.write_text(OP)
    tune = ["tune", str(op), "--chip", "v5e", "--max-evals", "3", "--executor", "inline", "--json",
            "--store", str(tmp_path / "s.sqlite")]
    assert main([*tune, "--write-configs"]) == 1  # no configs/rms_norm_tpu/ folder: said, nothing made
    assert "no configs/rms_norm_tpu/ folder" in capsys.readouterr().err
    assert not (helion_dir / "configs").exists()

    folder = helion_dir / "configs" / "rms_norm_tpu"
    folder.mkdir(parents=True)
    (folder / "nvidia_h100.json").write_text(H100_TEXT)
    assert main([*tune, "--write-configs"]) == 0
    captured = capsys.readouterr()
    best = json.loads(captured.out)["best"]["config"]
    assert "wrote the default entry of" in captured.err and "tpu_v5e.json (new file)" in captured.err
    entry = vc.lookup(folder / "tpu_v5e.json", {"hidden_size": 4096, "num_tokens": 128})
    assert entry is not None and entry.is_default and Config(entry.config) == Config(best)
    assert (folder / "nvidia_h100.json").read_text() == H100_TEXT

    elsewhere = tmp_path / "elsewhere"
    assert main([*tune, "--write-configs", str(elsewhere)]) == 0
    assert vc.lookup(elsewhere / "rms_norm_tpu" / "tpu_v5e.json", None) is not None


def test_a_kernel_compiles_with_the_entry_vllm_runs_it_with(tmp_path: Path) -> None:
    """Where the decorator gives no config, a unit's config is the platform file's entry for the chip (the
    language server and `helion-pallas compile` build their units so); another chip's file is not read."""
    import compiler
    from compiler.results import kernel_units

    op = tmp_path / "helion" / "ops" / "rms_norm.py"
    op.parent.mkdir(parents=True)
    op.write_text(OP)
    kernel = compiler.load(op).kernels["rms_norm_tpu"]
    assert kernel_units(kernel, "v5e", op.name, str(op))[0].config is None  # no configs folder
    folder = tmp_path / "helion" / "configs" / "rms_norm_tpu"
    vc.write_entry(folder / "tpu_v5e.json", None, TUNED)
    unit = kernel_units(kernel, "v5e", op.name, str(op))[0]
    assert unit.config == Config(TUNED) and unit.config_source == "configs/rms_norm_tpu/tpu_v5e.json, default entry"
    assert unit.key != kernel_units(kernel, "v5e", op.name)[0].key  # results of either are kept apart
    assert kernel_units(kernel, "v6e", op.name, str(op))[0].config is None
    assert kernel.compile(args=unit.args, config=unit.config, chip="v5e").config == Config(block_sizes=[8], pallas_loop_type="unroll")
