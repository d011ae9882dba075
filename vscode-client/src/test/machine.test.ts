import { strict as assert } from "node:assert";
import { test } from "node:test";
import { chipLabel, effectiveChip, type MachineInfo } from "../machine";

const v5e: MachineInfo = { chip: "v5e", deviceKind: "TPU v5 lite", count: 1, whyNone: "", fallbackChip: "v7x" };
const none: MachineInfo = { chip: null, deviceKind: null, count: 0, whyNone: "no TPU here", fallbackChip: "v7x" };

test("auto is this machine's TPU, else the fallback chip", () => {
  assert.equal(effectiveChip("auto", v5e), "v5e");
  assert.equal(effectiveChip("auto", none), "v7x");
  assert.equal(effectiveChip("v6e", v5e), "v6e");
  assert.equal(effectiveChip("auto", undefined), "v7x");
});

test("the status bar says whose chip it is and why a figure is a model's", () => {
  assert.equal(chipLabel("auto", v5e), "TPU v5 lite (this machine)");
  assert.equal(chipLabel("v5e", v5e), "TPU v5 lite (this machine)");
  assert.equal(chipLabel("auto", { ...v5e, count: 4 }), "TPU v5 lite ×4 (this machine)");
  assert.equal(chipLabel("auto", none), "v7x (model: no TPU here)");
  assert.equal(chipLabel("v7x", v5e), "v7x (model: helion.chip; this machine has TPU v5 lite)");
  assert.equal(chipLabel("auto", undefined), "v7x");
});
