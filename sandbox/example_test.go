package sandbox_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/kairo-os/kairo/sandbox"
)

// The default profile of a spawn without a manifest, and what a kernel
// with an older Landlock would leave open of it: a kernel that cannot
// enforce a policy exactly is refused it, unless the policy asks for best
// effort.
func ExampleDefault() {
	p := sandbox.Default("/home/ada/project", "/tmp/kairo-run-1", []string{"TERM=xterm"})
	fmt.Println("env:", strings.Join(p.Env, " "))
	fmt.Println("write:", strings.Join(p.Write, " "))
	fmt.Println("network:", p.ConnectTCP == nil && p.BindTCP == nil && !p.UDP && p.Unix == nil, "(none)")
	fmt.Printf("limits: %d processes, %d GiB of address space, %d open files\n",
		p.Limits.Processes, p.Limits.Memory>>30, p.Limits.OpenFiles)

	for _, abi := range []int{0, 4, 6} {
		miss := sandbox.Unenforced(p, abi)
		if len(miss) == 0 {
			fmt.Printf("Landlock ABI %d: enforced as written\n", abi)
			continue
		}
		fmt.Printf("Landlock ABI %d leaves open:\n", abi)
		for _, m := range miss {
			fmt.Println("  " + m)
		}
	}
	// Output:
	// env: PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/home/ada/project TMPDIR=/tmp/kairo-run-1 TERM=xterm
	// write: /home/ada/project /tmp/kairo-run-1
	// network: true (none)
	// limits: 256 processes, 4 GiB of address space, 1024 open files
	// Landlock ABI 0 leaves open:
	//   filesystem: no Landlock, every path the uid can reach is open
	// Landlock ABI 4 leaves open:
	//   devices: ioctl on the granted device files (Landlock ABI 5)
	//   ipc: signals to the kernel's other processes of the same uid (Landlock ABI 6)
	// Landlock ABI 6: enforced as written
}

// A program runs a command under the default profile. The helper is the
// program itself, which must start with
//
//	if sandbox.IsHelper() {
//		sandbox.HelperMain()
//	}
//
// A kernel that is root must also name an unprivileged uid and gid for the
// sandbox (p.UID, p.GID) that may write its folders; the helper refuses to
// run a target as root.
func ExampleCommand() {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	work, _ := os.MkdirTemp("", "work-")
	tmp, _ := os.MkdirTemp("", "tmp-")
	defer os.RemoveAll(work)
	defer os.RemoveAll(tmp)

	p := sandbox.Default(work, tmp, nil)
	if miss := sandbox.Unenforced(p, sandbox.LandlockABI()); len(miss) > 0 {
		log.Fatalf("this kernel cannot enforce the default profile (`kairo sandbox check` says what it can):\n%s", strings.Join(miss, "\n"))
	}
	c, err := sandbox.Command(self, p, []string{"sh", "-c", "echo written > $HOME/out; cat /etc/shadow"})
	if err != nil {
		log.Fatal(err)
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err = c.Start()
	if serr := c.Started(); err == nil {
		err = serr // the helper's reason, when it could not confine itself
	}
	if err != nil {
		log.Fatal(err)
	}
	err = c.Wait()
	fmt.Printf("%s(exit: %v)\n", out.String(), err)
	// It prints (not checked: it needs a kernel with Landlock):
	// cat: /etc/shadow: Permission denied
	// (exit: exit status 1)
}
