import assert from "node:assert/strict";
import { test } from "node:test";
import { configLabel, escapeHtml, formatSeconds, renderPlotHtml, renderPlotSvg, shapeTrials, type Trial } from "../plotData";

const trial = (seconds: number | null, timestamp: number | string, block: number, verdict = "ok"): Trial => ({
  config: { block_sizes: [block, 128], pallas_loop_type: "emit_pipeline" },
  seconds,
  verdict,
  timestamp,
});

test("trials are ordered by time and the best so far only improves", () => {
  const data = shapeTrials([trial(3e-3, 30, 3), trial(5e-3, 10, 1), trial(4e-3, 20, 2), trial(3.5e-3, 40, 4)]);
  assert.deepEqual(
    data.points.map((p) => [p.index, p.seconds]),
    [
      [1, 5e-3],
      [2, 4e-3],
      [3, 3e-3],
      [4, 3.5e-3],
    ],
  );
  assert.deepEqual(
    data.bestSoFar.map((b) => b.seconds),
    [5e-3, 4e-3, 3e-3, 3e-3],
  );
  assert.equal(data.best?.index, 3);
  assert.equal(data.best?.label, 'block_sizes=[3,128], pallas_loop_type="emit_pipeline"');
});

test("trials without a time are rejected with their verdict and keep their place", () => {
  const data = shapeTrials([trial(2e-3, "2026-01-01T00:00:01Z", 1), trial(null, "2026-01-01T00:00:02Z", 2, "out_of_vmem"), trial(1e-3, "2026-01-01T00:00:03Z", 3)]);
  assert.deepEqual(data.rejected.map((r) => [r.index, r.verdict]), [[2, "out_of_vmem"]]);
  assert.deepEqual(data.points.map((p) => p.index), [1, 3]);
  assert.deepEqual(data.bestSoFar, [
    { index: 1, seconds: 2e-3 },
    { index: 3, seconds: 1e-3 },
  ]);
});

test("missing timestamps keep the server's order, after timed trials", () => {
  const data = shapeTrials([
    { config: { a: 1 }, seconds: 1 },
    { config: { a: 2 }, seconds: 2, timestamp: 5 },
    { config: { a: 3 }, seconds: 3 },
  ]);
  assert.deepEqual(data.points.map((p) => p.label), ["a=2", "a=1", "a=3"]);
});

test("no trials: nothing to plot", () => {
  assert.deepEqual(shapeTrials([]), { points: [], rejected: [], bestSoFar: [], best: null, compiler: [] });
});

test("seconds are shown in a readable unit", () => {
  assert.equal(formatSeconds(1.5), "1.5 s");
  assert.equal(formatSeconds(0.0123456), "12.3 ms");
  assert.equal(formatSeconds(4.2e-6), "4.2 µs");
  assert.equal(formatSeconds(7e-10), "0.7 ns");
});

test("config labels sort keys and escape nothing", () => {
  assert.equal(configLabel({ z: 1, a: "x" }), 'a="x", z=1');
  assert.equal(escapeHtml(`<a href="x">&'`), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
});

test("the SVG has one circle per timed trial, one mark per rejected trial, and a best-so-far line", () => {
  const data = shapeTrials([trial(3e-3, 1, 1), trial(null, 2, 2, "pruned"), trial(2e-3, 3, 3), trial(1e-2, 4, 4)]);
  const svg = renderPlotSvg(data);
  assert.equal(svg.match(/<circle /g)?.length, 3);
  assert.equal(svg.match(/class="point best"/g)?.length, 1);
  assert.equal(svg.match(/class="rejected"/g)?.length, 1);
  assert.match(svg, /<polyline class="best-line" points="[\d., ]+"\/>/);
  assert.doesNotMatch(svg, /NaN|Infinity|undefined/);
});

test("a wide range of times uses a log axis with power-of-ten ticks", () => {
  const svg = renderPlotSvg(shapeTrials([trial(1e-5, 1, 1), trial(1e-2, 2, 2)]));
  for (const tick of ["10 µs", "100 µs", "1 ms", "10 ms"]) assert.ok(svg.includes(`>${tick}</text>`), tick);
});

test("the page has no script and a strict content security policy", () => {
  const html = renderPlotHtml({ trials: [trial(1e-3, 1, 1)], best: null }, { kernel: "attention", shapeSet: 0, state: "running 1/30" });
  assert.doesNotMatch(html, /<script/i);
  assert.match(html, /default-src 'none'/);
  assert.match(html, /running 1\/30/);
  assert.match(html, /best 1 ms \(#1\)/);
  assert.match(renderPlotHtml(null, { kernel: "<k>", shapeSet: 0 }), /No configs tried yet[\s\S]*|&lt;k&gt;/);
  assert.match(renderPlotHtml(null, { kernel: "k", shapeSet: 0, error: "not compiled" }), /not compiled/);
});

test("the TPU compiler's estimates are drawn apart: at the config they estimate, never in the best so far", () => {
  const model = (seconds: number, t: number, block: number): Trial => ({ ...trial(seconds, t, block), evaluator: "model" });
  const compiler = (seconds: number, t: number, block: number): Trial => ({ ...trial(seconds, t, block), evaluator: "schedule" });
  const data = shapeTrials([model(3e-3, 1, 1), model(2e-3, 2, 2), compiler(1e-3, 3, 1), compiler(4e-3, 4, 2)]);
  assert.deepEqual(data.points.map((p) => [p.index, p.seconds]), [[1, 3e-3], [2, 2e-3]]);
  assert.deepEqual(data.bestSoFar.map((b) => b.seconds), [3e-3, 2e-3]);
  assert.equal(data.best?.index, 2);
  assert.deepEqual(data.compiler.map((c) => [c.index, c.seconds]), [[1, 1e-3], [2, 4e-3]]);
  const svg = renderPlotSvg(data);
  assert.equal((svg.match(/class="compiler"/g) ?? []).length, 2);
  assert.match(svg, /TPU compiler estimate 1 ms/);
});

test("the page says when the TPU compiler disagrees with the model's pick", () => {
  const results = {
    trials: [{ ...trial(2e-3, 1, 1), evaluator: "model" }, { ...trial(1e-3, 2, 1), evaluator: "schedule" }],
    best: null,
    compilerCheck: { verdict: "disagrees", disagrees: true, message: "TPU compiler disagrees: it ranks bs=[256] first" },
  };
  const html = renderPlotHtml(results, { kernel: "softmax", shapeSet: 0 });
  assert.match(html, /<p class="check disagrees">TPU compiler disagrees: it ranks bs=\[256\] first<\/p>/);
  assert.match(html, /TPU compiler estimate<\/span>/);
  const agreeing = renderPlotHtml({ ...results, compilerCheck: { verdict: "agrees", disagrees: false, message: "TPU compiler agrees" } }, { kernel: "softmax", shapeSet: 0 });
  assert.doesNotMatch(agreeing, /class="check disagrees"/);
});
