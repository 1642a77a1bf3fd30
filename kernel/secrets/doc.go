// Package secrets keeps the operator's secrets and hides their values.
//
// A [Store] is a folder of the operator's, one file a secret, plus the
// external secrets kairo.toml names (a file, or a variable of the
// daemon's environment). A skill's manifest names the secrets it may use
// by handle, "secret:NAME" ([Handle]); the kernel reads each value with
// [Store.Get] when it spawns the skill, so a value changed while Kairo
// runs takes effect at the next spawn.
//
// A [Masker] holds the values a process tree was given and replaces each
// of them, and the forms a program most often prints them in (base64 and
// hex), with ***NAME*** in whatever would be stored or shown: output,
// tool results, errors, events ([Masker.MaskMsgpack]), log lines, model
// prompts. A [Stream] does the same on output that arrives in chunks, so
// a value split across two chunks is still masked.
//
// The package imports nothing of Kairo: the manifests check names with
// [ValidName], and the kernel, the bus and the agent hold a Masker.
package secrets
