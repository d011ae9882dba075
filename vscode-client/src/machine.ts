/**
 * The server's machine and the chip the editor compiles for, in the words the status bar shows. Pure: no
 * `vscode` import, so the wording is unit-tested without an editor.
 */

/** helion/machine: this machine's TPU as the server found it (chip null: none, and why). */
export interface MachineInfo {
  chip: string | null;
  deviceKind: string | null;
  count: number;
  whyNone: string;
  /** What `helion.chip: auto` compiles for where the machine has no TPU. */
  fallbackChip: string;
}

/** The chip `setting` ("auto" or a chip name) means on `machine` (unknown yet: the fallback "v7x"). */
export function effectiveChip(setting: string, machine: MachineInfo | undefined): string {
  if (setting !== "auto") return setting;
  return machine?.chip ?? machine?.fallbackChip ?? "v7x";
}

/**
 * "TPU v5 lite (this machine)", "v7x (model: no TPU here)", "v7x (model: helion.chip; this machine has TPU v5
 * lite)"; before the server answered, the chip alone.
 */
export function chipLabel(setting: string, machine: MachineInfo | undefined): string {
  const chip = effectiveChip(setting, machine);
  if (machine === undefined) return chip;
  if (machine.chip === chip) return `${machine.deviceKind ?? chip}${machine.count > 1 ? ` ×${machine.count}` : ""} (this machine)`;
  if (machine.chip === null) return `${chip} (model: ${machine.whyNone || "no TPU here"})`;
  return `${chip} (model: ${setting === "auto" ? "" : "helion.chip; "}this machine has ${machine.deviceKind})`;
}
