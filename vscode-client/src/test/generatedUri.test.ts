import assert from "node:assert/strict";
import { test } from "node:test";
import { entriesIn, GENERATED_SCHEME, generatedLineFor, generatedUriParts, parseGeneratedQuery, sourceEntryFor } from "../generatedUri";

test("the URI follows the contract: <path>.<kernel>.<shapeSet>.pallas.py with uri, kernel, shapeSet", () => {
  const parts = generatedUriParts({ uri: "file:///work/examples/attention.py", kernel: "attention", shapeSet: 1 }, "/work/examples/attention.py");
  assert.equal(parts.scheme, GENERATED_SCHEME);
  assert.equal(GENERATED_SCHEME, "helion-pallas");
  assert.equal(parts.path, "/work/examples/attention.py.attention.1.pallas.py");
  assert.equal(parts.query, "uri=file%3A%2F%2F%2Fwork%2Fexamples%2Fattention.py&kernel=attention&shapeSet=1");
});

test("the query round-trips, including characters that need escaping", () => {
  const target = { uri: "file:///tmp/a%20b/x&y=z.py", kernel: "k_1", shapeSet: 12 };
  assert.deepEqual(parseGeneratedQuery(generatedUriParts(target, "/tmp/a b/x&y=z.py").query), target);
});

test("a relative path gets a leading slash", () => {
  assert.equal(generatedUriParts({ uri: "untitled:Untitled-1", kernel: "k", shapeSet: 0 }, "Untitled-1").path, "/Untitled-1.k.0.pallas.py");
});

test("queries not written by the extension are rejected", () => {
  assert.equal(parseGeneratedQuery(""), null);
  assert.equal(parseGeneratedQuery("uri=file%3A%2F%2F%2Fa.py&kernel=k"), null);
  assert.equal(parseGeneratedQuery("uri=file%3A%2F%2F%2Fa.py&kernel=k&shapeSet=-1"), null);
  assert.equal(parseGeneratedQuery("uri=&kernel=k&shapeSet=0"), null);
});

const range = (start: number, end: number) => ({ start: { line: start, character: 0 }, end: { line: end, character: 80 } });

test("the generated line for a source line: the covering entry, else the nearest one above", () => {
  const map = [
    { line: 10, range: range(12, 12) },
    { line: 14, range: range(15, 18) },
    { line: 30, range: range(20, 20) },
  ];
  assert.equal(generatedLineFor(map, 16), 14);
  assert.equal(generatedLineFor(map, 12), 10);
  assert.equal(generatedLineFor(map, 19), 14);
  assert.equal(generatedLineFor(map, 40), 30);
  assert.equal(generatedLineFor(map, 3), null);
  assert.equal(generatedLineFor([], 3), null);
});

test("a line inside a loop goes to its own statement, not to the loop's statements that come first", () => {
  const map = [
    { line: 22, range: range(16, 17) }, // `def tile_k_body(...)`: the whole loop
    { line: 24, range: range(17, 17) }, // the hl.dot statement on line 17
    { line: 24, range: range(15, 15) }, // a value from line 15 written inline into it
    { line: 26, range: range(16, 17) },
  ];
  assert.equal(generatedLineFor(map, 17), 24);
  assert.equal(generatedLineFor(map, 16), 22);
  assert.equal(generatedLineFor(map, 15), 24);
  assert.deepEqual(sourceEntryFor(map, 24)?.range, range(17, 17));
  assert.equal(sourceEntryFor(map, 23), null);
});

test("of the statements from one line, the one generated from the whole statement, not a named part of it", () => {
  const part = { start: { line: 20, character: 30 }, end: { line: 20, character: 41 } }; // `local.index`
  const whole = { start: { line: 20, character: 16 }, end: { line: 20, character: 70 } };
  const map = [
    { line: 57, range: part },
    { line: 58, range: whole },
  ];
  assert.equal(generatedLineFor(map, 20), 58);
});

test("a notebook's source map: the entries of the cell the cursor is in", () => {
  const nb = "file:///w/nb.ipynb";
  const cell = (n: number) => `vscode-notebook-cell:/w/nb.ipynb#W${n}sZmlsZQ%3D%3D`;
  const map = [
    { line: 10, range: range(2, 2), uri: cell(3) },
    { line: 14, range: range(2, 5), uri: cell(5) },
    { line: 20, range: range(7, 7) },
  ];
  assert.deepEqual(entriesIn(map, cell(5), nb).map((e) => e.line), [14]);
  assert.equal(generatedLineFor(entriesIn(map, cell(3), nb), 2), 10);
  assert.deepEqual(entriesIn(map, nb, nb).map((e) => e.line), [20]); // entries without a uri: the kernel's document
  assert.deepEqual(entriesIn(map, undefined, nb), []);
});
