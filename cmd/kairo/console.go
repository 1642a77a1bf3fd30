package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kairo-os/kairo/abi"
	kconsole "github.com/kairo-os/kairo/internal/console"
)

func runConsole(ctx context.Context, args []string) error {
	f := newFlags("console", "kairo console [--print]", `
Open the running daemon's console — its web page — in a browser, or print
its address with the token that lets a browser in.

To open it, kairo console writes a login page holding the token into the
data folder (else $XDG_RUNTIME_DIR), as console.html, mode 0600, and hands
only that file's path to $BROWSER, else to xdg-open (with $DISPLAY or
$WAYLAND_DISPLAY set): a command line is readable by every user of the
machine, so the token is never on one. The page posts the token to the
console, which keeps it in a cookie.

With --print, or with no browser to open, it prints the address with the
token for you to paste instead; the page takes the token from the address
into a cookie and drops it from the address bar.

The console is off by default; turn it on in kairo.toml:

  [console]
  listen = "127.0.0.1:8765"

The token is in $KAIRO_HOME/console.token: whoever holds it acts as you.`)
	printOnly := f.Bool("print", false, "only print the address with its token; open no browser")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var res abi.ConsoleURLResult
	if err := callKernel(ctx, "kairo console", abi.MethodConsoleURL, nil, &res); err != nil {
		return err
	}
	if *printOnly {
		fmt.Println(res.URL)
		return nil
	}
	opener := browserCommand()
	if opener == nil {
		fmt.Println(res.URL) // no browser to open: the address is for the operator to paste
		return nil
	}
	page, err := writeLoginPage(res.URL)
	if err != nil {
		fmt.Println(res.URL)
		fmt.Fprintf(os.Stderr, "kairo: opened no browser: no folder of yours alone to write the login page in (%v); open the address above\n", err)
		return nil
	}
	argv := opener.argv(page)
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		os.Remove(page)
		fmt.Println(res.URL)
		fmt.Fprintf(os.Stderr, "kairo: could not open a browser (%v); open the address above\n", err)
		return nil
	}
	fmt.Printf("opening the console, %s, in a browser; kairo console --print prints its address with the token\n", originOf(res.URL))
	// The opener hands the file to the browser; kairo need not wait.
	return cmd.Process.Release()
}

// browser is the command that opens a file in a browser.
type browser []string

// argv is the command line that opens page: the path stands for a %s of
// the command, else it comes last.
func (b browser) argv(page string) []string {
	out := make([]string, 0, len(b)+1)
	placed := false
	for _, a := range b {
		if strings.Contains(a, "%s") {
			a, placed = strings.ReplaceAll(a, "%s", page), true
		}
		out = append(out, a)
	}
	if !placed {
		out = append(out, page)
	}
	return out
}

// browserCommand is $BROWSER (its first entry, as xdg-open reads it), else
// xdg-open when there is a display; nil when neither is found.
func browserCommand() browser {
	if env := os.Getenv("BROWSER"); env != "" {
		for _, entry := range strings.Split(env, ":") {
			if b := browser(strings.Fields(entry)); len(b) > 0 {
				if _, err := exec.LookPath(b[0]); err == nil {
					return b
				}
			}
		}
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return nil
	}
	if p, err := exec.LookPath("xdg-open"); err == nil {
		return browser{p}
	}
	return nil
}

// writeLoginPage writes the console's login page into the first folder
// that is the operator's alone: the data folder, else $XDG_RUNTIME_DIR.
func writeLoginPage(consoleURL string) (string, error) {
	dirs := []string{clientHome().dir}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	var why []string
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		page, err := kconsole.WriteLoginPage(abs, consoleURL)
		if err == nil {
			return page, nil
		}
		why = append(why, err.Error())
	}
	return "", errors.New(strings.Join(why, "; "))
}

// originOf is the console's address without the token.
func originOf(consoleURL string) string {
	if i := strings.Index(consoleURL, "?"); i >= 0 {
		return consoleURL[:i]
	}
	return consoleURL
}
