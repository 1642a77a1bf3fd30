package host

import (
	"context"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/console"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/manifests"
)

// startConsole starts the web console when [console] listen is set, last,
// so it serves a daemon that is up; console.url tells the operator where.
func (d *Daemon) startConsole(home string, cfg manifests.Config) error {
	if cfg.Console.Listen != "" {
		c, err := console.New(console.Config{
			Listen: cfg.Console.Listen, AllowRemote: cfg.Console.AllowRemote,
			Home: home, Socket: d.sock, Kernel: d.kernel, Logger: d.log,
		})
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return err
		}
		d.console = c
	}
	// Registered once d.console is set: the table's lock orders the two.
	d.kernel.Register(kernel.Method{Name: abi.MethodConsoleURL, Summary: "the console's address with its token, for the operator", Quick: true, Handler: d.consoleURL})
	return nil
}

// consoleURL answers console.url: to the operator alone, as the URL holds
// the token.
func (d *Daemon) consoleURL(ctx context.Context, c *kernel.Call) (any, error) {
	if caller := c.Session.Caller(); caller.Kind != kernel.KindOperator || caller.Grants != nil {
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: %s may not read the console's token; only the operator may", caller)
	}
	if d.console == nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "the console is off: set [console] listen = \"127.0.0.1:8765\" in kairo.toml and restart kairo up")
	}
	return abi.ConsoleURLResult{URL: d.console.URL()}, nil
}

// ConsoleURL is the console's address with its token; "" when the console
// is off ([console] listen) or the daemon is not up.
func (d *Daemon) ConsoleURL() string {
	if d.console == nil {
		return ""
	}
	return d.console.URL()
}
