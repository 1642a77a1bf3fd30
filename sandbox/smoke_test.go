package sandbox

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestSmokeDefaultProfile(t *testing.T) {
	root, err := os.MkdirTemp("", "kairo-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755) // the sandbox uid must reach its folders
	work, tmp := root+"/work", root+"/tmp"
	os.Mkdir(work, 0o700)
	os.Mkdir(tmp, 0o700)
	os.Chown(work, 65534, 65534)
	os.Chown(tmp, 65534, 65534)
	p := Default(work, tmp, nil)
	p.UID, p.GID = 65534, 65534
	p.SkipSeccomp = true
	c, err := Command(os.Args[0], p, []string{"sh", "-c", "id -u; echo hi > $HOME/f; cat $HOME/f; cat /etc/shadow"})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err = c.Start()
	if serr := c.Started(); serr != nil {
		t.Fatal(serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if !strings.Contains(out.String(), "65534\nhi\n") || !strings.Contains(errb.String(), "Permission denied") {
		t.Fatalf("out %q err %q", out.String(), errb.String())
	}
}
