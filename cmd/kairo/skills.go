package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/manifests"
)

func runSkills(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "add" {
		return runSkillsAdd(ctx, args[1:])
	}
	f := newFlags("skills", "kairo skills [--json] | kairo skills add [--replace] FOLDER", `
List the binary skills the running daemon has installed: each folder of
$KAIRO_HOME/skills holding a skill.toml, as the agent runs it by name
("run NAME ARGS", the tool skill.NAME). The daemon follows the folder: a
skill copied in, changed or removed is picked up within a second. Below
the table: the folders it could not load, and why.

"kairo skills add FOLDER" checks the skill's manifest and copies its
folder in.

With --json, one JSON object per skill: name, folder, description, error.`)
	asJSON := f.Bool("json", false, "print one JSON object per skill")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var res abi.ToolsListResult
	if err := callKernel(ctx, "kairo skills", abi.MethodToolsList, nil, &res); err != nil {
		return err
	}
	var list []skillJSON
	for _, t := range res.Tools {
		if t.Source != abi.ToolSourceSkill {
			continue
		}
		list = append(list, skillJSON{Name: strings.TrimPrefix(t.Name, "skill."), Folder: filepath.Dir(t.Origin), Description: t.Description, Error: t.Error})
	}
	switch {
	case *asJSON:
		for _, s := range list {
			fmt.Printf("%s\n", marshalJSON(s))
		}
		return nil
	case len(list) == 0:
		fmt.Println("no skills; copy a skill folder into the daemon's skills folder, or `kairo skills add FOLDER`")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tFOLDER")
	for _, s := range list {
		if s.Error == "" {
			fmt.Fprintf(w, "%s\t%s\n", termLine(s.Name), termLine(s.Folder))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, s := range list {
		if s.Error != "" {
			fmt.Printf("\n%s: %s\n", termLine(s.Folder), termText(s.Error))
		}
	}
	return nil
}

// skillJSON is the --json form of an installed skill.
type skillJSON struct {
	Name        string `json:"name"`
	Folder      string `json:"folder"`
	Description string `json:"description"`
	Error       string `json:"error"` // why it is not loaded; "" when it runs
}

func runSkillsAdd(ctx context.Context, args []string) error {
	f := newFlags("skills add", "kairo skills add [--replace] FOLDER", `
Check the skill manifest FOLDER/skill.toml and copy FOLDER into the skills
folder of the data folder, as skills/NAME (NAME as the manifest gives it),
in one step. With a daemon running, wait until it has picked the skill up
and say whether it runs.`)
	replace := f.Bool("replace", false, "replace a skill of the same name installed already")
	rest, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	home := clientHome().dir
	cfg, err := manifests.Load(filepath.Join(home, "kairo.toml"))
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(cfg.SkillsPath(home))
	if err != nil {
		return err
	}
	name, err := tools.InstallSkill(rest[0], tools.SkillsFolder{Dir: dir}, *replace)
	if err != nil {
		return err
	}
	fmt.Printf("installed skill %s in %s\n", name, filepath.Join(dir, name))
	c, err := dial(ctx)
	if err != nil {
		if strings.Contains(err.Error(), "the kernel is not running") {
			fmt.Println("the daemon is not running: `kairo up` loads it")
			return nil
		}
		return err
	}
	defer c.Close()
	// The daemon rescans once the folder is quiet for a moment.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var res abi.ToolsListResult
		if err := c.Call(ctx, abi.MethodToolsList, nil, &res); err != nil {
			return callError("kairo skills add", err)
		}
		for _, t := range res.Tools {
			if t.Source != abi.ToolSourceSkill || filepath.Dir(t.Origin) != filepath.Join(dir, name) {
				continue
			}
			if t.Error != "" {
				return fmt.Errorf("the daemon does not load skill %s: %s", name, t.Error)
			}
			fmt.Printf("the daemon runs it: \"run %s ARGS\", or the tool %s\n", name, t.Name)
			return nil
		}
	}
	return fmt.Errorf("the daemon has not picked skill %s up within 5s; is %s its skills folder? `kairo skills` lists what it has", name, dir)
}
