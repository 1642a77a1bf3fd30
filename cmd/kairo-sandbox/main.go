// Command kairo-sandbox is the sandbox helper alone: what `kairo` does when
// it is started as the helper, in a binary that links nothing else, so
// that it starts faster. kairo up uses it when it lies beside kairo.
package main

import "github.com/kairo-os/kairo/sandbox"

func main() {
	if sandbox.IsHelper() {
		sandbox.HelperMain()
	}
	println("kairo-sandbox: the kernel starts this helper; run kairo instead")
}
