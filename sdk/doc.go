// Package sdk is the home of Kairo's SDKs: sdk/client for programs (binary
// skills, UIs, scripts) that talk to the kernel over its Unix socket, and
// sdk/plugin, the guest SDK for the WebAssembly plugins that the plugin
// engine (host/wasm) runs.
package sdk
