/**
 * "Show generated Pallas": a read-only virtual document (scheme helion-pallas) whose text comes from the
 * server's helion/generatedCode request, opened beside the kernel's source and refreshed when it is saved.
 */
import * as vscode from "vscode";
import {
  entriesIn,
  GENERATED_SCHEME,
  generatedLineFor,
  generatedUriParts,
  parseGeneratedQuery,
  sourceEntryFor,
  type GeneratedTarget,
  type SourceMapEntry,
} from "./generatedUri";
import type { HelionServer } from "./server";

/** The helion/generatedCode response (the parts this view uses). */
interface GeneratedCode {
  source: string;
  sourceMap?: SourceMapEntry[];
  config?: unknown;
  chip?: string;
}

export function generatedUri(target: GeneratedTarget): vscode.Uri {
  const document = vscode.Uri.parse(target.uri);
  return vscode.Uri.from(generatedUriParts(target, document.path));
}

export class GeneratedCodeProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  private readonly sourceMaps = new Map<string, SourceMapEntry[]>();
  private readonly subscriptions: vscode.Disposable[];
  readonly onDidChange = this.changed.event;

  constructor(private readonly server: HelionServer) {
    this.subscriptions = [
      vscode.workspace.registerTextDocumentContentProvider(GENERATED_SCHEME, this),
      vscode.workspace.onDidSaveTextDocument((document) => this.refresh(document.uri.toString())),
      vscode.workspace.onDidSaveNotebookDocument((notebook) => this.refresh(notebook.uri.toString())),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration("helion.chip")) this.refresh();
      }),
      server.onDidStart(() => this.refresh()),
      vscode.workspace.onDidCloseTextDocument((document) => this.sourceMaps.delete(document.uri.toString())),
    ];
  }

  async provideTextDocumentContent(uri: vscode.Uri, token: vscode.CancellationToken): Promise<string> {
    const target = parseGeneratedQuery(uri.query);
    if (target === null) return `# Not a Helion generated-code address: ${uri.toString()}\n`;
    try {
      const code = await this.server.request<GeneratedCode>("helion/generatedCode", target, token);
      this.sourceMaps.set(uri.toString(), code.sourceMap ?? []);
      return code.source;
    } catch (error) {
      this.sourceMaps.delete(uri.toString());
      const message = error instanceof Error ? error.message : String(error);
      const lines = message.split(/\r?\n/).map((line) => `# ${line}`);
      return [`# No generated Pallas for kernel ${target.kernel} (shape set ${target.shapeSet}):`, ...lines, ""].join("\n");
    }
  }

  /**
   * Opens the view for `target` beside the source, scrolled to the code generated from the cursor's line `at`
   * (in the file, or in the notebook cell it is in: source map entries name their document).
   */
  async open(target: GeneratedTarget, at?: { uri: string; line: number }): Promise<vscode.TextEditor> {
    const uri = generatedUri(target);
    if (vscode.workspace.textDocuments.some((d) => d.uri.toString() === uri.toString())) this.changed.fire(uri);
    const document = await vscode.workspace.openTextDocument(uri);
    const editor = await vscode.window.showTextDocument(document, {
      viewColumn: vscode.ViewColumn.Beside,
      preserveFocus: true,
      preview: false,
    });
    const entries = entriesIn(this.sourceMaps.get(uri.toString()) ?? [], at?.uri, target.uri);
    const line = generatedLineFor(entries, at?.line ?? 0);
    if (line !== null && line < document.lineCount) {
      const position = new vscode.Position(line, 0);
      editor.selection = new vscode.Selection(position, position);
      editor.revealRange(new vscode.Range(position, position), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
    return editor;
  }

  /**
   * From a generated view: the kernel source the statement under the cursor comes from (the nearest mapped
   * statement above it when its own line has no entry), opened and selected. False when `editor` is no view.
   */
  async goToSource(editor: vscode.TextEditor): Promise<boolean> {
    const target = parseGeneratedQuery(editor.document.uri.query);
    if (editor.document.uri.scheme !== GENERATED_SCHEME || target === null) return false;
    const map = this.sourceMaps.get(editor.document.uri.toString()) ?? [];
    let entry = null;
    for (let line = editor.selection.active.line; line >= 0 && entry === null; line--) entry = sourceEntryFor(map, line);
    if (entry === null) return false;
    const source = await vscode.workspace.openTextDocument(vscode.Uri.parse(entry.uri ?? target.uri)); // a notebook cell, or the file
    const start = new vscode.Position(entry.range.start.line, entry.range.start.character);
    const shown = await vscode.window.showTextDocument(source, { viewColumn: vscode.ViewColumn.One, preview: false });
    shown.selection = new vscode.Selection(start, start);
    shown.revealRange(new vscode.Range(start, start), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    return true;
  }

  /** Re-reads the open views of `documentUri` (every open view when omitted). */
  refresh(documentUri?: string): void {
    for (const document of vscode.workspace.textDocuments) {
      if (document.uri.scheme !== GENERATED_SCHEME) continue;
      const target = parseGeneratedQuery(document.uri.query);
      if (target !== null && (documentUri === undefined || target.uri === documentUri)) this.changed.fire(document.uri);
    }
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.changed.dispose();
  }
}
