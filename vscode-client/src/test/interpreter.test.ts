import assert from "node:assert/strict";
import { test } from "node:test";
import { chooseInterpreter, judgeProbe, MIN_PYTHON, type InterpreterChoice } from "../interpreter";

test("the setting wins over the Python extension and the default", () => {
  assert.deepEqual(chooseInterpreter({ setting: "/venv/bin/python", pythonExtension: "/usr/bin/python3.12", platform: "linux" }), {
    command: "/venv/bin/python",
    source: "setting",
  });
});

test("without a setting the Python extension's interpreter is used", () => {
  assert.deepEqual(chooseInterpreter({ setting: "  ", pythonExtension: "/opt/py/bin/python", platform: "linux" }), {
    command: "/opt/py/bin/python",
    source: "python-extension",
  });
});

test("with neither, the platform's usual command", () => {
  assert.deepEqual(chooseInterpreter({ setting: null, pythonExtension: undefined, platform: "linux" }), {
    command: "python3",
    source: "default",
  });
  assert.equal(chooseInterpreter({ setting: undefined, pythonExtension: "", platform: "win32" }).command, "python");
});

test("in an untrusted workspace an interpreter inside the workspace is not started", () => {
  const inputs = { setting: null, pythonExtension: "/work/proj/.venv/bin/python", platform: "linux" };
  assert.equal(chooseInterpreter({ ...inputs, untrustedFolders: ["/work/proj"] }).command, "python3");
  assert.equal(chooseInterpreter({ ...inputs, untrustedFolders: ["/work/other"] }).command, "/work/proj/.venv/bin/python");
  assert.equal(chooseInterpreter({ ...inputs, untrustedFolders: [] }).source, "python-extension");
  assert.equal(chooseInterpreter({ ...inputs, setting: "/home/me/py", untrustedFolders: ["/work/proj"] }).command, "/home/me/py");
});

const choice: InterpreterChoice = { command: "/venv/bin/python", source: "setting" };
const report = (version: number[], helion: boolean): string =>
  JSON.stringify({ version, executable: "/venv/bin/python3.11", helion_ls: helion });

test("a missing interpreter is reported as not found, naming where it came from", () => {
  const verdict = judgeProbe(choice, { spawnError: "ENOENT" });
  assert.equal(verdict.ok, false);
  assert.ok(!verdict.ok && verdict.reason === "not-found");
  assert.match(!verdict.ok ? verdict.message : "", /"\/venv\/bin\/python" \(set by helion.interpreter\) was not found/);
});

test("a program that is not Python is reported with its last error line", () => {
  const verdict = judgeProbe(choice, { exitCode: 2, stdout: "", stderr: "usage: foo\nfoo: unknown option -c" });
  assert.ok(!verdict.ok && verdict.reason === "not-python");
  assert.match(!verdict.ok ? verdict.message : "", /foo: unknown option -c/);
});

test("an old Python is refused", () => {
  const verdict = judgeProbe(choice, { exitCode: 0, stdout: report([3, 10, 12], true) });
  assert.ok(!verdict.ok && verdict.reason === "too-old");
  assert.match(!verdict.ok ? verdict.message : "", new RegExp(`3\\.10\\.12.*needs Python ${MIN_PYTHON.join("\\.")}`));
});

test("a Python without helion_ls says how to install it", () => {
  const verdict = judgeProbe({ command: "python3", source: "default" }, { exitCode: 0, stdout: report([3, 11, 7], false) });
  assert.ok(!verdict.ok && verdict.reason === "missing-server");
  assert.match(!verdict.ok ? verdict.message : "", /helion_ls package is not installed.*found on PATH.*pip install/);
});

test("a good interpreter passes, even after other output", () => {
  const verdict = judgeProbe(choice, { exitCode: 0, stdout: `warning: something\n${report([3, 12, 1], true)}\n` });
  assert.deepEqual(verdict, { ok: true, executable: "/venv/bin/python3.11", version: "3.12.1" });
});
