// Package sdk is the home of Kairo's SDKs: sdk/client for programs (binary
// skills, UIs, scripts) that talk to the kernel over its Unix socket, and,
// with the plugin engine, the guest SDK for WebAssembly plugins.
package sdk
