"""Commands the client runs (vscode-client registers them), named by the server's lenses and hover links."""

SHOW_GENERATED = "helion-ls.showGeneratedCode"  # {uri, kernel, shapeSet}: opens the generated module
MEASURE_ON_CHIP = "helion-ls.measureOnChip"  # {uri, kernel, shapeSet, again}: the current config timed on the TPU
