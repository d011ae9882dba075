/**
 * The contract's `helion-pallas:` URIs for generated modules:
 * `helion-pallas:/<file path>.<kernel>.<shapeSet>.pallas.py?uri=<encoded document uri>&kernel=K&shapeSet=N`.
 * Pure (string in, string out); generatedView.ts turns the parts into a `vscode.Uri`.
 */

export const GENERATED_SCHEME = "helion-pallas";

/** The generated module a view shows: which kernel of which document, for which shape set. */
export interface GeneratedTarget {
  uri: string;
  kernel: string;
  shapeSet: number;
}

/** Components of the URI, to be passed to `Uri.from` (the query is already encoded, the path is not). */
export interface GeneratedUriParts {
  scheme: string;
  path: string;
  query: string;
}

/** Builds the URI parts for `target`; `documentPath` is the source document's path (its tab title comes from it). */
export function generatedUriParts(target: GeneratedTarget, documentPath: string): GeneratedUriParts {
  const query = new URLSearchParams({ uri: target.uri, kernel: target.kernel, shapeSet: String(target.shapeSet) });
  const path = documentPath.startsWith("/") ? documentPath : `/${documentPath}`;
  return {
    scheme: GENERATED_SCHEME,
    path: `${path}.${target.kernel}.${target.shapeSet}.pallas.py`,
    query: query.toString(),
  };
}

/** Reads the target back from a URI's query; null when the query is not one this extension wrote. */
export function parseGeneratedQuery(query: string): GeneratedTarget | null {
  const params = new URLSearchParams(query);
  const uri = params.get("uri");
  const kernel = params.get("kernel");
  const shapeSetText = params.get("shapeSet");
  if (!uri || !kernel || shapeSetText === null || !/^\d+$/.test(shapeSetText)) return null;
  return { uri, kernel, shapeSet: Number(shapeSetText) };
}

/**
 * A source-map entry of helion/generatedCode: a generated line and the kernel source range it came from, in the
 * document `uri` (the file, or the notebook cell holding it).
 */
export interface SourceMapEntry {
  line: number;
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  uri?: string;
}

/** How specific a range is: fewest lines first, then the widest on its line (smaller ranks first). */
function rank(range: SourceMapEntry["range"]): [number, number] {
  return [range.end.line - range.start.line, range.start.character - range.end.character];
}

/**
 * The generated line of the code from `sourceLine`: among the entries whose source range holds it, the one
 * spanning the fewest lines (the statement on that line, not the loop around it) and then the widest (the
 * whole statement, not a sub-expression named on a line of its own, nor a line about an access, which maps to
 * the access's start only); the first such line on a tie; when none
 * holds it, the one whose range starts closest above it; null for an empty map. The same rule as the
 * compiler's `compiler/codegen/source_map.py`.
 */
export function generatedLineFor(sourceMap: readonly SourceMapEntry[], sourceLine: number): number | null {
  let holding: SourceMapEntry | null = null;
  let above: SourceMapEntry | null = null;
  for (const entry of sourceMap) {
    const { start, end } = entry.range;
    if (start.line <= sourceLine && sourceLine <= end.line) {
      if (holding === null) {
        holding = entry;
      } else {
        const [a, b] = [rank(entry.range), rank(holding.range)];
        if (a[0] < b[0] || (a[0] === b[0] && a[1] < b[1])) holding = entry;
      }
    }
    if (start.line <= sourceLine && (above === null || start.line > above.range.start.line)) above = entry;
  }
  return (holding ?? above)?.line ?? null;
}

/** Where generated line `line` comes from: its statement's own entry (the first one), with its document. */
export function sourceEntryFor(sourceMap: readonly SourceMapEntry[], line: number): SourceMapEntry | null {
  return sourceMap.find((entry) => entry.line === line) ?? null;
}

/**
 * The entries of `sourceMap` whose range is in document `uri` (a file, or a notebook cell the cursor is in);
 * an entry that names no document is in `kernelDocument`, the document the kernel belongs to.
 */
export function entriesIn(sourceMap: readonly SourceMapEntry[], uri: string | undefined, kernelDocument: string): SourceMapEntry[] {
  return sourceMap.filter((entry) => (entry.uri ?? kernelDocument) === uri);
}
