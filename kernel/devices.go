package kernel

import (
	"context"
	"os"
	"path/filepath"
	"sort"

	"github.com/kairo-os/kairo/abi"
	"golang.org/x/sys/unix"
)

// deviceClasses maps /dev globs to the classes device.list reports: the
// devices a skill might be granted (cameras, GPUs, sound, serial ports).
var deviceClasses = []struct{ glob, class string }{
	{"dri/*", "gpu"},
	{"nvidia[0-9]*", "gpu"},
	{"video[0-9]*", "video"},
	{"snd/*", "audio"},
	{"ttyUSB[0-9]*", "serial"},
	{"ttyACM[0-9]*", "serial"},
	{"input/event[0-9]*", "input"},
	{"kvm", "kvm"},
}

func (k *Kernel) registerDevices() {
	k.Register(Method{Name: abi.MethodDeviceList, Summary: "the host's devices a skill could be granted", Handler: func(context.Context, *Call) (any, error) {
		return listDevices("/dev"), nil
	}})
}

// listDevices finds the devices of deviceClasses under root.
func listDevices(root string) []abi.Device {
	out := []abi.Device{}
	for _, dc := range deviceClasses {
		paths, _ := filepath.Glob(filepath.Join(root, dc.glob))
		for _, p := range paths {
			fi, err := os.Stat(p)
			if err != nil || fi.IsDir() {
				continue
			}
			access := ""
			if unix.Access(p, unix.R_OK) == nil {
				access += "r"
			}
			if unix.Access(p, unix.W_OK) == nil {
				access += "w"
			}
			out = append(out, abi.Device{Path: p, Class: dc.class, Access: access})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
