// Package layering holds no code: its test checks the project's package
// layers (docs/DESIGN.md): the operations (compute) know no optimizer and
// no trainer, the trainer (ddp) no engine, and the commands no model by
// type.
package layering
