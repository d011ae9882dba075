import assert from "node:assert/strict";
import { test } from "node:test";
import { describeRun, TuningTracker, waitingForChip, type TuningPhase, type TuningStateParams } from "../tuningModel";

const fmt = (s: number): string => `${s * 1000}ms`;
const state = (shapeSet: number, phase: TuningPhase, evaluated: number, total: number, best: number | null = null): TuningStateParams => ({
  uri: "file:///a.py",
  kernel: "attention",
  shapeSet,
  state: phase,
  evaluated,
  total,
  best: best === null ? null : { config: {}, seconds: best },
  message: null,
});

test("a run starts on its first notification and its increments add up to 100", () => {
  const tracker = new TuningTracker(fmt);
  const first = tracker.update(state(0, "queued", 0, 30));
  assert.equal(first.started, true);
  assert.equal(first.increment, 0);
  const mid = tracker.update(state(0, "running", 15, 30, 0.002));
  assert.equal(mid.started, false);
  assert.equal(mid.increment, 50);
  assert.equal(mid.message, "running 15/30, best 2ms");
  const end = tracker.update(state(0, "done", 30, 30, 0.001));
  assert.equal(end.finished, true);
  assert.equal(first.increment + mid.increment + end.increment, 100);
  assert.deepEqual(tracker.active(), []);
});

test("several shape sets make one run that ends when all are final", () => {
  const tracker = new TuningTracker(fmt);
  tracker.update(state(0, "running", 10, 20));
  const second = tracker.update(state(1, "queued", 0, 20));
  assert.equal(second.started, false);
  assert.equal(second.increment, 0);
  const firstDone = tracker.update(state(0, "done", 20, 20, 0.003));
  assert.equal(firstDone.finished, false);
  assert.equal(firstDone.increment, 0, "the bar already showed 50% before the second set's total was known");
  assert.equal(firstDone.message, "set 0: done 20/20, set 1: queued 0/20, best 3ms");
  assert.equal(tracker.active().length, 1);
  assert.equal(tracker.update(state(1, "running", 10, 20)).increment, 25);
  const end = tracker.update(state(1, "cancelled", 14, 20));
  assert.equal(end.finished, true);
  assert.equal(end.increment, 25);
});

test("progress never goes backwards when a total grows", () => {
  const tracker = new TuningTracker(fmt);
  tracker.update(state(0, "running", 8, 10));
  const grown = tracker.update(state(0, "running", 9, 40));
  assert.equal(grown.increment, 0);
});

test("a final notification for an unknown run does not start one", () => {
  const tracker = new TuningTracker(fmt);
  const update = tracker.update(state(0, "stale", 0, 0));
  assert.equal(update.started, false);
  assert.equal(update.finished, true);
});

test("a new run after a finished one starts again; clear drops all runs", () => {
  const tracker = new TuningTracker(fmt);
  tracker.update(state(0, "running", 1, 2));
  tracker.update(state(0, "failed", 1, 2));
  assert.equal(tracker.update(state(0, "queued", 0, 2)).started, true);
  assert.equal(tracker.clear().length, 1);
  assert.deepEqual(tracker.active(), []);
});

test("failure messages are part of the description", () => {
  const tracker = new TuningTracker(fmt);
  const update = tracker.update({ ...state(0, "failed", 3, 30), message: "no valid config" });
  assert.equal(describeRun(update.run, fmt), "failed 3/30 — no valid config");
});

test("the notification uses the server's words for the state, the same as its code lens", () => {
  const tracker = new TuningTracker(fmt);
  const starting = tracker.update({ ...state(0, "running", 0, 0), title: "Tuning… starting the tuner" });
  assert.equal(starting.message, "Tuning… starting the tuner");
  const mid = tracker.update({ ...state(0, "running", 8, 30, 0.002), title: "Tuning… 8/30" });
  assert.equal(mid.message, "Tuning… 8/30, best 2ms");
});

test("a run whose open shape sets all wait for the chip says its place in line", () => {
  const tracker = new TuningTracker(fmt);
  const { run } = tracker.update({ ...state(0, "queued", 0, 0), place: 2, title: "Waiting for the TPU, 2nd in line…" });
  assert.equal(waitingForChip(run), "2nd in line for the TPU");
  tracker.update({ ...state(1, "queued", 0, 0), place: 3 });
  assert.equal(waitingForChip(run), "2nd in line for the TPU");
  tracker.update({ ...state(0, "running", 1, 10), place: 0 });
  assert.equal(waitingForChip(run), null); // one of them holds the chip now
  const other = new TuningTracker(fmt).update(state(0, "queued", 0, 0)).run;
  assert.equal(waitingForChip(other), null); // queued for a tuning slot, not for the chip
});
