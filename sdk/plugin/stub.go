//go:build !wasip1

package plugin

import (
	"log/slog"

	"github.com/kairo-os/kairo/abi"
)

func publish(*abi.Event) error        { return ErrNotWasm }
func call(string, any) (int64, error) { return 0, ErrNotWasm }
func logLine(slog.Level, string)      {}
func now() int64                      { return 0 }
