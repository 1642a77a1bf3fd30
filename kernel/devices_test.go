package kernel

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

func TestListDevices(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"video0", "snd/pcmC0D0p", "ttyUSB1", "dri/renderD128", "null", "tty0", "kvm"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "kvm"), 0o400)
	got := listDevices(root)
	want := []abi.Device{
		{Path: filepath.Join(root, "dri/renderD128"), Class: "gpu", Access: "rw"},
		{Path: filepath.Join(root, "kvm"), Class: "kvm", Access: accessOf(t, filepath.Join(root, "kvm"))},
		{Path: filepath.Join(root, "snd/pcmC0D0p"), Class: "audio", Access: "rw"},
		{Path: filepath.Join(root, "ttyUSB1"), Class: "serial", Access: "rw"},
		{Path: filepath.Join(root, "video0"), Class: "video", Access: "rw"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listDevices:\n got  %+v\n want %+v", got, want)
	}
	if empty := listDevices(filepath.Join(root, "none")); empty == nil || len(empty) != 0 {
		t.Fatalf("no devices: %#v, want an empty list", empty)
	}
}

// accessOf is what root sees of a read-only file (root may write anyway).
func accessOf(t *testing.T, p string) string {
	if os.Geteuid() == 0 {
		return "rw"
	}
	return "r"
}
