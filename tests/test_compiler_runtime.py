"""compiler/tpu/runtime.py's process settings: XLA's CPU backend takes the faster-compiling emitters for
interpret-mode runs unless the user chose otherwise."""

import os

from compiler.tpu import runtime


def test_the_fast_cpu_compile_flag_is_added_to_the_users_flags(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    runtime.prefer_fast_cpu_compiles()
    assert os.environ["XLA_FLAGS"].split() == ["--xla_dump_to=/tmp/x", *runtime.FAST_CPU_COMPILE]


def test_a_users_own_choice_of_each_flag_is_kept(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    runtime.prefer_fast_cpu_compiles()
    assert os.environ["XLA_FLAGS"].split() == ["--xla_cpu_use_fusion_emitters=true", runtime.FAST_CPU_COMPILE[1]]
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_parallel_codegen_split_count=4")
    runtime.prefer_fast_cpu_compiles()
    assert os.environ["XLA_FLAGS"].split() == ["--xla_cpu_parallel_codegen_split_count=4", runtime.FAST_CPU_COMPILE[0]]
    monkeypatch.delenv("XLA_FLAGS")
    runtime.prefer_fast_cpu_compiles()
    assert os.environ["XLA_FLAGS"].split() == list(runtime.FAST_CPU_COMPILE)
