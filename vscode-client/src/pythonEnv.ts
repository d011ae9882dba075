/**
 * Thin glue to the Python extension (ms-python.python), used only when it is installed: its active
 * interpreter for a resource, and an event when the user picks another. The choice itself is interpreter.ts.
 */
import * as vscode from "vscode";

export const PYTHON_EXTENSION_ID = "ms-python.python";

/** The slice of the Python extension's public API (`environments`) this extension uses. */
interface PythonEnvironmentsApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string } | undefined;
    resolveEnvironment(path: { path: string } | string): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

async function api(): Promise<PythonEnvironmentsApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonEnvironmentsApi>(PYTHON_EXTENSION_ID);
  if (extension === undefined) return undefined;
  try {
    return extension.isActive ? extension.exports : await extension.activate();
  } catch {
    return undefined;
  }
}

export function pythonExtensionInstalled(): boolean {
  return vscode.extensions.getExtension(PYTHON_EXTENSION_ID) !== undefined;
}

/** The Python extension's interpreter for `resource`, or undefined without that extension (or without a choice). */
export async function pythonExtensionInterpreter(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const environments = (await api())?.environments;
  if (environments === undefined) return undefined;
  try {
    const active = environments.getActiveEnvironmentPath(resource);
    if (active === undefined) return undefined;
    const resolved = await environments.resolveEnvironment(active);
    return resolved?.executable?.uri?.fsPath ?? active.path;
  } catch {
    return undefined;
  }
}

/** Calls `listener` when the user selects another interpreter in the Python extension. */
export async function onPythonInterpreterChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  const environments = (await api())?.environments;
  return environments?.onDidChangeActiveEnvironmentPath(() => listener());
}
