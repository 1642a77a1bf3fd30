package audit_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/internal/audit"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/kairo-os/kairo/sdk/client"
	"github.com/vmihailenco/msgpack/v5"
)

// TestDaemonPublishesDenial runs a daemon as `kairo up` does (root, the
// sandbox on, [sandbox] audit at its default) and spawns a shell that
// writes in /etc: the kernel publishes kairo.sandbox.audit, saying it
// reports refusals, then kairo.sandbox.denied for the shell's process, a
// write on /etc that Landlock refused. (The test binary is the sandbox
// helper: see TestMain.)
func TestDaemonPublishesDenial(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the daemon reads the audit subsystem only as root")
	}
	if sandbox.LandlockABI() < 7 {
		t.Skipf("Landlock ABI %d logs no refusal after exec; it takes 7", sandbox.LandlockABI())
	}
	if st, err := audit.GetStatus(); err != nil || st.Enabled == audit.Locked {
		t.Skipf("the audit subsystem cannot be used here: %+v, %v", st, err)
	}
	d := host.New(host.Config{Home: t.TempDir(), Config: manifests.Default()})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, abi.SubjectSandboxAll, 1)
	if err != nil {
		t.Fatal(err)
	}
	const probe = "/etc/kairo-audit-probe"
	os.Remove(probe)
	var info abi.ProcessInfo
	if err := c.Call(ctx, abi.MethodProcessSpawn, abi.SpawnParams{Argv: abi.StringList{"/bin/sh", "-c", "echo x > " + probe}}, &info); err != nil {
		t.Fatal(err)
	}
	var sawAudit bool
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no kairo.sandbox.denied of /etc for %s (kairo.sandbox.audit seen: %v): %v", info.ID, sawAudit, err)
		}
		switch ev.Type {
		case abi.SubjectSandboxAudit:
			var data struct {
				Enabled   bool   `msgpack:"enabled"`
				Reporting bool   `msgpack:"reporting"`
				Reason    string `msgpack:"reason"`
			}
			if err := msgpack.Unmarshal(ev.Data, &data); err != nil {
				t.Fatal(err)
			}
			if !data.Enabled || !data.Reporting {
				t.Fatalf("kairo.sandbox.audit: %+v; want audit on and refusals reported", data)
			}
			sawAudit = true
		case abi.SubjectSandboxDenied:
			var dn abi.SandboxDenied
			if err := msgpack.Unmarshal(ev.Data, &dn); err != nil {
				t.Fatal(err)
			}
			if dn.ProcessID != info.ID || dn.Object != "/etc" {
				continue
			}
			if dn.Op != abi.DeniedWrite || dn.Reporter != audit.ReporterLandlock || dn.Detail != "fs.make_reg" || dn.Count < 1 {
				t.Errorf("kairo.sandbox.denied: %+v; want a write on /etc (fs.make_reg) Landlock refused", dn)
			}
			if ev.Source != "kernel/proc" {
				t.Errorf("kairo.sandbox.denied from %q; want the kernel's", ev.Source)
			}
			if !sawAudit {
				t.Error("kairo.sandbox.denied came before kairo.sandbox.audit")
			}
			if _, err := os.Stat(probe); err == nil {
				os.Remove(probe)
				t.Errorf("%s exists: the sandbox let the write through", probe)
			}
			return
		}
	}
}
