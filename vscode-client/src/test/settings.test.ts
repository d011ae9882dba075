import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_SETTINGS, expandPath, initializationOptions, readSettings, SETTING_KEYS, settingTarget } from "../settings";

test("no settings gives the contract's defaults", () => {
  assert.deepEqual(readSettings(undefined), { ...DEFAULT_SETTINGS });
  assert.deepEqual(readSettings({}), { ...DEFAULT_SETTINGS });
});

test("the keys are the contract's section plus the interpreter", () => {
  assert.deepEqual([...SETTING_KEYS].sort(), [
    "allowCodeExecution",
    "chip",
    "compileOnChange",
    "compilerCheck",
    "debounceMs",
    "evaluator",
    "executor",
    "interpreter",
    "libtpu",
    "maxConcurrentTunings",
    "storePath",
    "tuneBudgetSeconds",
    "tuneMaxEvals",
  ]);
});

test("valid values pass through", () => {
  const raw = {
    chip: "v6e",
    evaluator: "schedule",
    compilerCheck: "off",
    executor: "ray:10.0.0.1:6379",
    storePath: "/data/store",
    maxConcurrentTunings: 4,
    compileOnChange: true,
    debounceMs: 250,
    libtpu: false,
    tuneBudgetSeconds: 12.5,
    tuneMaxEvals: 30,
    allowCodeExecution: false,
    interpreter: "/venv/bin/python",
  };
  assert.deepEqual(readSettings(raw), raw);
});

test("wrong types and unknown choices fall back to defaults", () => {
  const settings = readSettings({
    chip: 7,
    evaluator: "guess",
    compilerCheck: "sometimes",
    executor: "kubernetes",
    maxConcurrentTunings: "many",
    compileOnChange: "yes",
    debounceMs: Number.NaN,
    libtpu: 1,
    tuneBudgetSeconds: -3,
    tuneMaxEvals: "30",
  });
  assert.equal(settings.chip, "auto");
  assert.equal(settings.evaluator, "auto");
  assert.equal(settings.compilerCheck, "auto");
  assert.equal(settings.executor, "local");
  assert.equal(settings.maxConcurrentTunings, 2);
  assert.equal(settings.compileOnChange, false);
  assert.equal(settings.debounceMs, 500);
  assert.equal(settings.libtpu, true);
  assert.equal(settings.tuneBudgetSeconds, 60);
  assert.equal(settings.tuneMaxEvals, null);
});

test("empty strings mean unset; chip names are trimmed and lower-cased", () => {
  const settings = readSettings({ chip: "  V5E ", storePath: "  ", interpreter: "", executor: " ray " });
  assert.equal(settings.chip, "v5e");
  assert.equal(settings.storePath, null);
  assert.equal(settings.interpreter, null);
  assert.equal(settings.executor, "ray");
});

test("integers are rounded and clamped to their minimum", () => {
  const settings = readSettings({ maxConcurrentTunings: 0, debounceMs: -20, tuneMaxEvals: 2.6 });
  assert.equal(settings.maxConcurrentTunings, 1);
  assert.equal(settings.debounceMs, 0);
  assert.equal(settings.tuneMaxEvals, 3);
});

test("every executor the tuner accepts passes; a zero budget is the default (the server rejects it)", () => {
  for (const executor of ["local", "local:4", "inline", "ray", "ray:10.0.0.1:6379"]) {
    assert.equal(readSettings({ executor }).executor, executor);
  }
  for (const executor of ["local:0", "local:", "inlined", "slurm"]) assert.equal(readSettings({ executor }).executor, "local");
  assert.equal(readSettings({ tuneBudgetSeconds: 0 }).tuneBudgetSeconds, 60);
  assert.equal(readSettings({ tuneBudgetSeconds: 0.5 }).tuneBudgetSeconds, 0.5);
  assert.equal(readSettings({ maxConcurrentTunings: 100 }).maxConcurrentTunings, 64);
});

test("paths expand ~ and ${workspaceFolder}", () => {
  const context = { home: "/home/ada", workspaceFolder: "/work/proj" };
  assert.equal(expandPath("~/venv/bin/python", context), "/home/ada/venv/bin/python");
  assert.equal(expandPath("~", context), "/home/ada");
  assert.equal(expandPath("~other/python", context), "~other/python");
  assert.equal(expandPath("${workspaceFolder}/.venv/bin/python", context), "/work/proj/.venv/bin/python");
  assert.equal(expandPath("${workspaceFolder}/store", {}), "${workspaceFolder}/store");
  const settings = readSettings({ storePath: "${workspaceFolder}/.helion", interpreter: "~/py" }, context);
  assert.equal(settings.storePath, "/work/proj/.helion");
  assert.equal(settings.interpreter, "/home/ada/py");
});

test("a setting is written at the narrowest level that already sets it", () => {
  assert.equal(settingTarget({ workspaceFolderValue: "v5e", workspaceValue: "v6e" }, true), "workspaceFolder");
  assert.equal(settingTarget({ workspaceValue: "v6e" }, true), "workspace");
  assert.equal(settingTarget({}, true), "workspace");
  assert.equal(settingTarget(undefined, false), "global");
});

test("the initialization options are the settings plus the tuning-progress and trust announcements", () => {
  const settings = readSettings({ chip: "v6e", tuneMaxEvals: 30 });
  assert.deepEqual(initializationOptions(settings, true), { ...settings, clientShowsTuningProgress: true, clientShowsApplyNotice: true, workspaceTrusted: true });
  assert.equal(initializationOptions(settings, false).workspaceTrusted, false);
  assert.equal(settings.chip, "v6e"); // the settings object itself is left as it was
  assert.equal("clientShowsTuningProgress" in settings, false);
});
