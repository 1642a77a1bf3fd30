// Package wasm runs Kairo's WebAssembly plugins, on wazero. [Engine] loads a
// module that speaks the plugin ABI (abi/README.md, "Plugins"), refuses one
// that does not, and runs each instance in a wazero runtime of its own,
// with a memory limit, a deadline on every call unless the plugin is
// trusted, and every pointer the guest hands over checked against its
// memory. A plugin that fails is stopped and reports a [Failure]; its
// neighbours keep serving. [Manager] runs the plugins of folders: manifests,
// grants, supervision with backoff, services between plugins, and reload
// when files change.
package wasm
