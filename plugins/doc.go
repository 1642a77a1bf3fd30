// Package plugins holds Kairo's built-in plugins, each a Go main package in a
// folder of its own, compiled to wasip1 with the guest SDK: the rule policy,
// the LLM policy, the input sources and tools. The plugin-host issue adds
// the first of them.
package plugins
